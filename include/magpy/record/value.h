// Plain data that records carry: Python scalars (atoms), tensor metadata,
// tensor blobs, and trees of Python values (for state snapshots and the
// inputs/outputs of logged calls).
//
// Nothing here depends on Python or torch: dtypes and devices are names
// ("float32", "cpu"), tensor bytes are opaque little-endian buffers.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace magpy::record {

// The Python number a lifted number is (MagPy 6.2.1).
enum class NumberType : uint8_t { Int, Float };

// An immutable Python scalar, or a tuple of them (as dict keys such as
// ("disp", 0) are). Equality is exact: the kind must match (True is not 1)
// and floats compare bit for bit.
struct Atom {
  enum class Kind : uint8_t {
    None, Bool, Int, Float, Str, Ellipsis,
    DType,         // torch.dtype, s = "float32"
    Device,        // torch.device, s = "cpu" / "cuda:0"
    Layout,        // torch.layout, s = "strided"
    MemoryFormat,  // torch.memory_format, s = "contiguous_format"
    Tuple,         // items
  };
  Kind kind = Kind::None;
  int64_t i = 0;  // Bool and Int
  double f = 0;   // Float
  std::string s;  // Str and the torch enums
  std::vector<Atom> items;  // Tuple

  static Atom none() { return {}; }
  static Atom boolean(bool b) { return {Kind::Bool, b ? 1 : 0, 0, {}, {}}; }
  static Atom integer(int64_t v) { return {Kind::Int, v, 0, {}, {}}; }
  static Atom floating(double v) { return {Kind::Float, 0, v, {}, {}}; }
  static Atom string(std::string v) { return {Kind::Str, 0, 0, std::move(v), {}}; }
  static Atom named(Kind k, std::string v) { return {k, 0, 0, std::move(v), {}}; }
  static Atom tuple(std::vector<Atom> v) { return {Kind::Tuple, 0, 0, {}, std::move(v)}; }

  bool operator==(const Atom& o) const;
  bool operator!=(const Atom& o) const { return !(*this == o); }
  bool operator<(const Atom& o) const { return compare(o) < 0; }  // a total order, for canonical sorting
  int compare(const Atom& o) const;  // <0, 0, >0 in that order
};

// Python-style rendering: None, True, 3, 2.5, 'text', torch.float32, ...
std::string toString(const Atom& a);
// An object as views name it: its type, and the value of an int, float or
// str subclass ("torch.torch_version.TorchVersion '1.13.0'").
std::string objectLabel(const std::string& type, const Atom& base);

// A dimension of a dynamic record (MagPy section 6.2.1): a size that may
// change from call to call, as scale * s<symbol> + offset. Symbols are
// bound by the record's tensor guards (the first guard that names one binds
// it; later ones must agree) and every symbol is at least 2: sizes 0 and 1
// change broadcasting and emptiness, so they keep records of their own.
// A result's size may instead be the int an earlier graph node computes
// (`node`): the program's own arithmetic gave it (x.view(b, t // 2, -1)).
struct SymDim {
  int32_t symbol = -1;  // -1: a fixed size, `offset` (or the value of `node`)
  int64_t scale = 1;
  int64_t offset = 0;
  int32_t node = -1;    // >= 0: the size is the value of this graph node (an int); symbol -1, offset 0

  bool operator==(const SymDim& o) const {
    return symbol == o.symbol && scale == o.scale && offset == o.offset && node == o.node;
  }
  bool operator!=(const SymDim& o) const { return !(*this == o); }
};
constexpr int32_t kMaxSymbols = 8;  // symbols one record may have
constexpr int64_t kMinSymbolValue = 2;

std::string toString(const SymDim& d);  // "s0", "2*s0+1", "16", "#12" (the value of node 12)

struct TensorMeta {
  std::string dtype = "float32";
  std::vector<int64_t> shape;   // sizes seen at capture (for a dynamic one, its last capture)
  std::vector<int64_t> strides;
  std::string device = "cpu";
  bool requires_grad = false;
  // Empty: the sizes are `shape`, exactly. Otherwise one entry per
  // dimension: a guard's tensor then must be contiguous with these sizes
  // (strides follow from them), and an operator's result is checked to
  // have them.
  std::vector<SymDim> sym;

  bool operator==(const TensorMeta& o) const;
  bool operator!=(const TensorMeta& o) const { return !(*this == o); }
  int64_t numel() const;
  bool dynamic() const { return !sym.empty(); }
};

// "float32[2, 3] strides=[3, 1] cpu" (+ " requires_grad");
// dynamic: "float32[s0, 3] contiguous cpu"
std::string toString(const TensorMeta& m);
// "float32[2, 3]", "float32[s0, 3]"
std::string typeText(const TensorMeta& m);

size_t dtypeSize(const std::string& dtype);  // throws Error on unknown names

// Tensor contents, stored once per file and referenced by index.
// Bytes are the dense row-major (contiguous) elements; strides of the
// original tensor live in its TensorMeta.
struct TensorBlob {
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
  uint64_t hash = 0;  // magpy::hashBytes(bytes), checked on load
};

// A tree of Python values. Used for the initial external state that
// replay starts from and for the arguments/results of logged calls.
struct Value {
  enum class Kind : uint8_t {
    Atom,
    Tensor,  // blob = index into RecordFile::blobs, meta = its metadata; names/items:
             // its .grad where the state held one (names == {"grad"}, a Tensor)
    Tuple, List, Dict,
    Object,  // an instance of a user or library class: type + read attributes
    Opaque,  // something replay cannot build (function, module, class): type names it
    Ref,     // the same object as the earlier value with this `id` (aliasing, tied weights)
  };
  Kind kind = Kind::Atom;
  Atom atom;                          // Atom: the value; Object: the int, float or str an
                                      // instance of their subclass is (TorchVersion), else None;
                                      // Dict: a defaultdict's default_factory by name, else None
  uint32_t blob = 0;
  TensorMeta meta;
  std::string type;                   // Object/Opaque: qualified class or object name;
                                      // Tuple/List/Dict: a subclass (torch.Size, OrderedDict)
  std::vector<Value> items;           // Tuple/List elements, Dict values, Object attributes
  std::vector<Atom> keys;             // Dict keys (in order)
  std::vector<uint32_t> keyRefs;      // Dict: empty, or per key 0 (keys[i] is the key) or the id
                                      // of the object in this tree that is the key (a tensor:
                                      // torch.optim's state[param]); keys[i] is then None
  std::vector<std::string> names;     // Object attribute names, parallel to items
  uint32_t id = 0;                    // non-zero: a later Ref names this value

  static Value ofAtom(Atom a) { Value v; v.atom = std::move(a); return v; }
};

// Ids are scoped to one tree: keeps only the ids some Ref names and
// renumbers them 1, 2, ... in depth-first order, so equal trees print and
// encode the same.
void compactIds(Value& root);

// Replaces every Ref by a copy of the value it names and clears the ids:
// the tree can then be grafted into another tree. A dict keyed by objects
// becomes an Opaque value: copies would not be its keys; so does a weak
// reference's referent that holds it.
void expandRefs(Value& root);

// How a dict value's key i reads in text: its atom, or "@<id>" for an object.
std::string keyText(const Value& dict, size_t i);

}  // namespace magpy::record

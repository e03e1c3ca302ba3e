// Encoding of RecordFile into .mgp bytes and back (grammar in format.h).
//
// Each type has one io() function used by both the Writer and the Reader,
// so the two directions cannot drift apart.
#include "magpy/record/format.h"

#include <zstd.h>

#include <cstdio>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <type_traits>
#include <unistd.h>

#include "magpy/record/graph_utils.h"
#include "magpy/support/error.h"
#include "magpy/support/hash.h"

namespace magpy::record {
namespace {

constexpr char kMagic[8] = {'M', 'A', 'G', 'P', 'Y', 'R', 'E', 'C'};
constexpr size_t kHeaderSize = 8 + 4 + 4 + 8 + 8 + 8;
constexpr int kZstdLevel = 3;  // tensor data barely compresses; higher levels only cost time

// A record is data from a possibly untrusted source: every structure it
// describes is bounded before anything is allocated for it.
constexpr uint64_t kMaxBodySize = uint64_t(8) << 30;          // decompressed body
constexpr uint64_t kMaxStructureBytes = uint64_t(128) << 20;  // the parsed model, tensor bytes aside

class Writer {
 public:
  static constexpr bool kReading = false;
  void u8(uint8_t& v) { out_.push_back(char(v)); }
  void varint(uint64_t& v) {
    uint64_t x = v;
    while (x >= 0x80) { out_.push_back(char((x & 0x7f) | 0x80)); x >>= 7; }
    out_.push_back(char(x));
  }
  void zigzag(int64_t& v) {
    uint64_t z = (uint64_t(v) << 1) ^ uint64_t(v >> 63);
    varint(z);
  }
  void u64(uint64_t& v) { for (int i = 0; i < 8; ++i) out_.push_back(char((v >> (8 * i)) & 0xff)); }
  void f64(double& v) { uint64_t bits; std::memcpy(&bits, &v, 8); u64(bits); }
  void str(std::string& s) { uint64_t n = s.size(); varint(n); out_ += s; }
  void count(size_t& n, size_t) { uint64_t v = n; varint(v); }
  void charge(size_t) {}
  void enter(const char*, size_t = SIZE_MAX) {}
  void leave() {}
  // A file the reader would refuse is never written.
  void descend(const char* what) {
    if (++depth_ > kMaxNesting)
      throw Error(std::string("cannot write the record: ") + what + " is nested more than " +
                  std::to_string(kMaxNesting) + " levels deep, more than a record may hold");
  }
  void ascend() { --depth_; }
  [[noreturn]] void fail(const std::string& what) const { throw Error("cannot write the record: " + what); }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
  size_t depth_ = 0;
};

class Reader {
 public:
  static constexpr bool kReading = true;
  Reader(const std::string& in, std::string origin) : in_(in), origin_(std::move(origin)) {}

  void u8(uint8_t& v) { need(1); v = uint8_t(in_[pos_++]); }
  void varint(uint64_t& v) {
    v = 0;
    for (int shift = 0;; shift += 7) {
      if (shift > 63) fail("a number is too long");
      need(1);
      uint8_t b = uint8_t(in_[pos_++]);
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) break;
    }
  }
  void zigzag(int64_t& v) {
    uint64_t z;
    varint(z);
    v = int64_t(z >> 1) ^ -int64_t(z & 1);
  }
  void u64(uint64_t& v) {
    need(8);
    v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t(uint8_t(in_[pos_ + i])) << (8 * i);
    pos_ += 8;
  }
  void f64(double& v) { uint64_t bits; u64(bits); std::memcpy(&v, &bits, 8); }
  void str(std::string& s) {
    uint64_t n;
    varint(n);
    need(n);
    s.assign(in_, pos_, n);
    pos_ += n;
  }
  // A count is bounded by the bytes left: every element takes at least one.
  void count(size_t& n, size_t) {
    uint64_t v;
    varint(v);
    if (v > in_.size() - pos_) fail("a count of " + std::to_string(v) + " exceeds the data left");
    n = size_t(v);
  }
  // Memory the parsed structure takes, charged as elements are parsed: a
  // byte of a compressible body can stand for a large element.
  void charge(size_t bytes) {
    structureBytes_ += bytes;
    if (structureBytes_ > kMaxStructureBytes)
      fail("its structure needs more than " + std::to_string(kMaxStructureBytes >> 20) + " MiB of memory");
  }
  void enter(const char* what, size_t index = SIZE_MAX) { ctx_.push_back({what, index}); }
  void leave() { ctx_.pop_back(); }
  void descend(const char*) {
    if (++depth_ > kMaxNesting)
      fail("values, constants or mock expressions nest more than " + std::to_string(kMaxNesting) + " levels deep");
  }
  void ascend() { --depth_; }
  bool atEnd() const { return pos_ == in_.size(); }

  [[noreturn]] void fail(const std::string& what) const {
    // Deep places keep their first and last steps: the middle says nothing.
    std::string where;
    for (size_t k = 0; k < ctx_.size(); ++k) {
      if (ctx_.size() > 12 && k == 6) {
        where += "...";
        k = ctx_.size() - 6;
      }
      auto& [name, index] = ctx_[k];
      if (!where.empty() && name[0] != '[') where += '.';
      where += name;
      if (index != SIZE_MAX) where += "[" + std::to_string(index) + "]";
    }
    throw Error(origin_ + ": the record is corrupted: " + what + (where.empty() ? "" : " in " + where) +
                " (byte " + std::to_string(pos_) + " of " + std::to_string(in_.size()) +
                " in the decompressed body); capture it again with magpy-capture");
  }

 private:
  void need(uint64_t n) {
    if (n > in_.size() - pos_) fail("unexpected end of data");
  }
  const std::string& in_;
  std::string origin_;
  size_t pos_ = 0;
  size_t depth_ = 0;
  uint64_t structureBytes_ = 0;
  std::vector<std::pair<const char*, size_t>> ctx_;
};

// Recursive parts (values, atoms, expressions) are entered through this, so
// neither reading nor any later walk over them can overflow the stack.
template <class Ar>
struct Nested {
  Nested(Ar& ar, const char* what) : ar_(ar) { ar_.descend(what); }
  ~Nested() { ar_.ascend(); }
  Ar& ar_;
};

// Enums travel as one byte, validated against their last enumerator.
template <class Ar, class E>
void ioEnum(Ar& ar, E& e, E last) {
  uint8_t v = uint8_t(e);
  ar.u8(v);
  if constexpr (Ar::kReading) {
    if (v > uint8_t(last)) ar.fail("unknown kind " + std::to_string(v));
    e = E(v);
  }
}

template <class Ar> void ioBool(Ar& ar, bool& b) {
  uint8_t v = b;
  ar.u8(v);
  if constexpr (Ar::kReading) {
    if (v > 1) ar.fail("a flag is neither 0 nor 1");
    b = v;
  }
}

template <class Ar, class T, class F>
void ioVec(Ar& ar, const char* what, std::vector<T>& v, F&& each) {
  size_t n = v.size();
  ar.count(n, 0);
  if constexpr (Ar::kReading) {
    // Grown as elements parse, never sized from the count alone.
    v.clear();
    v.reserve(std::min<size_t>(n, 64));
  }
  for (size_t i = 0; i < n; ++i) {
    if constexpr (Ar::kReading) {
      ar.charge(sizeof(T));
      v.emplace_back();
    }
    ar.enter(what, i);
    each(v[i]);
    ar.leave();
  }
}

template <class Ar> void io(Ar& ar, std::vector<int64_t>& v) {
  ioVec(ar, "[]", v, [&](int64_t& x) { ar.zigzag(x); });
}
template <class Ar> void io(Ar& ar, std::vector<double>& v) {
  ioVec(ar, "[]", v, [&](double& x) { ar.f64(x); });
}
template <class Ar> void io(Ar& ar, std::vector<std::string>& v) {
  ioVec(ar, "[]", v, [&](std::string& x) { ar.str(x); });
}

template <class Ar> void io(Ar& ar, Atom& a) {
  Nested<Ar> nested(ar, "a constant");
  ioEnum(ar, a.kind, Atom::Kind::Tuple);
  ar.zigzag(a.i);
  ar.f64(a.f);
  ar.str(a.s);
  ioVec(ar, "items", a.items, [&](Atom& x) { io(ar, x); });
}
template <class Ar> void io(Ar& ar, std::vector<Atom>& v) {
  ioVec(ar, "keys", v, [&](Atom& a) { io(ar, a); });
}

template <class Ar> void io(Ar& ar, TensorMeta& m) {
  ar.str(m.dtype);
  io(ar, m.shape);
  io(ar, m.strides);
  ar.str(m.device);
  ioBool(ar, m.requires_grad);
  ioVec(ar, "dimensions", m.sym, [&](SymDim& d) {
    int64_t symbol = d.symbol;
    ar.zigzag(symbol);
    d.symbol = int32_t(std::clamp<int64_t>(symbol, -2, kMaxSymbols));  // out of range stays out of range
    ar.zigzag(d.scale);
    ar.zigzag(d.offset);
  });
}

template <class Ar> void io(Ar& ar, PathStep& s) {
  ioEnum(ar, s.kind, PathStep::Kind::Key);
  ar.str(s.name);
  ar.zigzag(s.index);
  io(ar, s.key);
}

template <class Ar> void io(Ar& ar, AccessPath& p) {
  ioEnum(ar, p.root, AccessPath::Root::Runtime);
  ar.zigzag(p.index);
  ar.str(p.name);
  ioVec(ar, "steps", p.steps, [&](PathStep& s) { io(ar, s); });
  if (p.steps.size() > kMaxNesting)
    ar.fail("an access path has " + std::to_string(p.steps.size()) + " steps, more than " + std::to_string(kMaxNesting));
}

// 32-bit fields travel as varints (unsigned) or zigzag varints (signed);
// a value read back that does not fit is a malformed file, not a wrap.
template <class Ar> void ioU32(Ar& ar, uint32_t& x, const char* what) {
  uint64_t v = x;
  ar.varint(v);
  if constexpr (Ar::kReading) {
    if (v > std::numeric_limits<uint32_t>::max()) ar.fail(std::string(what) + " is out of range");
    x = uint32_t(v);
  }
}

template <class Ar> void ioI32(Ar& ar, int32_t& x, const char* what) {
  int64_t v = x;
  ar.zigzag(v);
  if constexpr (Ar::kReading) {
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
      ar.fail(std::string(what) + " is out of range");
    x = int32_t(v);
  }
}

template <class Ar> void io(Ar& ar, Value& v) {
  Nested<Ar> nested(ar, "a value");
  ioEnum(ar, v.kind, Value::Kind::Ref);
  io(ar, v.atom);
  ioU32(ar, v.blob, "a blob index");
  io(ar, v.meta);
  ar.str(v.type);
  ioVec(ar, "items", v.items, [&](Value& x) { io(ar, x); });
  io(ar, v.keys);
  io(ar, v.names);
  ioU32(ar, v.id, "a value id");
}

// A lifted number's check is written as the type check it was before it
// had a kind of its own (see the grammar), and read back as one.
template <class Ar> void io(Ar& ar, Check& c) {
  Check::Kind kind = c.kind == Check::Kind::Number ? Check::Kind::Type : c.kind;
  ioEnum(ar, kind, Check::Kind::Absent);
  if constexpr (Ar::kReading) c.kind = kind;
  ar.str(c.s);
  ar.zigzag(c.i);
  io(ar, c.atom);
  io(ar, c.keys);
  io(ar, c.meta);
  io(ar, c.path);
  if constexpr (Ar::kReading) {
    if (c.kind == Check::Kind::Type && (c.s == "builtins.int" || c.s == "builtins.float")) {
      c.kind = Check::Kind::Number;
      c.number = c.s == "builtins.int" ? NumberType::Int : NumberType::Float;
    }
  }
}

template <class Ar> void io(Ar& ar, Arg& a) {
  ioEnum(ar, a.kind, Arg::Kind::SizeList);
  ar.zigzag(a.i);
  ar.f64(a.f);
  ar.str(a.s);
  io(ar, a.ints);
  io(ar, a.floats);
}

template <class Ar> void io(Ar& ar, Node& n) {
  ioEnum(ar, n.kind, NodeKind::Output);
  ar.str(n.name);
  ar.str(n.target);
  ar.str(n.overload);
  ioVec(ar, "args", n.args, [&](Arg& a) { io(ar, a); });
  io(ar, n.source);
  ar.zigzag(n.blob);
  ioVec(ar, "outputs", n.outputs, [&](TensorMeta& m) { io(ar, m); });
  ar.str(n.where);
  ar.str(n.number);
  io(ar, n.seen);
}

template <class Ar> void io(Ar& ar, ValueExpr& e) {
  Nested<Ar> nested(ar, "a mock expression");
  ioEnum(ar, e.kind, ValueExpr::Kind::Dict);
  io(ar, e.atom);
  ar.zigzag(e.index);
  io(ar, e.path);
  ioVec(ar, "items", e.items, [&](ValueExpr& x) { io(ar, x); });
  io(ar, e.keys);
  ar.str(e.type);
}

template <class Ar> void io(Ar& ar, Effect& e) {
  ioEnum(ar, e.kind, Effect::Kind::Assign);
  io(ar, e.target);
  ar.str(e.name);
  io(ar, e.key);
  io(ar, e.value);
}

template <class Ar> void io(Ar& ar, Record& r) {
  ioVec(ar, "guards", r.guards, [&](Guard& g) { io(ar, g.path); io(ar, g.check); });
  ar.enter("graph");
  ioVec(ar, "nodes", r.graph.nodes, [&](Node& n) { io(ar, n); });
  ar.leave();
  ar.enter("mock");
  io(ar, r.mock.result);
  ioVec(ar, "effects", r.mock.effects, [&](Effect& e) { io(ar, e); });
  ar.leave();
  ioVec(ar, "breaks", r.breaks, [&](GraphBreak& b) {
    ar.str(b.where); ar.str(b.function); ar.str(b.opcode); ar.str(b.reason); ar.str(b.callee);
  });
  ar.str(r.origin);
  ar.enter("refs");
  ioVec(ar, "nodes", r.refs.nodes, [&](RefGraphView::Node& n) {
    ar.str(n.label);
    ioU32(ar, n.versions, "a version count");
    ar.u8(n.roles);
  });
  ioVec(ar, "edges", r.refs.edges, [&](RefGraphView::Edge& e) {
    ioU32(ar, e.from, "an edge's source");
    ioU32(ar, e.to, "an edge's target");
    ioU32(ar, e.version, "an edge's version");
    ar.str(e.label);
  });
  ar.leave();
}

template <class Ar> void io(Ar& ar, RecordFile& f) {
  ar.enter("fingerprint");
  ar.str(f.env.magpy_version);
  ar.str(f.env.python_version);
  ar.str(f.env.torch_version);
  ar.u64(f.env.annotations_hash);
  ar.leave();
  ar.str(f.script);
  ar.str(f.stateAt);
  ioVec(ar, "functions", f.functions, [&](CompiledFunction& fn) {
    ar.str(fn.name);
    ar.str(fn.module);
    ar.enter("self");
    io(ar, fn.self);
    ar.leave();
    ioVec(ar, "records", fn.records, [&](Record& r) { io(ar, r); });
  });
  ioVec(ar, "globals", f.globals, [&](ModuleState& m) { ar.str(m.module); io(ar, m.globals); });
  ioVec(ar, "calls", f.calls, [&](LoggedCall& c) {
    ioU32(ar, c.function, "a call's function");
    ioI32(ar, c.record, "a call's record");
    ioBool(ar, c.monitored);
    io(ar, c.args);
    io(ar, c.kwargs);
    io(ar, c.result);
    ioVec(ar, "updates", c.updates, [&](StateUpdate& u) {
      ioI32(ar, u.function, "an update's function");
      io(ar, u.path);
      io(ar, u.value);
    });
    io(ar, c.rng);
  });
  ioVec(ar, "blobs", f.blobs, [&](TensorBlob& b) {
    ar.str(b.dtype);
    io(ar, b.shape);
    ar.u64(b.hash);
    ar.str(b.bytes);
  });
}

void putU32(std::string& out, uint32_t v) { for (int i = 0; i < 4; ++i) out.push_back(char((v >> (8 * i)) & 0xff)); }
void putU64(std::string& out, uint64_t v) { for (int i = 0; i < 8; ++i) out.push_back(char((v >> (8 * i)) & 0xff)); }
uint64_t getLE(const std::string& in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(uint8_t(in[at + i])) << (8 * i);
  return v;
}

[[noreturn]] void corrupted(const std::string& origin, const std::string& what) {
  throw Error(origin + ": the record is corrupted: " + what + "; capture it again with magpy-capture");
}

// What the byte grammar cannot express: cross-references point at things
// that exist, sizes do not overflow, and every structure has the shape its
// users rely on (argument tuples, keyword dicts, one name per attribute,
// strides per dimension). Code that uses a decoded RecordFile may assume
// all of it.
class Validator {
 public:
  Validator(const RecordFile& f, std::string origin) : f_(f), origin_(std::move(origin)) {}

  void run() {
    if (f_.stateAt != kStateFirstRead && f_.stateAt != kStateAtExit)
      bad("the state is taken at '" + f_.stateAt + "' (not '" + kStateFirstRead + "' or '" + kStateAtExit + "')");
    for (auto& b : f_.blobs) blob(b);
    for (auto& fn : f_.functions) function(fn);
    for (auto& g : f_.globals) {
      if (g.globals.kind != Value::Kind::Dict) bad("the globals of module " + g.module + " are not a dict");
      tree(g.globals);
    }
    for (size_t i = 0; i < f_.calls.size(); ++i) call(f_.calls[i], "logged call " + std::to_string(i));
  }

 private:
  [[noreturn]] void bad(const std::string& what) const { corrupted(origin_, what); }

  // Element count of a shape, or a failure when a dimension is negative or
  // the product does not fit in 63 bits.
  int64_t elements(const std::vector<int64_t>& shape, const std::string& what) const {
    int64_t n = 1;
    for (int64_t d : shape) {
      if (d < 0) bad(what + " has a negative dimension");
      if (__builtin_mul_overflow(n, d, &n)) bad(what + " has more elements than fit in 64 bits");
    }
    return n;
  }

  size_t dtypeBytes(const std::string& dtype, const std::string& what) const {
    try {
      return dtypeSize(dtype);
    } catch (const Error&) {
      bad(what + " has unknown dtype '" + dtype + "'");
    }
  }

  void blob(const TensorBlob& b) const {
    int64_t n = elements(b.shape, "a tensor blob");
    uint64_t bytes;
    if (__builtin_mul_overflow(uint64_t(n), dtypeBytes(b.dtype, "a tensor blob"), &bytes) || bytes != b.bytes.size())
      bad("a " + b.dtype + " blob holds " + std::to_string(b.bytes.size()) + " bytes for " + std::to_string(n) + " elements");
    if (hashBytes(b.bytes.data(), b.bytes.size()) != b.hash) bad("a tensor blob does not match its content hash");
  }

  void meta(const TensorMeta& m, const std::string& what) const {
    dtypeBytes(m.dtype, what);
    if (m.strides.size() != m.shape.size())
      bad(what + " has " + std::to_string(m.strides.size()) + " strides for " + std::to_string(m.shape.size()) + " dimensions");
    elements(m.shape, what);
    for (int64_t s : m.strides)
      if (s < 0) bad(what + " has a negative stride");
    if (m.dynamic() && m.sym.size() != m.shape.size())
      bad(what + " has " + std::to_string(m.sym.size()) + " dynamic sizes for " + std::to_string(m.shape.size()) +
          " dimensions");
    constexpr int64_t kLimit = int64_t(1) << 32;  // keeps scale * value + offset far from overflow
    for (size_t d = 0; d < m.sym.size(); ++d) {
      const SymDim& x = m.sym[d];
      if (x.symbol < -1 || x.symbol >= kMaxSymbols)
        bad(what + " has size symbol " + std::to_string(x.symbol) + " (a record has symbols 0 to " +
            std::to_string(kMaxSymbols - 1) + ")");
      if (x.symbol < 0 && (x.scale != 1 || x.offset != m.shape[d]))
        bad(what + "'s fixed size " + toString(x) + " disagrees with its shape");
      if (x.symbol >= 0 && (x.scale <= 0 || x.scale > kLimit || x.offset < -kLimit || x.offset > kLimit))
        bad(what + " has size " + toString(x) + ", out of the range records may use");
    }
  }

  void tensor(uint32_t blobIndex, const TensorMeta& m, const std::string& what) const {
    meta(m, what);
    if (m.dynamic()) bad(what + " has contents but dynamic sizes");
    if (blobIndex >= f_.blobs.size()) bad(what + " refers to missing blob " + std::to_string(blobIndex));
    const TensorBlob& b = f_.blobs[blobIndex];
    if (b.dtype != m.dtype || b.shape != m.shape) bad(what + "'s metadata disagrees with its blob");
  }

  // A value tree: a Ref names an object defined before it in the same
  // tree, and not one that contains it: replay's values are shared
  // pointers, and a container that holds itself would never be freed.
  enum class Id : uint8_t { Unseen, Open, Done };
  void tree(const Value& root) const {
    std::vector<Id> ids;
    value(root, ids);
  }
  void value(const Value& v, std::vector<Id>& ids) const {
    if (v.kind == Value::Kind::Ref) {
      if (v.id == 0 || v.id >= ids.size() || ids[v.id] == Id::Unseen)
        bad("a value refers to object #" + std::to_string(v.id) + ", defined nowhere before");
      if (ids[v.id] == Id::Open) bad("object #" + std::to_string(v.id) + " contains itself, which records cannot hold");
      return;
    }
    if (v.id) {
      if (v.id > kMaxIds) bad("a value id is out of range");
      if (ids.size() <= v.id) ids.resize(size_t(v.id) + 1);
      ids[v.id] = Id::Open;
    }
    if (v.kind == Value::Kind::Tensor) tensor(v.blob, v.meta, "a tensor value");
    if (v.kind == Value::Kind::Dict && v.keys.size() != v.items.size())
      bad("a dict has " + std::to_string(v.keys.size()) + " keys for " + std::to_string(v.items.size()) + " values");
    if ((v.kind == Value::Kind::Object || v.kind == Value::Kind::Opaque) && v.names.size() != v.items.size())
      bad("an object of type " + v.type + " has " + std::to_string(v.names.size()) + " attribute names for " +
          std::to_string(v.items.size()) + " values");
    bool container = v.kind != Value::Kind::Atom && v.kind != Value::Kind::Tensor;
    if (!container && !v.items.empty()) bad("a scalar or tensor value has elements");
    for (auto& item : v.items) value(item, ids);
    if (v.id) ids[v.id] = Id::Done;
  }

  void function(const CompiledFunction& fn) const {
    tree(fn.self);
    for (size_t ri = 0; ri < fn.records.size(); ++ri) record(fn.records[ri], "function " + fn.name + " record " + std::to_string(ri));
  }

  void record(const Record& r, const std::string& at) const {
    uint32_t bound = 0;  // symbols the guards bind
    for (auto& g : r.guards) {
      if (g.check.kind != Check::Kind::Tensor) continue;
      std::string what = at + ": the guard on " + toString(g.path);
      meta(g.check.meta, what);
      for (auto& d : g.check.meta.sym) {
        if (d.symbol >= 0 && (d.scale != 1 || d.offset != 0)) bad(what + " has size " + toString(d) + ", not a symbol");
        if (d.symbol >= 0) bound |= 1u << d.symbol;
      }
    }

    for (auto& e : r.refs.edges)
      if (e.from >= r.refs.nodes.size() || e.to >= r.refs.nodes.size() || e.version >= r.refs.nodes[e.from].versions)
        bad(at + ": a RefGraph edge names a missing node or version");
    size_t outputs = graph(r.graph, at);
    for (auto& n : r.graph.nodes)
      for (auto& m : n.outputs)
        for (auto& d : m.sym)
          if (d.symbol >= 0 && !(bound & (1u << d.symbol)))
            bad(at + ": node " + n.name + " has size " + toString(d) + ", but no guard binds s" +
                std::to_string(d.symbol));
    expr(r.mock.result, outputs, at + ": the mock's result");
    for (auto& e : r.mock.effects) expr(e.value, outputs, at + ": the mock's write to " + toString(e.target));
  }

  // Returns the number of values the graph outputs.
  size_t graph(const Graph& g, const std::string& at) const {
    size_t outputs = 0;
    for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
      const Node& n = g.nodes[ni];
      std::string node = at + ": node " + n.name;
      if (n.blob >= int64_t(f_.blobs.size()) || n.blob < -1) bad(node + " refers to a missing blob");
      if (n.blob >= 0 && (n.outputs.empty() || n.kind != NodeKind::GetAttr)) bad(node + " holds contents but is not a constant");
      if (n.blob >= 0) tensor(uint32_t(n.blob), n.outputs[0], node);
      for (auto& m : n.outputs) meta(m, node);
      number(n, node);
      for (auto& a : n.args)
        if (a.kind == Arg::Kind::SizeList) {
          bool pairs = a.ints.size() % 2 == 0;
          for (size_t k = 0; pairs && k < a.ints.size(); k += 2) pairs = a.ints[k] == 0 || a.ints[k] == 1;
          if (!pairs) bad(node + " has a size list that is not (0, size) or (1, node) pairs");
        }
      forEachNodeArg(n, [&](int64_t i) {
        if (i < 0 || size_t(i) >= ni) bad(node + " uses a value that is not defined before it");
      });
      if (n.kind == NodeKind::Output) {
        if (ni + 1 != g.nodes.size()) bad(node + ": the output is not the last node");
        outputs = n.args.size();
      }
    }
    return outputs;
  }

  // A lifted number is an input with no tensor metadata, or arithmetic
  // on two operands; nothing else says it computes a number.
  void number(const Node& n, const std::string& node) const {
    if (n.number.empty() || !n.isInput()) {
      if (n.seen.kind != Atom::Kind::None) bad(node + " has a value seen at capture but is no number input");
    }
    if (n.number.empty()) {
      if (isNumberOp(n.target)) bad(node + " does number arithmetic but has no number type");
      return;
    }
    if (n.number != "int" && n.number != "float") bad(node + " has number type '" + n.number + "' (int or float)");
    Atom::Kind kind = n.number == "int" ? Atom::Kind::Int : Atom::Kind::Float;
    bool input = n.isInput() && n.blob < 0 && n.outputs.empty() && n.seen.kind == kind;
    bool arithmetic = n.kind == NodeKind::CallFunction && isNumberOp(n.target) && n.args.size() == 2 && n.outputs.empty();
    if (!input && !arithmetic) bad(node + " has a number type but is neither a number input nor number arithmetic");
  }

  void expr(const ValueExpr& e, size_t outputs, const std::string& what) const {
    if (e.kind == ValueExpr::Kind::GraphOutput && (e.index < 0 || uint64_t(e.index) >= outputs))
      bad(what + " uses graph output " + std::to_string(e.index) + " of " + std::to_string(outputs));
    if (e.kind == ValueExpr::Kind::Dict && e.keys.size() != e.items.size())
      bad(what + " builds a dict with " + std::to_string(e.keys.size()) + " keys for " + std::to_string(e.items.size()) + " values");
    if (!e.type.empty() && (e.kind != ValueExpr::Kind::Dict || e.type != kOrderedDict))
      bad(what + " builds a " + e.type + ", which replay does not make (only a dict or " + kOrderedDict + ")");
    for (auto& item : e.items) expr(item, outputs, what);
  }

  void call(const LoggedCall& c, const std::string& at) const {
    if (c.function >= f_.functions.size()) bad(at + " names missing function " + std::to_string(c.function));
    if (c.record < -1 || c.record >= int32_t(f_.functions[c.function].records.size()))
      bad(at + " names missing record " + std::to_string(c.record));
    if (c.args.kind != Value::Kind::Tuple) bad(at + ": its positional arguments are not a tuple");
    if (c.kwargs.kind != Value::Kind::Dict) bad(at + ": its keyword arguments are not a dict");
    for (auto& k : c.kwargs.keys)
      if (k.kind != Atom::Kind::Str) bad(at + ": a keyword argument's name is not a string");
    tree(c.args);
    tree(c.kwargs);
    tree(c.result);
    tree(c.rng);
    if (c.rng.kind != Value::Kind::Tensor && !(c.rng.kind == Value::Kind::Atom && c.rng.atom.kind == Atom::Kind::None))
      bad(at + ": its random generator state is not a tensor");
    for (auto& u : c.updates) {
      if (u.function < -1 || u.function >= int32_t(f_.functions.size()))
        bad(at + ": a state update names missing function " + std::to_string(u.function));
      tree(u.value);
    }
  }

  // Ids are renumbered 1, 2, ... per tree (compactIds): more ids than values
  // a record can hold is corruption, and the bound keeps `defined` small.
  static constexpr uint32_t kMaxIds = 1u << 24;
  const RecordFile& f_;
  std::string origin_;
};

// Decompresses the body frame into memory that grows with the data the
// frame really holds: a header or frame that only announces a huge size
// allocates nothing.
std::string decompressBody(const char* frame, size_t frameSize, uint64_t bodySize, const std::string& origin) {
  if (bodySize > kMaxBodySize)
    corrupted(origin, "it announces a body of " + std::to_string(bodySize) + " bytes, more than the " +
                          std::to_string(kMaxBodySize >> 30) + " GiB a record may hold");
  unsigned long long content = ZSTD_getFrameContentSize(frame, frameSize);
  if (content == ZSTD_CONTENTSIZE_ERROR) corrupted(origin, "its compressed body is not a zstd frame");
  if (content != bodySize)
    corrupted(origin, "its header and its compressed body disagree on the body's size");
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> dctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  // Grown as output comes, so a small frame announcing a huge body costs no
  // more than it holds; a body up to four times its frame (weights hardly
  // compress) is allocated once, without copies as it grows.
  std::string body(size_t(std::min<uint64_t>(bodySize, uint64_t(frameSize) * 4 + (1 << 20))), '\0');
  ZSTD_inBuffer in{frame, frameSize, 0};
  size_t filled = 0;
  for (;;) {
    if (filled == body.size() && body.size() < bodySize)
      body.resize(size_t(std::min<uint64_t>(bodySize, std::max<uint64_t>(body.size() * 2, 1 << 20))));
    ZSTD_outBuffer out{body.data(), body.size(), filled};
    size_t consumed = in.pos;
    size_t ret = ZSTD_decompressStream(dctx.get(), &out, &in);
    if (ZSTD_isError(ret)) corrupted(origin, std::string("its compressed body does not decompress (") + ZSTD_getErrorName(ret) + ")");
    bool progress = out.pos != filled || in.pos != consumed;
    filled = out.pos;
    if (ret == 0) break;  // the frame ended (its checksum checked)
    if (!progress) corrupted(origin, "its compressed body is truncated or larger than announced");
  }
  if (filled != bodySize || in.pos != in.size) corrupted(origin, "its compressed body does not hold the announced size");
  return body;
}

}  // namespace

std::string encodeBody(const RecordFile& file) {
  Writer w;
  io(w, const_cast<RecordFile&>(file));  // the writer only reads
  return w.take();
}

std::string wrapBody(const std::string& body) {
  std::string frame(ZSTD_compressBound(body.size()), '\0');
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, kZstdLevel);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  size_t n = ZSTD_compress2(cctx, frame.data(), frame.size(), body.data(), body.size());
  ZSTD_freeCCtx(cctx);
  if (ZSTD_isError(n)) throw Error(std::string("cannot compress the record: ") + ZSTD_getErrorName(n));
  frame.resize(n);

  std::string out(kMagic, 8);
  putU32(out, kFormatVersion);
  putU32(out, 0);
  putU64(out, frame.size());
  putU64(out, body.size());
  putU64(out, hashBytes(body.data(), body.size()));
  return out + frame;
}

std::string encode(const RecordFile& file) { return wrapBody(encodeBody(file)); }

namespace {

// Checks the header and returns the decompressed body.
std::string checkedBody(const std::string& bytes, const std::string& origin) {
  if (bytes.size() < 8 || std::memcmp(bytes.data(), kMagic, 8) != 0)
    throw Error(origin + ": not a magpy record (it does not start with MAGPYREC); pass a .mgp file written by magpy-capture");
  if (bytes.size() < kHeaderSize)
    throw Error(origin + ": the record is truncated: its " + std::to_string(bytes.size()) + "-byte header is incomplete; capture it again with magpy-capture");
  uint32_t version = uint32_t(getLE(bytes, 8, 4));
  if (version > kFormatVersion)
    throw Error(origin + ": written in record format " + std::to_string(version) + ", but this magpy reads format " +
                std::to_string(kFormatVersion) + "; use a newer magpy");
  if (version == 0) throw Error(origin + ": the record is corrupted: format version 0 does not exist");
  if (version < kFormatVersion)
    throw Error(origin + ": written in record format " + std::to_string(version) + ", which this magpy (format " +
                std::to_string(kFormatVersion) + ") no longer reads; capture it again with magpy-capture");
  uint64_t frameSize = getLE(bytes, 16, 8), bodySize = getLE(bytes, 24, 8), bodyHash = getLE(bytes, 32, 8);
  if (bytes.size() - kHeaderSize < frameSize)
    throw Error(origin + ": the record is truncated: " + std::to_string(bytes.size()) + " bytes, the header announces " +
                std::to_string(kHeaderSize + frameSize) + "; capture it again with magpy-capture");
  if (bytes.size() - kHeaderSize > frameSize)
    throw Error(origin + ": the record is corrupted: " + std::to_string(bytes.size() - kHeaderSize - frameSize) +
                " unexpected bytes after its end; capture it again with magpy-capture");
  std::string body = decompressBody(bytes.data() + kHeaderSize, frameSize, bodySize, origin);
  if (hashBytes(body.data(), body.size()) != bodyHash)
    throw Error(origin + ": the record is corrupted: its body does not match its hash; capture it again with magpy-capture");
  return body;
}

RecordFile parseBody(const std::string& body, const std::string& origin) {
  RecordFile file;
  Reader r(body, origin);
  io(r, file);
  if (!r.atEnd()) r.fail("unexpected data after the last section");
  Validator(file, origin).run();
  return file;
}

}  // namespace

RecordFile decode(const std::string& bytes, const std::string& origin) { return parseBody(checkedBody(bytes, origin), origin); }

void writeFileAtomically(const std::string& path, const std::string& bytes) {
  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path tmp = target;
  tmp += ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write " + path + ": cannot create " + tmp.string() + " (is the directory writable?)");
    out.write(bytes.data(), std::streamsize(bytes.size()));
    out.flush();
    if (!out) {
      out.close();
      std::error_code ec;
      fs::remove(tmp, ec);
      throw Error("cannot write " + path + ": the disk may be full");
    }
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error("cannot write " + path + ": " + ec.message());
  }
}

void writeRecordFile(const RecordFile& file, const std::string& path) { writeFileAtomically(path, encode(file)); }

RecordFile readRecordFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) throw Error(path + ": no such file; pass a .mgp file written by magpy-capture");
    throw Error(path + ": cannot be read (permissions?)");
  }
  // One copy of the file at a time: its bytes go once the body is out.
  std::string body;
  {
    std::string bytes;
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) {
      bytes.resize(size_t(std::filesystem::file_size(path, ec)));
      if (ec || !in.read(bytes.data(), std::streamsize(bytes.size()))) throw Error(path + ": cannot be read");
    } else {  // a pipe, a device: read to its end
      std::ostringstream ss;
      ss << in.rdbuf();
      bytes = std::move(ss).str();
    }
    body = checkedBody(bytes, path);
  }
  return parseBody(body, path);
}

}  // namespace magpy::record

// The structural checks of a RecordFile (validate.h).
#include "magpy/record/validate.h"

#include <algorithm>
#include <map>
#include <set>

#include "magpy/record/graph_utils.h"
#include "magpy/support/error.h"
#include "magpy/support/hash.h"
#include "magpy/support/strings.h"

namespace magpy::record {
namespace {

// What the byte grammar cannot express: cross-references point at things
// that exist, sizes do not overflow, and every structure has the shape its
// users rely on (argument tuples, keyword dicts, one name per attribute,
// strides per dimension). Code that uses a decoded RecordFile may assume
// all of it.
// A device type, then perhaps ":index" ("cpu", "cuda:1"): what a record
// holds before libtorch parses it.
bool isDeviceName(const std::string& s) {
  size_t i = 0;
  while (i < s.size() && s[i] >= 'a' && s[i] <= 'z') ++i;
  if (i == 0) return false;
  if (i == s.size()) return true;
  if (s[i] != ':' || i + 1 == s.size() || s.size() - i > 4) return false;
  return std::all_of(s.begin() + long(i) + 1, s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A dtype, layout, memory format or scalar type: a bare name ("float32",
// "channels_last"), written after "torch." in views and exported code.
bool isToken(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

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
  [[noreturn]] void bad(const std::string& what) const { corruptedRecord(origin_, what); }

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
    if (!isDeviceName(m.device)) bad(what + " is on device " + quote(m.device) + ", which names no device");
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
      if (x.node < -1 || (x.node >= 0 && (x.symbol != -1 || x.scale != 1 || x.offset != 0)))
        bad(what + " has size " + toString(x) + ", which is neither a node's value nor a symbol's");
      if (x.node >= 0) continue;  // the graph checks the node (intSizeNode)
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
  // The exception is an object's .__referent__ (a weakref.ref's), which
  // replay holds weakly: a scheduler's wrapper refers to its optimizer.
  enum class Id : uint8_t { Unseen, Open, Done };
  // A dict's key may be an object of the same tree, defined anywhere in
  // it (before or after the dict): a tensor, whose hash is its identity.
  struct TreeIds {
    std::vector<Id> state;
    std::set<uint32_t> tensors, keys;
  };
  void tree(const Value& root) const {
    TreeIds ids;
    value(root, ids);
    for (uint32_t k : ids.keys)
      if (!ids.tensors.count(k)) bad("a dict's key is object #" + std::to_string(k) + ", which is no tensor of its tree");
  }
  void keyRefs(const Value& v, TreeIds& ids) const {
    if (v.keyRefs.empty()) return;
    if (v.kind != Value::Kind::Dict || v.keyRefs.size() != v.keys.size())
      bad("a value has " + std::to_string(v.keyRefs.size()) + " object keys for " + std::to_string(v.keys.size()) + " keys");
    std::set<uint32_t> seen;
    for (size_t i = 0; i < v.keyRefs.size(); ++i) {
      if (!v.keyRefs[i]) continue;
      if (v.keys[i].kind != Atom::Kind::None || !seen.insert(v.keyRefs[i]).second)
        bad("a dict has object key #" + std::to_string(v.keyRefs[i]) + " twice, or beside an atom");
      ids.keys.insert(v.keyRefs[i]);
    }
  }
  void value(const Value& v, TreeIds& tree, bool weak = false) const {
    std::vector<Id>& ids = tree.state;
    if (v.kind == Value::Kind::Ref) {
      if (v.id == 0 || v.id >= ids.size() || ids[v.id] == Id::Unseen)
        bad("a value refers to object #" + std::to_string(v.id) + ", defined nowhere before");
      if (ids[v.id] == Id::Open && !weak) bad("object #" + std::to_string(v.id) + " contains itself, which records cannot hold");
      return;
    }
    if (v.id) {
      if (v.id > kMaxIds) bad("a value id is out of range");
      if (ids.size() <= v.id) ids.resize(size_t(v.id) + 1);
      ids[v.id] = Id::Open;
    }
    if (v.kind == Value::Kind::Tensor) tensor(v.blob, v.meta, "a tensor value");
    if (v.kind == Value::Kind::Tensor && v.id) tree.tensors.insert(v.id);
    keyRefs(v, tree);
    if (v.kind == Value::Kind::Dict && v.keys.size() != v.items.size())
      bad("a dict has " + std::to_string(v.keys.size()) + " keys for " + std::to_string(v.items.size()) + " values");
    if ((v.kind == Value::Kind::Object || v.kind == Value::Kind::Opaque) && v.names.size() != v.items.size())
      bad("an object of type " + v.type + " has " + std::to_string(v.names.size()) + " attribute names for " +
          std::to_string(v.items.size()) + " values");
    using A = Atom::Kind;
    bool baseValue = v.atom.kind == A::Int || v.atom.kind == A::Float || v.atom.kind == A::Str;
    if (v.kind == Value::Kind::Object && v.atom.kind != A::None && !baseValue)
      bad("an object of type " + v.type + " has a value that is not an int, float or str");
    bool container = v.kind != Value::Kind::Atom && v.kind != Value::Kind::Tensor;
    // A .grad shared with another tensor is a Ref, which materializing checks.
    const Value* g = v.items.size() == 1 ? &v.items[0] : nullptr;
    bool like = g && g->kind == Value::Kind::Tensor && g->items.empty() && g->meta.shape == v.meta.shape &&
                g->meta.dtype == v.meta.dtype && g->meta.device == v.meta.device;
    bool gradient = v.kind == Value::Kind::Tensor && v.names == std::vector<std::string>{"grad"} && g &&
                    (like || g->kind == Value::Kind::Ref);
    if (!container && !gradient && (!v.items.empty() || !v.names.empty()))
      bad("a scalar or tensor value has elements (a tensor only its .grad, a tensor like it)");
    for (size_t i = 0; i < v.items.size(); ++i)
      value(v.items[i], tree, v.kind == Value::Kind::Object && i < v.names.size() && v.names[i] == kWeakReferent);
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
        if (d.node >= 0) bad(what + " has size " + toString(d) + ": guards bind symbols, they read no graph node");
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
    std::set<int64_t> built;  // the containers the mock has built, in the order it builds them
    expr(r.mock.result, outputs, at + ": the mock's result", built);
    for (auto& e : r.mock.effects) {
      expr(e.value, outputs, at + ": the mock's write to " + toString(e.target), built);
      if (e.kind == Effect::Kind::Extend && e.value.kind != ValueExpr::Kind::List)
        bad(at + ": the mock extends " + toString(e.target) + " with a " + toString(e.value) + ", not a list");
    }
  }

  // Loop and branch regions (graph.h) are well formed and nested; each
  // node uses only values of the regions open around it (or outside all of
  // them); trip counts are bounded.
  void regions(const Graph& g, const std::string& at) const {
    struct Open {
      size_t start;     // the magpy.loop or magpy.if node
      size_t part;      // the node that opened the part now open (regionScopes): start, or magpy.if_else
      size_t carried, declared;  // loops
    };
    std::vector<Open> open;
    std::vector<bool> closed(g.nodes.size(), false);  // per region part (regionScopes): it ended
    std::vector<int64_t> scope = regionScopes(g);
    std::map<size_t, size_t> branchValues;  // per magpy.if_end: the values its branch gives
    auto visible = [&](int64_t j) { return scope[size_t(j)] < 0 || !closed[size_t(scope[size_t(j)])]; };
    for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
      const Node& n = g.nodes[ni];
      std::string node = at + ": node " + n.name;
      bool inLoop = !open.empty() && g.nodes[open.back().start].target == kLoop;
      bool declaring = inLoop && open.back().declared < open.back().carried;
      if (declaring != (n.target == kCarried))
        bad(node + (declaring ? " comes before the loop's carried values are all declared" : " declares a carried value outside a loop's start"));
      if (n.target == kLoop) loopStart(n, g, ni, open.size(), node);
      if (n.target == kIf) ifStart(n, g, ni, open.size(), node);
      if (n.target == kCarried) {
        Open& o = open.back();
        if (n.kind != NodeKind::CallFunction || n.args.size() != 2 || n.args[0].kind != Arg::Kind::Node ||
            size_t(n.args[0].i) != o.start || n.args[1].kind != Arg::Kind::Int || size_t(n.args[1].i) != o.declared ||
            n.outputs.size() != 1 || !n.number.empty())
          bad(node + " is not carried value " + std::to_string(o.declared) + " of the loop it follows");
        ++o.declared;
      }
      if (n.target == kLoopEnd) {
        if (!inLoop) bad(node + " ends a loop, but none is the innermost region open");
        const Open& o = open.back();
        bool shaped = n.kind == NodeKind::CallFunction && n.args.size() == 3 && n.args[0].kind == Arg::Kind::Node &&
                      size_t(n.args[0].i) == o.start && n.args[1].kind == Arg::Kind::NodeList &&
                      n.args[1].ints.size() == o.carried && n.args[2].kind == Arg::Kind::NodeList &&
                      n.outputs.empty() && n.number.empty();
        if (!shaped) bad(node + " does not end the innermost loop with one next value per carried value and its scans");
      }
      if (n.target == kIfElse || n.target == kIfEnd) {
        if (open.empty() || g.nodes[open.back().start].target != kIf || (n.target == kIfEnd) != (open.back().part != open.back().start))
          bad(node + " ends a branch side, but that side is not the innermost region open");
        branchValues[ni] = branchSide(n, g, open.back().start, open.back().part, ni, node);
      }
      if ((n.isInput() || n.kind == NodeKind::Output) && !open.empty())
        bad(node + (n.isInput() ? " reads an input inside a loop or a branch" : ": the output is inside a loop or a branch"));
      forEachNodeArg(n, [&](int64_t j) {
        if (j < 0 || size_t(j) >= ni) return;
        const std::string& used = g.nodes[size_t(j)].target;
        if (!visible(j)) bad(node + " uses %" + g.nodes[size_t(j)].name + " of a loop or branch side that has ended");
        if ((used == kLoopEnd || used == kIfEnd) && n.target != "getitem")
          bad(node + " uses a region's end, which only getitem takes apart");
        bool marks = used == kIf && (n.target == kIfElse || n.target == kIfEnd) && n.args[0].i == j;
        if ((used == kIf || used == kIfElse) && !marks) bad(node + " uses the branch marker %" + g.nodes[size_t(j)].name);
      });
      if (n.target == "getitem" && n.args.size() == 2 && n.args[0].kind == Arg::Kind::Node && n.args[0].i >= 0 &&
          size_t(n.args[0].i) < ni && (g.nodes[size_t(n.args[0].i)].target == kLoopEnd || g.nodes[size_t(n.args[0].i)].target == kIfEnd)) {
        const Node& end = g.nodes[size_t(n.args[0].i)];
        size_t values = end.target == kIfEnd ? branchValues[size_t(n.args[0].i)]
                        : end.args.size() == 3 ? end.args[1].ints.size() + end.args[2].ints.size() : 0;
        if (n.args[1].kind != Arg::Kind::Int || n.args[1].i < 0 || uint64_t(n.args[1].i) >= values)
          bad(node + " takes a value the region does not give");
      }
      bool closes = n.target == kLoopEnd || n.target == kIfElse || n.target == kIfEnd;
      if (closes) {
        closed[open.back().part] = true;
        open.back().part = ni;  // magpy.if_else opens the else side
        if (n.target != kIfElse) open.pop_back();
      }
      if (n.target == kLoop) open.push_back({ni, ni, n.args[1].ints.size(), 0});
      if (n.target == kIf) open.push_back({ni, ni, 0, 0});
    }
    if (!open.empty()) bad(at + ": the region %" + g.nodes[open.back().start].name + " never ends");
  }

  void ifStart(const Node& n, const Graph& g, size_t ni, size_t depth, const std::string& node) const {
    bool shaped = n.kind == NodeKind::CallFunction && n.args.size() == 4 && n.args[0].kind == Arg::Kind::Node &&
                  n.args[0].i >= 0 && size_t(n.args[0].i) < ni && g.nodes[size_t(n.args[0].i)].number.empty() &&
                  !isRegionMarker(g.nodes[size_t(n.args[0].i)].target) && n.args[1].kind == Arg::Kind::Bool &&
                  n.args[2].kind == Arg::Kind::Bool && (n.args[1].i || n.args[2].i) &&
                  n.args[3].kind == Arg::Kind::IntList && n.outputs.empty() && n.number.empty() &&
                  n.seen.kind == Atom::Kind::None;
    for (size_t k = 0; shaped && k < n.args[3].ints.size(); ++k)
      shaped = n.args[3].ints[k] >= 0 && (k == 0 || n.args[3].ints[k] > n.args[3].ints[k - 1]);
    if (!shaped)
      bad(node + " does not start a branch as (tensor condition, then seen, else seen, [increasing places]) with a side seen");
    if (depth >= size_t(kMaxLoopNesting))
      bad(node + " nests loops and branches deeper than " + std::to_string(kMaxLoopNesting));
  }

  // magpy.if_else or magpy.if_end of the branch `start` at node ni (`part`:
  // the node that opened the side it ends): a seen side's tensors, or
  // nothing for an unseen side, which holds no node. Returns how many
  // values the branch gives: one per place.
  size_t branchSide(const Node& n, const Graph& g, size_t start, size_t part, size_t ni, const std::string& node) const {
    const Node& opened = g.nodes[start];
    bool elseSide = n.target == kIfEnd;
    bool shaped = n.kind == NodeKind::CallFunction && n.args.size() == 2 && n.args[0].kind == Arg::Kind::Node &&
                  size_t(n.args[0].i) == start && n.args[1].kind == Arg::Kind::NodeList && n.outputs.empty() &&
                  n.number.empty();
    if (!shaped) bad(node + " does not end its branch side as (branch, [values])");
    bool seen = opened.args[elseSide ? 2 : 1].i != 0;
    if (!seen && (!n.args[1].ints.empty() || part + 1 != ni))
      bad(node + " ends a side capture never saw, which holds neither nodes nor values");
    for (int64_t j : n.args[1].ints)
      if (j < 0 || size_t(j) >= ni || g.nodes[size_t(j)].outputs.size() != 1 || !g.nodes[size_t(j)].number.empty())
        bad(node + " gives a value that is not a tensor computed before it");
    if (seen && n.args[1].ints.size() != opened.args[3].ints.size())
      bad(node + " gives " + std::to_string(n.args[1].ints.size()) + " values for " +
          std::to_string(opened.args[3].ints.size()) + " places");
    return opened.args[3].ints.size();
  }

  void loopStart(const Node& n, const Graph& g, size_t ni, size_t depth, const std::string& node) const {
    bool shaped = n.kind == NodeKind::CallFunction && n.args.size() == 2 && n.args[1].kind == Arg::Kind::NodeList &&
                  n.number == "int" && n.outputs.empty() && n.seen.kind == Atom::Kind::None &&
                  std::none_of(n.args[1].ints.begin(), n.args[1].ints.end(), [](int64_t j) { return j < 0; });
    if (!shaped) bad(node + " does not start a loop as (trip count, [initial values]) giving the index");
    if (depth >= size_t(kMaxLoopNesting))
      bad(node + " nests loops deeper than " + std::to_string(kMaxLoopNesting));
    const Arg& trip = n.args[0];
    if (trip.kind == Arg::Kind::Int && (trip.i < 0 || trip.i > kMaxTripCount))
      bad(node + " runs " + std::to_string(trip.i) + " times (at most " + std::to_string(kMaxTripCount) + ")");
    bool countNode = trip.kind == Arg::Kind::Node && trip.i >= 0 && size_t(trip.i) < ni && intSizeNode(g.nodes[size_t(trip.i)]);
    if (trip.kind != Arg::Kind::Int && !countNode) bad(node + " has a trip count that is neither an int nor an int node before it");
  }

  // Returns the number of values the graph outputs.
  size_t graph(const Graph& g, const std::string& at) const {
    regions(g, at);
    size_t outputs = 0;
    for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
      const Node& n = g.nodes[ni];
      std::string node = at + ": node " + n.name;
      if (n.blob >= int64_t(f_.blobs.size()) || n.blob < -1) bad(node + " refers to a missing blob");
      if (n.blob >= 0 && (n.outputs.empty() || n.kind != NodeKind::GetAttr)) bad(node + " holds contents but is not a constant");
      if (n.blob >= 0) tensor(uint32_t(n.blob), n.outputs[0], node);
      for (auto& m : n.outputs) {
        meta(m, node);
        for (auto& d : m.sym)
          if (d.node >= 0 && (size_t(d.node) >= ni || !intSizeNode(g.nodes[size_t(d.node)])))
            bad(node + " has size " + toString(d) + ", which names no int the graph computes before it");
      }
      number(n, node);
      check(n, node);
      if (n.target == kBackward) backward(n, g, ni, node);
      if (isCollective(n.target)) collective(n, g, ni, node);
      if (n.grad != GradMode::Ambient && !n.isOp()) bad(node + " has a grad mode region but is no ATen operator");
      for (auto& a : n.args) {
        bool named = a.kind == Arg::Kind::DType || a.kind == Arg::Kind::Layout ||
                     a.kind == Arg::Kind::MemoryFormat || a.kind == Arg::Kind::WrappedScalar;
        if (named && !isToken(a.s)) bad(node + " has an argument named " + quote(a.s, true) + ", which is no torch name");
        if (a.kind == Arg::Kind::SizeList) {
          bool pairs = a.ints.size() % 2 == 0;
          for (size_t k = 0; pairs && k < a.ints.size(); k += 2) pairs = a.ints[k] == 0 || a.ints[k] == 1;
          if (!pairs) bad(node + " has a size list that is not (0, size) or (1, node) pairs");
        }
        if (a.kind == Arg::Kind::NumberList && a.ints.size() != a.floats.size())
          bad(node + " has a number list whose nodes and constants differ in length");
        if (a.kind == Arg::Kind::Group && !isCollective(n.target))
          bad(node + " takes a process group but is no collective");
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

  // magpy.backward (graph.h): a root tensor, its gradient or None, the
  // leaves (distinct tensor inputs that require grad), retain_graph; one
  // gradient per leaf; outside regions.
  void backward(const Node& n, const Graph& g, size_t ni, const std::string& node) const {
    auto tensorBefore = [&](const Arg& a) {
      return a.kind == Arg::Kind::Node && a.i >= 0 && size_t(a.i) < ni && g.nodes[size_t(a.i)].outputs.size() == 1 &&
             g.nodes[size_t(a.i)].number.empty() && !isRegionMarker(g.nodes[size_t(a.i)].target);
    };
    bool shaped = n.kind == NodeKind::CallFunction && n.args.size() == 4 && tensorBefore(n.args[0]) &&
                  (n.args[1].kind == Arg::Kind::None || tensorBefore(n.args[1])) &&
                  n.args[2].kind == Arg::Kind::NodeList && n.args[3].kind == Arg::Kind::Bool && n.number.empty() &&
                  n.outputs.size() == n.args[2].ints.size();
    if (!shaped)
      bad(node + " is magpy.backward but does not take (root, gradient or None, [leaves], retain_graph) and give "
                 "one gradient per leaf");
    std::set<int64_t> leaves;
    for (int64_t j : n.args[2].ints) {
      bool leaf = j >= 0 && size_t(j) < ni && g.nodes[size_t(j)].isInput() && g.nodes[size_t(j)].number.empty() &&
                  g.nodes[size_t(j)].blob < 0 && g.nodes[size_t(j)].outputs.size() == 1 &&
                  g.nodes[size_t(j)].outputs[0].requires_grad;
      if (!leaf || !leaves.insert(j).second)
        bad(node + " names a leaf that is not a distinct graph input requiring grad");
    }
    if (regionScopes(g)[ni] >= 0) bad(node + " lies inside a loop or branch");
  }

  // A collective (graph.h): a tensor computed before it, the
  // process group, a ReduceOp a record may hold or a root rank, the
  // group's own timeout; the tensor as its result; outside regions (a rank
  // that took another side would leave the others waiting).
  void collective(const Node& n, const Graph& g, size_t ni, const std::string& node) const {
    bool reduce = n.target == "c10d::allreduce_";
    size_t count = reduce ? 4 : 5;
    auto isInt = [&](size_t k) { return n.args[k].kind == Arg::Kind::Int; };
    bool shaped = n.kind == NodeKind::CallFunction && n.args.size() == count &&
                  n.args[0].kind == Arg::Kind::NodeList && n.args[0].ints.size() == 1 &&
                  n.args[1].kind == Arg::Kind::Group && isInt(2) && isInt(count - 1) && n.args[count - 1].i == -1 &&
                  (reduce ? isRecordedReduceOp(n.args[2].i) : n.args[2].i >= 0 && isInt(3) && n.args[3].i == 0) &&
                  n.outputs.size() == n.args[0].ints.size() && n.number.empty() && n.grad == GradMode::Ambient;
    if (!shaped)
      bad(node + " is " + n.target + " but does not take ([tensor], process group, " +
          (reduce ? "reduce op" : "root rank, 0") + ", -1) and give the tensor");
    int64_t j = n.args[0].ints[0];
    if (j < 0 || size_t(j) >= ni || g.nodes[size_t(j)].outputs.size() != 1 || !g.nodes[size_t(j)].number.empty() ||
        isRegionMarker(g.nodes[size_t(j)].target))
      bad(node + " takes a value that is not a tensor computed before it");
    if (regionScopes(g)[ni] >= 0) bad(node + " lies inside a loop or branch");
  }

  static bool intSizeNode(const Node& n) {
    return n.number == "int" || (n.kind == NodeKind::CallFunction && n.target == "aten::size" && n.overload == "int");
  }

  // A check compares one value with what capture saw: a constant of the
  // same contents, sizes, or a comparison that held (a "bool" number).
  void check(const Node& n, const std::string& node) const {
    if (!isCheck(n.target)) return;
    if (n.target == kExpectTrue) {
      if (n.kind != NodeKind::CallFunction || n.args.size() != 1 || n.args[0].kind != Arg::Kind::Node ||
          !n.outputs.empty() || !n.number.empty())
        bad(node + " is a check but does not take (comparison) and return nothing");
      return;
    }
    bool equal = n.target == kExpectEqual;
    bool shaped = n.kind == NodeKind::CallFunction && n.args.size() == 2 && n.args[0].kind == Arg::Kind::Node &&
                  n.args[1].kind == (equal ? Arg::Kind::Node : Arg::Kind::IntList) && n.outputs.empty() && n.number.empty();
    if (!shaped)
      bad(node + " is a check but does not take (value, " + (equal ? "constant" : "sizes") + ") and return nothing");
    for (int64_t d : n.args[1].ints)
      if (d < 0) bad(node + " expects a negative size");
  }

  // A number is an input with no tensor metadata, arithmetic on one or
  // two operands, or aten::item of one tensor; nothing else says it
  // computes a number. Its value at
  // capture has its type. Operand types are replay's to check (the plan).
  void number(const Node& n, const std::string& node) const {
    if (n.number.empty()) {
      if (n.seen.kind != Atom::Kind::None) bad(node + " has a value seen at capture but is no number");
      if (isNumberOp(n.target)) bad(node + " does number arithmetic but has no number type");
      return;
    }
    if (n.number != "int" && n.number != "float" && n.number != "bool")
      bad(node + " has number type '" + n.number + "' (int, float or bool)");
    Atom::Kind kind = n.number == "int" ? Atom::Kind::Int : n.number == "float" ? Atom::Kind::Float : Atom::Kind::Bool;
    bool input = n.isInput() && n.number != "bool" && n.blob < 0 && n.outputs.empty() && n.seen.kind == kind;
    bool index = n.target == kLoop && n.number == "int";  // regions() checks the rest
    bool item = readsItem(n) && n.overload.empty() && n.number != "bool" && n.args.size() == 1 &&
                n.args[0].kind == Arg::Kind::Node && n.outputs.empty() && n.seen.kind == kind;
    bool arithmetic = n.kind == NodeKind::CallFunction && isNumberOp(n.target) &&
                      n.args.size() == size_t(numberOpArity(n.target)) && n.outputs.empty() &&
                      (n.seen.kind == kind || n.seen.kind == Atom::Kind::None);
    if (!input && !arithmetic && !index && !item)
      bad(node + " has a number type but is neither a number input, number arithmetic, a tensor's item nor a loop's index");
  }

  // A Ref names a container built before it, whole: one that contains
  // itself would be a cycle replay's shared values never free.
  void expr(const ValueExpr& e, size_t outputs, const std::string& what, std::set<int64_t>& built) const {
    if (e.kind == ValueExpr::Kind::Ref && !built.count(e.index))
      bad(what + " refers to object #" + std::to_string(e.index) + ", which the mock has not built before it");
    if (e.kind == ValueExpr::Kind::GraphOutput && (e.index < 0 || uint64_t(e.index) >= outputs))
      bad(what + " uses graph output " + std::to_string(e.index) + " of " + std::to_string(outputs));
    if (e.kind == ValueExpr::Kind::Dict && e.keys.size() != e.items.size())
      bad(what + " builds a dict with " + std::to_string(e.keys.size()) + " keys for " + std::to_string(e.items.size()) + " values");
    if (!e.type.empty() && (e.kind != ValueExpr::Kind::Dict || e.type != kOrderedDict))
      bad(what + " builds a " + e.type + ", which replay does not make (only a dict or " + kOrderedDict + ")");
    for (auto& item : e.items) expr(item, outputs, what, built);
    bool container = e.kind == ValueExpr::Kind::Tuple || e.kind == ValueExpr::Kind::List || e.kind == ValueExpr::Kind::Dict;
    if (container && e.index != 0 && (e.index < 0 || !built.insert(e.index).second))
      bad(what + " names object #" + std::to_string(e.index) + " twice, or with a negative number");
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
      if (u.how == StateUpdate::How::Remove &&
          (u.path.steps.empty() || u.value.kind != Value::Kind::Atom || u.value.atom.kind != Atom::Kind::None))
        bad(at + ": a state update removes " + toString(u.path) + ", which is a root or comes with a value");
      if (u.how == StateUpdate::How::Refill && u.value.kind != Value::Kind::List && u.value.kind != Value::Kind::Dict &&
          u.value.kind != Value::Kind::Tensor)
        bad(at + ": a state update changes " + toString(u.path) + " in place to something not a list, dict or tensor");
      tree(u.value);
    }
  }

  // Ids are renumbered 1, 2, ... per tree (compactIds): more ids than values
  // a record can hold is corruption, and the bound keeps `defined` small.
  static constexpr uint32_t kMaxIds = 1u << 24;
  const RecordFile& f_;
  std::string origin_;
};

}  // namespace

void validate(const RecordFile& file, const std::string& origin) { Validator(file, origin).run(); }

void corruptedRecord(const std::string& origin, const std::string& what) {
  throw Error(origin + ": the record is corrupted: " + what + "; capture it again with magpy-capture");
}

}  // namespace magpy::record

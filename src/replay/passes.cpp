#include "magpy/replay/passes.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include "magpy/record/graph_utils.h"
#include "magpy/support/error.h"
#include "magpy/replay/plan.h"
#include "replay/numbers.h"

namespace magpy::replay {
namespace {

using record::Arg;
using record::forEachNodeArg;
using record::Node;
using record::NodeKind;
using record::Replacements;

// Orders (target, overload) pairs of strings and of views alike.
struct NameLess {
  using is_transparent = void;
  template <class A, class B>
  bool operator()(const A& a, const B& b) const {
    return std::pair<std::string_view, std::string_view>(a.first, a.second) <
           std::pair<std::string_view, std::string_view>(b.first, b.second);
  }
};

const c10::FunctionSchema* schemaOf(const Node& n) {
  // Found without copying the names: passes ask for each node's schema
  // several times per graph.
  static std::map<std::pair<std::string, std::string>, c10::optional<c10::OperatorHandle>, NameLess> cache;
  auto it = cache.find(std::pair<std::string_view, std::string_view>(n.target, n.overload));
  if (it == cache.end())
    it = cache.emplace(std::pair(n.target, n.overload), c10::Dispatcher::singleton().findSchema({n.target, n.overload})).first;
  return it->second ? &it->second->schema() : nullptr;
}

// Operators a pass must neither drop, merge nor cache: writes are seen by
// later readers, and a random draw moves the generator even when unused.
// A check has no result, but stops a call that is not the captured one:
// never dead code, never folded.
// Region markers (loops, branches) count: their regions stay whole (dce), nothing merges
// across their bounds (cse) or moves out of them (hoistChecks).
// A magpy.backward runs the autograd engine over what came before it.
bool hasSideEffects(const Node& n) {
  return writesArguments(n) || isRandom(n) || record::isCheck(n.target) || record::isRegionMarker(n.target) ||
         n.target == record::kBackward;
}

// The graph's nodes in another order, each after the values it uses.
record::Graph reordered(record::Graph g, const std::vector<size_t>& order) {
  std::vector<int64_t> position(g.nodes.size());
  for (size_t k = 0; k < order.size(); ++k) position[order[k]] = int64_t(k);
  record::Graph out;
  out.nodes.reserve(order.size());
  for (size_t k : order) {
    Node n = std::move(g.nodes[k]);
    forEachNodeArg(n, [&](int64_t& j) { j = position[size_t(j)]; });
    out.nodes.push_back(std::move(n));
  }
  return out;
}

// Inputs first, in their order: later passes add operators that read
// parameters, and those must be defined before them.
record::Graph inputsFirst(record::Graph g) {
  std::vector<size_t> order;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].isInput()) order.push_back(i);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!g.nodes[i].isInput()) order.push_back(i);
  if (std::is_sorted(order.begin(), order.end())) return g;
  return reordered(std::move(g), order);
}

// dropout(x, p, train=False): the identity, no draw.
bool isEvalDropout(const Node& n) {
  static const std::set<std::string> kDropouts = {"aten::dropout", "aten::feature_dropout", "aten::alpha_dropout",
                                                  "aten::feature_alpha_dropout"};
  return kDropouts.count(n.target) && n.args.size() >= 3 && n.args[2].kind == Arg::Kind::Bool && !n.args[2].i &&
         n.args[0].kind == Arg::Kind::Node;
}

size_t dropoutEval(record::Graph& g) {
  Replacements replacements(g.nodes.size());
  std::vector<bool> keep(g.nodes.size(), true);
  size_t removed = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (!isEvalDropout(n)) continue;
    replacements.replace(i, n.args[0].i);
    keep[i] = false;
    ++removed;
  }
  if (removed) g = record::removeNodes(g, keep, replacements);
  return removed;
}

// conv2d(x, w, b, ...) -> batch_norm(., gamma, beta, mean, var, training=False, momentum, eps, ...)
// becomes conv2d(x, w * s, (b - mean) * s + beta, ...) with s = gamma / sqrt(var + eps),
// all of it computed from parameters (so folded when the plan runs).
size_t foldConvBatchNorm(record::Graph& g) {
  std::vector<size_t> users = record::useCounts(g);
  std::vector<Node> out;
  size_t folded = 0;
  auto isState = [&](const Arg& a) {
    return a.kind == Arg::Kind::Node && g.nodes[size_t(a.i)].kind == NodeKind::GetAttr;
  };
  // For each batch norm that qualifies, its convolution's index.
  std::map<size_t, size_t> bnOfConv;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& bn = g.nodes[i];
    if (bn.target != "aten::batch_norm" || bn.args.size() < 8) continue;
    if (bn.args[5].kind != Arg::Kind::Bool || bn.args[5].i) continue;  // training mode: statistics change
    if (bn.args[0].kind != Arg::Kind::Node || !isState(bn.args[3]) || !isState(bn.args[4])) continue;
    if ((bn.args[1].kind != Arg::Kind::None && !isState(bn.args[1])) || (bn.args[2].kind != Arg::Kind::None && !isState(bn.args[2])))
      continue;
    size_t c = size_t(bn.args[0].i);
    const Node& conv = g.nodes[c];
    if (conv.target != "aten::conv2d" || users[c] != 1 || conv.args.size() < 3 || !isState(conv.args[1])) continue;
    if (conv.args[2].kind != Arg::Kind::None && !isState(conv.args[2])) continue;
    bnOfConv[c] = i;
  }
  if (bnOfConv.empty()) return 0;

  std::vector<int64_t> newIndex(g.nodes.size(), -1);
  auto emit = [&](Node n) {
    out.push_back(std::move(n));
    return int64_t(out.size() - 1);
  };
  auto op = [&](const std::string& target, const std::string& overload, std::vector<Arg> args, const std::string& name) {
    Node n;
    n.kind = NodeKind::CallFunction;
    n.target = target;
    n.overload = overload;
    n.args = std::move(args);
    n.name = name;
    return emit(std::move(n));
  };
  auto ref = [&](const Arg& a) { return Arg::node(newIndex[size_t(a.i)]); };
  std::map<size_t, int64_t> foldedConv;  // bn index -> new conv index
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node n = g.nodes[i];
    if (auto it = foldedConv.find(i); it != foldedConv.end()) {
      newIndex[i] = it->second;  // the batch norm is now the folded convolution
      continue;
    }
    forEachNodeArg(n, [&](int64_t& j) { j = newIndex[size_t(j)]; });
    auto bn = bnOfConv.find(i);
    if (bn == bnOfConv.end()) {
      newIndex[i] = emit(std::move(n));
      continue;
    }
    const Node& norm = g.nodes[bn->second];
    std::string base = n.name + "_bnfold";
    Arg eps = norm.args[7];
    int64_t varEps = op("aten::add", "Scalar", {ref(norm.args[4]), eps, Arg::integer(1)}, base + "_var");
    int64_t stdv = op("aten::sqrt", "", {Arg::node(varEps)}, base + "_std");
    int64_t scale = norm.args[1].kind == Arg::Kind::None ? op("aten::reciprocal", "", {Arg::node(stdv)}, base + "_scale")
                                                         : op("aten::div", "Tensor", {ref(norm.args[1]), Arg::node(stdv)}, base + "_scale");
    Arg shape;
    shape.kind = Arg::Kind::IntList;
    shape.ints = {-1, 1, 1, 1};
    int64_t scale4 = op("aten::reshape", "", {Arg::node(scale), shape}, base + "_scale4");
    int64_t weight = op("aten::mul", "Tensor", {ref(g.nodes[i].args[1]), Arg::node(scale4)}, base + "_weight");
    int64_t shifted = g.nodes[i].args[2].kind == Arg::Kind::None
                          ? op("aten::neg", "", {ref(norm.args[3])}, base + "_shift")
                          : op("aten::sub", "Tensor", {ref(g.nodes[i].args[2]), ref(norm.args[3]), Arg::integer(1)}, base + "_shift");
    int64_t bias = op("aten::mul", "Tensor", {Arg::node(shifted), Arg::node(scale)}, base + "_bias0");
    if (norm.args[2].kind != Arg::Kind::None)
      bias = op("aten::add", "Tensor", {Arg::node(bias), ref(norm.args[2]), Arg::integer(1)}, base + "_bias");
    n.args[1] = Arg::node(weight);
    n.args[2] = Arg::node(bias);
    n.outputs = norm.outputs;
    newIndex[i] = emit(std::move(n));
    foldedConv[bn->second] = newIndex[i];
    ++folded;
  }
  g.nodes = std::move(out);
  return folded;
}

// linear(x, w, b) with a 2-D x and a bias is what ATen computes as
// addmm(b, x, w.t()): written so, the transpose of a parameter is a
// parameter-only operator that folding computes once, and each call skips
// linear's own dispatch and the view it makes. Same kernels, same bits.
size_t linearAsAddmm(record::Graph& g) {
  auto rank = [&](const Arg& a) -> size_t {
    const Node& n = g.nodes[size_t(a.i)];
    if (n.outputs.empty()) return 0;
    return n.outputs[0].dynamic() ? n.outputs[0].sym.size() : n.outputs[0].shape.size();
  };
  auto qualifies = [&](const Node& n) {
    return n.target == "aten::linear" && n.overload.empty() && n.args.size() == 3 &&
           n.args[0].kind == Arg::Kind::Node && n.args[1].kind == Arg::Kind::Node && n.args[2].kind == Arg::Kind::Node &&
           g.nodes[size_t(n.args[1].i)].kind == NodeKind::GetAttr && rank(n.args[0]) == 2 && rank(n.args[1]) == 2;
  };
  std::vector<bool> linear(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) linear[i] = qualifies(g.nodes[i]);
  if (std::find(linear.begin(), linear.end(), true) == linear.end()) return 0;
  std::vector<Node> out;
  std::vector<int64_t> newIndex(g.nodes.size(), -1);
  size_t rewritten = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node n = std::move(g.nodes[i]);
    forEachNodeArg(n, [&](int64_t& j) { j = newIndex[size_t(j)]; });
    if (linear[i]) {
      Node t;
      t.kind = NodeKind::CallFunction;
      t.target = "aten::t";
      t.name = n.name + "_weight_t";
      t.args = {n.args[1]};
      t.where = n.where;
      t.grad = n.grad;
      out.push_back(std::move(t));
      n.target = "aten::addmm";
      n.args = {n.args[2], n.args[0], Arg::node(int64_t(out.size() - 1)), Arg::integer(1), Arg::integer(1)};
      ++rewritten;
    }
    out.push_back(std::move(n));
    newIndex[i] = int64_t(out.size() - 1);
  }
  g.nodes = std::move(out);
  return rewritten;
}

// x * 0.5 with a float32 x: Python passes 0.5 as a float64 wrapped number,
// and the kernel's TensorIterator casts it to float32, a tensor allocated
// and filled on every call. The cast made once at load gives the same
// float32 (the same conversion). Only where the result's dtype is the
// operator's computation dtype (add, sub, mul, div: their common dtype)
// and it is float32: for half and bfloat16 the kernels read the original
// double, and an int cast through double could round twice.
size_t wrappedScalarsCast(record::Graph& g) {
  static const std::set<std::string> kBinary = {"aten::add", "aten::sub", "aten::mul", "aten::div"};
  size_t cast = 0;
  for (Node& n : g.nodes) {
    if (!n.isOp() || n.overload != "Tensor" || !kBinary.count(n.target) || n.outputs.size() != 1) continue;
    if (n.outputs[0].dtype != "float32") continue;  // float64: already the number's dtype
    for (Arg& a : n.args) {
      if (a.kind != Arg::Kind::WrappedScalar || a.s != "float64") continue;
      a.s = "float32";
      ++cast;
    }
  }
  return cast;
}

std::string signature(const Node& n) {
  std::string s;
  auto number = [&](auto v) {
    char buf[24];
    s.append(buf, size_t(std::to_chars(buf, buf + sizeof buf, v).ptr - buf));
  };
  auto bitsOf = [](double f) {
    uint64_t bits;
    std::memcpy(&bits, &f, 8);
    return bits;
  };
  s += n.target;
  s += '.';
  s += n.overload;
  s += '@';
  number(int(n.grad));  // one mode's result needs no grad in the other
  for (auto& a : n.args) {
    s += '|';
    number(int(a.kind));
    s += ':';
    number(a.i);
    s += ':';
    s += a.s;
    s += ':';
    number(bitsOf(a.f));
    for (auto v : a.ints) {
      s += ',';
      number(v);
    }
    for (double f : a.floats) {
      s += ';';
      number(bitsOf(f));
    }
  }
  return s;
}

// Two identical operators give two distinct tensors in eager mode. Merged,
// they are one: right only while nobody can tell, so a value whose storage
// the graph writes in place, or that reaches the caller (who may write it),
// keeps its own operator.
size_t commonSubexpressions(record::Graph& g) {
  std::set<std::string> signatures;
  bool repeats = false;
  for (const Node& n : g.nodes)
    if (n.kind == NodeKind::CallFunction && !record::isCheck(n.target) && !hasSideEffects(n))
      repeats = !signatures.insert(signature(n)).second || repeats;
  if (!repeats) return 0;  // nothing to merge: the storage walk below is not needed
  std::vector<bool> distinct = storageFacts(g).writtenOrEscaping;
  Replacements replacements(g.nodes.size());
  std::vector<bool> keep(g.nodes.size(), true);
  std::map<std::string, int64_t> seen;
  size_t merged = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    forEachNodeArg(n, [&](int64_t& j) { j = replacements.resolve(j); });
    if (n.kind != NodeKind::CallFunction || record::isCheck(n.target)) continue;
    if (hasSideEffects(n)) {
      seen.clear();  // a write may change what an earlier identical read saw
      continue;
    }
    if (distinct[i]) continue;
    auto [it, inserted] = seen.emplace(signature(n), int64_t(i));
    if (inserted) continue;
    replacements.replace(i, it->second);
    keep[i] = false;
    ++merged;
  }
  if (merged) g = record::removeNodes(g, keep, replacements);
  return merged;
}

}  // namespace

namespace {

// The int dimension an aten::size.int node reads from an input whose
// guards fix its sizes (no symbols): a constant of every call.
std::optional<int64_t> staticSize(const record::Graph& g, const Node& n) {
  if (n.target != "aten::size" || n.overload != "int" || n.args.size() != 2 || n.args[0].kind != Arg::Kind::Node ||
      n.args[1].kind != Arg::Kind::Int)
    return std::nullopt;
  const Node& t = g.nodes[size_t(n.args[0].i)];
  if (!t.isInput() || t.outputs.size() != 1 || t.outputs[0].dynamic()) return std::nullopt;
  int64_t rank = int64_t(t.outputs[0].shape.size()), d = n.args[1].i < 0 ? n.args[1].i + rank : n.args[1].i;
  if (d < 0 || d >= rank) return std::nullopt;
  return t.outputs[0].shape[size_t(d)];
}

Arg constantArg(const c10::IValue& v, bool wrapped) {
  Arg a = v.isInt() ? Arg::integer(v.toInt()) : Arg::floating(v.toDouble());
  if (wrapped) {  // where the operator takes a Tensor: Python's wrapped number
    a.kind = Arg::Kind::WrappedScalar;
    a.s = v.isInt() ? "int64" : "float64";
  }
  return a;
}

// A node's uses of folded numbers become constants.
void useConstants(Node& n, const std::vector<std::optional<c10::IValue>>& value) {
  const c10::FunctionSchema* schema = n.isOp() ? schemaOf(n) : nullptr;
  for (size_t k = 0; k < n.args.size(); ++k) {
    Arg& a = n.args[k];
    const auto& v = a.kind == Arg::Kind::Node ? value[size_t(a.i)] : std::nullopt;
    if (v && (v->isInt() || v->isDouble())) {  // a comparison's bool stays, for the plan to refuse
      bool tensor = schema && k < schema->arguments().size() &&
                    schema->arguments()[k].type()->kind() == c10::TypeKind::TensorType;
      a = constantArg(*v, tensor);
    } else if (a.kind == Arg::Kind::SizeList) {
      bool constant = true;
      for (size_t e = 0; e + 1 < a.ints.size(); e += 2) {
        const auto& entry = a.ints[e] == 1 ? value[size_t(a.ints[e + 1])] : std::nullopt;
        if (entry && entry->isInt()) {  // an entry of another type stays, for the plan to refuse
          a.ints[e] = 0;
          a.ints[e + 1] = entry->toInt();
        }
        constant = constant && a.ints[e] == 0;
      }
      if (!constant) continue;
      std::vector<int64_t> sizes;
      for (size_t e = 1; e < a.ints.size(); e += 2) sizes.push_back(a.ints[e]);
      a.kind = Arg::Kind::IntList;
      a.ints = std::move(sizes);
    } else if (a.kind == Arg::Kind::NumberList) {
      bool constant = true;
      for (size_t e = 0; e < a.ints.size(); ++e) {
        const auto& entry = a.ints[e] >= 0 ? value[size_t(a.ints[e])] : std::nullopt;
        if (entry && entry->isDouble()) {  // an entry of another type stays, for the plan to refuse
          a.ints[e] = -1;
          a.floats[e] = entry->toDouble();
        }
        constant = constant && a.ints[e] < 0;
      }
      if (!constant) continue;
      a.kind = Arg::Kind::FloatList;
      a.ints.clear();
    }
  }
  for (auto& m : n.outputs)
    for (auto& d : m.sym)
      if (d.node >= 0 && value[size_t(d.node)] && value[size_t(d.node)]->isInt())
        d = record::SymDim{-1, 1, value[size_t(d.node)]->toInt(), -1};
}

// The number a number operator computes from constants, if Python would.
std::optional<c10::IValue> computedNumber(const Node& n) {
  if (!record::isNumberOp(n.target) || n.number.empty() || n.args.empty()) return std::nullopt;
  c10::IValue operands[2];
  for (size_t k = 0; k < n.args.size() && k < 2; ++k) {
    if (n.args[k].kind == Arg::Kind::Int) operands[k] = c10::IValue(n.args[k].i);
    else if (n.args[k].kind == Arg::Kind::Float) operands[k] = c10::IValue(n.args[k].f);
    else return std::nullopt;
  }
  try {
    return numberOp(numberOpOf(n.target), operands[0], operands[1]);
  } catch (const SizeMismatch&) {  // Python would raise: every call stops there, as it should
    return std::nullopt;
  }
}

}  // namespace

size_t foldStaticSizes(record::Graph& g) {
  std::vector<std::optional<c10::IValue>> value(g.nodes.size());
  std::vector<bool> keep(g.nodes.size(), true), returned(g.nodes.size(), false);
  if (const Node* out = g.output())
    for (auto& a : out->args)
      if (a.kind == Arg::Kind::Node) returned[size_t(a.i)] = true;  // outputs stay graph values
  size_t folded = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    if (record::isCheck(n.target)) {
      const auto& decided = n.args.size() == 1 && n.args[0].kind == Arg::Kind::Node ? value[size_t(n.args[0].i)] : std::nullopt;
      if (n.target == record::kExpectTrue && decided && decided->isBool() && decided->toBool()) {
        keep[i] = false;  // a decision every call the guards admit makes alike
        ++folded;
      }
      continue;  // any other stays as it is, for the plan to run or refuse
    }
    if (n.kind != NodeKind::Output) useConstants(n, value);
    if (returned[i]) continue;
    if (auto size = staticSize(g, n)) value[i] = c10::IValue(*size);
    else value[i] = computedNumber(n);
  }
  // Folded numbers no kept node uses any more go (one of another type than
  // its use takes stays, for the plan to refuse). Users come after what
  // they use: one backward sweep counts the uses of kept nodes only.
  std::vector<size_t> uses(g.nodes.size(), 0);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    if (value[i] && keep[i] && uses[i] == 0) keep[i] = false, ++folded;
    if (keep[i]) forEachNodeArg(g.nodes[i], [&](int64_t j) { ++uses[size_t(j)]; });
  }
  if (folded) g = record::removeNodes(g, keep);
  return folded;
}

size_t eliminateDeadCode(record::Graph& g) {
  std::vector<bool> live = record::liveNodes(g, hasSideEffects);
  size_t removed = size_t(std::count(live.begin(), live.end(), false));
  if (removed) g = record::removeNodes(g, live);
  return removed;
}

namespace {

std::set<size_t> directRoots(const record::Graph& g, size_t i, const std::vector<std::set<size_t>>& roots) {
  const Node& n = g.nodes[i];
  if (n.target == "getitem" && n.args.size() == 2 && n.args[0].kind == Arg::Kind::Node) return roots[size_t(n.args[0].i)];
  std::set<size_t> out;
  const c10::FunctionSchema* s = n.isOp() ? schemaOf(n) : nullptr;
  if (!s) return {i};
  for (auto& ret : s->returns()) {
    if (!ret.alias_info()) continue;
    for (size_t a = 0; a < s->arguments().size() && a < n.args.size(); ++a) {
      const auto* info = s->arguments()[a].alias_info();
      if (!info || n.args[a].kind != Arg::Kind::Node) continue;
      for (auto& set : info->beforeSets())
        if (ret.alias_info()->beforeSets().count(set))
          out.insert(roots[size_t(n.args[a].i)].begin(), roots[size_t(n.args[a].i)].end());
    }
  }
  if (out.empty()) out = {i};
  return out;
}

// The nodes whose storage a node's result may share: views and in-place
// results share their input's (per the schema's alias annotations); other
// results are new storage. In a loop, a carried value is its initial value
// in the first iteration and its next value after; the loop's results are
// its last next values and its scans: each shares theirs (a may-alias
// answer is a safe one), found by repeating the walk until nothing grows.
// A branch's value shares those of both its sides at its place.
std::vector<std::set<size_t>> storageRoots(const record::Graph& g) {
  std::vector<std::set<size_t>> roots(g.nodes.size());
  // A marker's first argument names its loop (the validator holds it to
  // that; a graph given to a Plan directly may not be validated).
  auto ofLoop = [&](const Node& n) {
    return (n.target == record::kCarried || n.target == record::kLoopEnd) && !n.args.empty() &&
           n.args[0].kind == Arg::Kind::Node && n.args[0].i >= 0 && size_t(n.args[0].i) < g.nodes.size();
  };
  std::map<int64_t, size_t> endOf;  // loop node -> its loop_end
  std::map<int64_t, size_t> elseOf;  // branch node -> its if_else
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.target == record::kLoopEnd && ofLoop(n)) endOf[n.args[0].i] = i;
    if (n.target == record::kIfElse && !n.args.empty() && n.args[0].kind == Arg::Kind::Node) elseOf[n.args[0].i] = i;
  }
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const Node& n = g.nodes[i];
      std::set<size_t> r = {i};
      auto add = [&](int64_t j) { r.insert(roots[size_t(j)].begin(), roots[size_t(j)].end()); };
      const Node* end = n.target == "getitem" && n.args.size() == 2 && n.args[0].kind == Arg::Kind::Node &&
                                n.args[0].i >= 0 && size_t(n.args[0].i) < i
                            ? &g.nodes[size_t(n.args[0].i)]
                            : nullptr;
      if (end && end->target == record::kIfEnd && end->args.size() == 2 && end->args[0].kind == Arg::Kind::Node) {
        auto side = elseOf.find(end->args[0].i);
        for (const Node* values : {end, side == elseOf.end() ? nullptr : &g.nodes[side->second]})
          if (values && values->args[1].kind == Arg::Kind::NodeList && n.args[1].i >= 0 &&
              size_t(n.args[1].i) < values->args[1].ints.size())
            add(values->args[1].ints[size_t(n.args[1].i)]);
      } else if (ofLoop(n)) {
        forEachNodeArg(n.target == record::kLoopEnd ? n : g.nodes[size_t(n.args[0].i)], add);
        if (auto end = endOf.find(n.args[0].i); n.target == record::kCarried && end != endOf.end())
          forEachNodeArg(g.nodes[end->second], add);
      } else {
        r = directRoots(g, i, roots);
      }
      if (r.size() != roots[i].size()) grew = true;
      roots[i] = std::move(r);
    }
    grew = grew && !endOf.empty();
  }
  return roots;
}

// Per storage root: whether the graph writes it in place (batch norm's
// running statistics in training mode count) and whether it reaches the
// caller through the Output node.
struct StorageUse {
  std::vector<bool> written, escapes;
  size_t firstInputWrite = SIZE_MAX;  // the first node that writes an input's storage
};

StorageUse storageUse(const record::Graph& g, const std::vector<std::set<size_t>>& roots) {
  StorageUse use{std::vector<bool>(g.nodes.size(), false), std::vector<bool>(g.nodes.size(), false)};
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.kind == NodeKind::Output)
      forEachNodeArg(n, [&](int64_t j) {
        for (size_t r : roots[size_t(j)]) use.escapes[r] = true;
      });
    if (!n.isOp() || !writesArguments(n)) continue;
    const c10::FunctionSchema* s = schemaOf(n);
    for (size_t a = 0; a < n.args.size(); ++a) {
      const Arg& arg = n.args[a];
      if (arg.kind != Arg::Kind::Node && arg.kind != Arg::Kind::NodeList) continue;
      bool writes = !s || (a < s->arguments().size() && s->arguments()[a].alias_info() && s->arguments()[a].alias_info()->isWrite()) ||
                    ((a == 3 || a == 4) && n.target.find("norm") != std::string::npos) ||
                    (a == 0 && record::isCollective(n.target));
      if (!writes) continue;
      auto write = [&](int64_t value) {
        for (size_t r : roots[size_t(value)]) {
          use.written[r] = true;
          if (g.nodes[r].isInput()) use.firstInputWrite = std::min(use.firstInputWrite, i);
        }
      };
      forEachArgNode(arg, write);  // a NodeList: Tensor(a!)[], the foreach operators' in-place forms
    }
  }
  return use;
}

// Nodes computed from parameters and constants only, deterministic, reading
// no tensor the graph writes, and not handed to the caller (who could
// change the cached result).
std::vector<bool> foldable(const record::Graph& g) {
  auto roots = storageRoots(g);
  StorageUse use = storageUse(g, roots);
  auto touched = [&](size_t i) {
    for (size_t r : roots[i])
      if (use.written[r] || use.escapes[r]) return true;
    return false;
  };
  std::vector<int64_t> scope = record::regionScopes(g);  // a region runs once per iteration, or not at all
  // Per node: whether its value is computed from some input, and whether
  // every input it is computed from is a parameter (a state tensor the
  // graph does not write; not a lifted number, which changes from call to
  // call, since the fold cache keys on tensors' identity and version).
  // Flags rather than sets of inputs: linear in the graph's size.
  std::vector<bool> fromInputs(g.nodes.size(), false), onlyParameters(g.nodes.size(), true);
  std::vector<bool> fold(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.isInput()) {
      fromInputs[i] = true;
      onlyParameters[i] = n.kind == NodeKind::GetAttr && n.number.empty() && !use.written[i];
      continue;
    }
    forEachNodeArg(n, [&](int64_t j) {
      fromInputs[i] = fromInputs[i] || fromInputs[size_t(j)];
      onlyParameters[i] = onlyParameters[i] && onlyParameters[size_t(j)];
    });
    if (n.kind != NodeKind::CallFunction || hasSideEffects(n) || !fromInputs[i] || scope[i] >= 0) continue;
    fold[i] = onlyParameters[i] && !touched(i);
  }
  return fold;
}

}  // namespace

PassOptions PassOptions::none() {
  PassOptions o;
  o.deadCode = o.commonSubexpr = o.foldConstants = o.foldConvBatchNorm = o.dropoutEval = false;
  return o;
}

PassOptions PassOptions::all() {
  PassOptions o;
  o.foldConvBatchNorm = true;
  return o;
}

PassOptions PassOptions::parse(const std::string& text) {
  if (text == "default") return PassOptions();
  if (text == "all") return all();
  PassOptions o = none();
  if (text == "none") return o;
  std::stringstream in(text);
  for (std::string name; std::getline(in, name, ',');) {
    if (name == "dce") o.deadCode = true;
    else if (name == "cse") o.commonSubexpr = true;
    else if (name == "fold") o.foldConstants = true;
    else if (name == "conv-bn") o.foldConvBatchNorm = true;
    else if (name == "dropout") o.dropoutEval = true;
    else throw Error("unknown optimization '" + name + "' (known: dce, cse, fold, conv-bn, dropout, default, all, none)");
  }
  return o;
}

bool writesArguments(const record::Node& n) {
  if (!n.isOp()) return false;
  static const std::set<std::string> kRunningStats = {"aten::batch_norm", "aten::native_batch_norm",
                                                      "aten::_batch_norm_impl_index", "aten::instance_norm",
                                                      "aten::_native_batch_norm_legit"};
  if (kRunningStats.count(n.target) && n.args.size() > 5 && n.args[5].kind == Arg::Kind::Bool && n.args[5].i) return true;
  if (record::isCollective(n.target)) return true;  // their schemas mark no write (graph.h)
  const c10::FunctionSchema* s = schemaOf(n);
  if (!s) return true;  // unknown: assume the worst
  for (auto& a : s->arguments())
    if (a.alias_info() && a.alias_info()->isWrite()) return true;
  return false;
}

bool isRandom(const record::Node& n) {
  if (!n.isOp()) return false;
  // Samplers without a Generator argument in their schema (rand_like) and
  // the dropout family.
  static const std::set<std::string> kRandom = {
      "aten::dropout", "aten::feature_dropout", "aten::alpha_dropout", "aten::feature_alpha_dropout",
      "aten::native_dropout", "aten::rrelu", "aten::rrelu_with_noise", "aten::bernoulli", "aten::bernoulli_",
      "aten::multinomial", "aten::normal", "aten::normal_", "aten::poisson", "aten::uniform_", "aten::exponential_",
      "aten::geometric_", "aten::log_normal_", "aten::cauchy_", "aten::random_"};
  if (kRandom.count(n.target) || n.target.rfind("aten::rand", 0) == 0) return true;
  const c10::FunctionSchema* s = schemaOf(n);
  if (!s) return true;
  for (auto& a : s->arguments()) {
    auto t = a.real_type();
    if (t->kind() == c10::TypeKind::OptionalType) t = t->containedType(0);
    if (t->kind() == c10::TypeKind::GeneratorType) return true;
  }
  return false;
}

namespace {

// Operators that make a tensor without writing its memory.
bool allocatesUninitialized(const Node& n) {
  static const std::set<std::string> kOps = {"aten::empty", "aten::empty_like", "aten::empty_strided", "aten::new_empty",
                                             "aten::new_empty_strided"};
  return n.isOp() && kOps.count(n.target) > 0;
}

// In-place operators that overwrite every element of their first argument
// without reading it.
bool overwritesFirstArgument(const Node& n) {
  static const std::set<std::string> kOps = {"aten::fill_", "aten::zero_", "aten::copy_", "aten::normal_",
                                             "aten::uniform_", "aten::random_", "aten::bernoulli_", "aten::cauchy_",
                                             "aten::exponential_", "aten::geometric_", "aten::log_normal_"};
  return n.isOp() && kOps.count(n.target) > 0;
}

// In-place operators that set the size of their first argument: they read
// none of it, and the elements they add are unwritten memory.
bool resizesFirstArgument(const Node& n) {
  return n.isOp() && (n.target == "aten::resize_" || n.target == "aten::resize_as_");
}

bool returnsAlias(const c10::FunctionSchema& s) {
  for (auto& r : s.returns())
    if (r.alias_info() && !r.alias_info()->isWrite()) return true;
  return false;
}

int64_t numelOf(const Node& n) { return n.outputs.empty() ? -1 : n.outputs[0].numel(); }

}  // namespace

std::string readsUninitialized(const record::Graph& g) {
  // Only an allocation or a resize leaves memory unwritten: most graphs
  // have neither, and need no walk over their storages.
  if (std::none_of(g.nodes.begin(), g.nodes.end(),
                   [](const Node& n) { return allocatesUninitialized(n) || resizesFirstArgument(n); }))
    return "";
  auto roots = storageRoots(g);
  // Per storage root with unwritten elements: the node that left them so
  // (an allocation, a resize that grew it) and the root's size after it.
  struct Unwritten {
    size_t by;
    int64_t numel;
  };
  std::map<size_t, Unwritten> unwritten;
  auto describe = [&](size_t i) { return record::nameAndSource(g.nodes[i]); };
  auto unwrittenRoot = [&](size_t value) -> std::optional<size_t> {
    for (size_t r : roots[value])
      if (unwritten.count(r)) return r;
    return std::nullopt;
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    // An empty allocation holds nothing to read (its sizes are checked
    // where a lifted number makes them, and a symbolic size is never 0).
    if (allocatesUninitialized(n) && numelOf(n) != 0) unwritten[i] = {i, numelOf(n)};
    const c10::FunctionSchema* s = n.isOp() ? schemaOf(n) : nullptr;
    bool alias = n.target == "getitem" || (s && returnsAlias(*s));
    // Argument a of n reads tensor `value`: the reason it reads unwritten memory, or "".
    auto reads = [&](size_t a, size_t value) -> std::string {
      if (a == 0 && resizesFirstArgument(n)) {
        if (numelOf(n) > numelOf(g.nodes[value]))
          for (size_t r : roots[value]) unwritten[r] = {i, numelOf(n)};
        return "";
      }
      auto root = unwrittenRoot(value);
      if (!root) return "";
      bool isOut = s && a < s->arguments().size() && s->arguments()[a].is_out();
      if ((a == 0 && overwritesFirstArgument(n)) || isOut) {
        // A write of all of it makes it initialized; a write of part leaves it as it was.
        if (numelOf(g.nodes[value]) == unwritten[*root].numel && numelOf(g.nodes[value]) >= 0) unwritten.erase(*root);
        return "";
      }
      if (alias && a == 0 && n.kind != NodeKind::Output) return "";  // a view or alias of it: not a read yet
      size_t by = unwritten[*root].by;
      if (by != *root)
        return "the graph reads memory no recorded operator wrote: " + describe(by) + " grows " + describe(*root) +
               " and " + describe(i) + " reads it before anything fills the new elements (write all of it first, "
               "e.g. with copy_ or fill_)";
      return "the graph reads memory no recorded operator wrote: " + describe(*root) + " is read by " + describe(i) +
             " before anything fills it (tensors filled by code outside ATen operators, such as torch.Tensor(list), "
             "the typed legacy constructors and indexing with a Python list, cannot be replayed)";
    };
    // A Node argument, or the entries of a tensor list (x[[1, 0]] indexes with a list of one tensor).
    for (size_t a = 0; a < n.args.size(); ++a) {
      std::string why;
      if (n.args[a].kind == Arg::Kind::Node) why = reads(a, size_t(n.args[a].i));
      if (n.args[a].kind == Arg::Kind::NodeList)
        for (int64_t j : n.args[a].ints)
          if (j >= 0 && why.empty()) why = reads(a, size_t(j));
      if (!why.empty()) return why;
    }
  }
  return "";
}

bool writesItsInputs(const record::Graph& g) {
  auto roots = storageRoots(g);
  StorageUse use = storageUse(g, roots);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].isInput() && use.written[i]) return true;
  return false;
}

namespace {

// An effect in a loop's body happens before the body's next iteration:
// the loop (the outermost region around it) is where effects begin; so for
// a branch's side (whose branch still decides before them: its IfBegin
// stops a call cleanly, see Plan).
size_t firstEffectWith(const record::Graph& g, const StorageUse& use) {
  size_t effect = std::min(use.firstInputWrite, g.nodes.size());
  for (size_t i = 0; i < effect; ++i)
    if (isRandom(g.nodes[i]) && !isEvalDropout(g.nodes[i])) effect = i;
  if (effect == g.nodes.size()) return effect;
  std::vector<int64_t> scope = record::regionScopes(g);
  for (int64_t s = scope[effect]; s >= 0; s = scope[size_t(s)]) effect = size_t(s);
  const Node& at = g.nodes[effect];  // an else side's region is its branch's
  bool elseSide = at.target == record::kIfElse && !at.args.empty() && at.args[0].kind == Arg::Kind::Node;
  return elseSide ? size_t(at.args[0].i) : effect;
}

}  // namespace

size_t firstEffect(const record::Graph& g) { return firstEffectWith(g, storageUse(g, storageRoots(g))); }

StorageFacts storageFacts(const record::Graph& g) {
  auto roots = storageRoots(g);
  StorageUse use = storageUse(g, roots);
  StorageFacts facts{std::vector<bool>(g.nodes.size(), false), std::vector<bool>(g.nodes.size(), false),
                     firstEffectWith(g, use)};
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (size_t r : roots[i]) {
      facts.writtenInPlace[i] = facts.writtenInPlace[i] || use.written[r];
      facts.writtenOrEscaping[i] = facts.writtenOrEscaping[i] || use.written[r] || use.escapes[r];
    }
  return facts;
}

bool stopsCleanly(const record::Graph& g) { return firstEffect(g) == g.nodes.size(); }

namespace {

// A check after the first effect moves before it, with the operators that
// compute its value, where none of them has effects or reads a tensor the
// graph writes (torchaudio's Tacotron2 reads its longest mel length after
// the prenet's dropout drew: a call with another length must stop before
// the draw). Reads of unwritten values give the same results earlier.
record::Graph hoistChecks(record::Graph g) {
  auto roots = storageRoots(g);
  StorageUse use = storageUse(g, roots);
  size_t effect = firstEffectWith(g, use);
  if (effect == g.nodes.size()) return g;
  // Two inputs may share memory the graph cannot see (a buffer that is a
  // view of another): where the graph writes an input, no read of an
  // input moves.
  bool inputsWritten = use.firstInputWrite != SIZE_MAX;
  auto unwritten = [&](int64_t j) {
    return std::none_of(roots[size_t(j)].begin(), roots[size_t(j)].end(), [&](size_t r) {
      return use.written[r] || (inputsWritten && g.nodes[r].isInput() && g.nodes[r].number.empty());
    });
  };
  std::vector<bool> movable(g.nodes.size(), false), moved(g.nodes.size(), false);
  std::vector<int64_t> scope = record::regionScopes(g);  // a region's nodes stay in it
  for (size_t i = effect; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    bool ok = n.kind == NodeKind::CallFunction && (record::isCheck(n.target) || !hasSideEffects(n)) && scope[i] < 0;
    forEachNodeArg(n, [&](int64_t j) { ok = ok && (size_t(j) < effect || movable[size_t(j)]) && unwritten(j); });
    movable[i] = ok;
  }
  // The movable checks, number operators (an int one fails where its value
  // leaves 64 bits) and what they use, last to first.
  for (size_t i = g.nodes.size(); i-- > effect;) {
    bool fallible = record::isCheck(g.nodes[i].target) || record::isNumberOp(g.nodes[i].target);
    if (!moved[i] && !(movable[i] && fallible)) continue;
    moved[i] = true;
    forEachNodeArg(g.nodes[i], [&](int64_t j) { moved[size_t(j)] = size_t(j) >= effect || moved[size_t(j)]; });
  }
  std::vector<size_t> order;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (i < effect || moved[i]) order.push_back(i);
  for (size_t i = effect; i < g.nodes.size(); ++i)
    if (!moved[i]) order.push_back(i);
  return reordered(std::move(g), order);
}

}  // namespace

namespace {

// A branch's value that every seen side sets to one value from before the
// branch is that value (a call that takes an unseen side stops at the
// branch): later nodes take it directly, so checks of it move before the
// branch where they read nothing else it computes.
record::Graph passThroughBranches(record::Graph g) {
  if (!record::hasBranches(g)) return g;
  std::map<int64_t, size_t> elseOf;  // branch node -> its if_else
  Replacements replacements(g.nodes.size());
  bool any = false;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.target == record::kIfElse && n.args.size() == 2 && n.args[0].kind == Arg::Kind::Node) elseOf[n.args[0].i] = i;
    if (n.target != "getitem" || n.args.size() != 2 || n.args[0].kind != Arg::Kind::Node || n.args[1].kind != Arg::Kind::Int ||
        n.args[0].i < 0 || size_t(n.args[0].i) >= i || g.nodes[size_t(n.args[0].i)].target != record::kIfEnd)
      continue;
    const Node& end = g.nodes[size_t(n.args[0].i)];
    int64_t start = end.args[0].i;
    auto side = elseOf.find(start);
    if (side == elseOf.end() || g.nodes[size_t(start)].args.size() < 3) continue;
    int64_t same = -1;
    bool one = true;
    for (int k = 0; k < 2; ++k) {
      if (!g.nodes[size_t(start)].args[size_t(1 + k)].i) continue;  // unseen
      const std::vector<int64_t>& list = (k == 0 ? g.nodes[side->second] : end).args[1].ints;
      if (n.args[1].i < 0 || size_t(n.args[1].i) >= list.size()) one = false;
      else if (same < 0) same = list[size_t(n.args[1].i)];
      else one = one && same == list[size_t(n.args[1].i)];
    }
    if (!one || same < 0 || same >= start) continue;
    replacements.replace(i, same);
    any = true;
  }
  if (!any) return g;
  record::Graph out = g;
  for (Node& n : out.nodes) forEachNodeArg(n, [&](int64_t& j) { j = replacements.resolve(j); });
  return out;
}

}  // namespace

record::Graph planOrder(const record::Graph& g) { return hoistChecks(inputsFirst(passThroughBranches(g))); }

Backend parseBackend(const std::string& name) {
  if (name == "aten") return Backend::Aten;
  if (name == "compiled") return Backend::Compiled;
  if (name == "auto") return Backend::Auto;
  throw Error("unknown backend '" + name + "' (use aten, compiled or auto)");
}

OptimizedGraph optimize(const record::Graph& graph, const PassOptions& o, bool inference, bool cachesState) {
  OptimizedGraph out;
  // Gradients follow the operators as the program ran them: merging two
  // (cse) would sum their gradients in another order.
  bool differentiates = record::hasBackward(graph);
  inference = inference && !differentiates;
  out.graph = planOrder(graph);
  auto note = [&](const char* pass, size_t n, const char* what) {
    if (n) out.applied.push_back(std::string(pass) + ": " + std::to_string(n) + " " + what);
  };
  if (inference && o.dropoutEval) note("dropout", dropoutEval(out.graph), "eval-mode dropouts removed");
  if (inference && o.foldConvBatchNorm) note("conv-bn", foldConvBatchNorm(out.graph), "batch norms folded into convolutions");
  if (inference && o.foldConstants && cachesState)
    note("linear", linearAsAddmm(out.graph), "linear layers as addmm on a transposed weight computed once");
  if (inference && o.foldConstants)
    note("scalars", wrappedScalarsCast(out.graph), "Python numbers cast once to their operator's dtype");
  if (o.commonSubexpr && !differentiates) note("cse", commonSubexpressions(out.graph), "duplicate operators merged");
  if (o.foldConstants) note("sizes", foldStaticSizes(out.graph), "sizes, number operators and decisions fixed by the guards folded");
  if (o.deadCode) note("dce", eliminateDeadCode(out.graph), "unused nodes removed");
  out.folded.assign(out.graph.nodes.size(), false);
  if (inference && o.foldConstants && cachesState) {
    out.folded = foldable(out.graph);
    size_t n = 0;
    for (bool f : out.folded) n += f;
    note("fold", n, "parameter-only operators computed once");
  }
  return out;
}

bool onlyScalesValues(const record::Graph& g, int number) {
  // The foreach operators' `scalar` and `scalars` (a Scalar[], one per tensor) too.
  static const std::set<std::string> kScalars = {"alpha", "beta", "value", "other", "exponent", "min", "max",
                                                 "scalar", "scalars"};
  static const std::set<record::NumberOp> kExact = {NumberOp::Add, NumberOp::Sub, NumberOp::Mul, NumberOp::Neg,
                                                    NumberOp::Abs};
  std::vector<bool> reached(g.nodes.size(), false);
  reached[size_t(number)] = true;
  for (size_t i = size_t(number) + 1; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    for (size_t a = 0; a < n.args.size(); ++a) {
      const Arg& arg = n.args[a];
      bool takes = arg.kind == Arg::Kind::Node && arg.i >= 0 && reached[size_t(arg.i)];
      bool inList = false;
      if (arg.kind != Arg::Kind::Node)
        forEachArgNode(arg, [&](int64_t j) { inList = inList || (j >= 0 && size_t(j) < i && reached[size_t(j)]); });
      if (inList && arg.kind != Arg::Kind::NumberList) return false;
      if (!(takes || inList) || n.kind == NodeKind::Output) continue;  // returned or stored by the mock
      // Float +, -, * never fail; int arithmetic on inputs alone
      // (step += 1) moves before the graph's effects (planOrder), where
      // leaving 64 bits stops the call cleanly.
      bool onInputs = true;
      for (const Arg& x : n.args)
        onInputs = onInputs && (x.kind != Arg::Kind::Node || (x.i >= 0 && g.nodes[size_t(x.i)].isInput()));
      if (kExact.count(numberOpOf(n.target)) && (n.number == "float" || (n.number == "int" && onInputs))) {
        reached[i] = true;
        continue;
      }
      // lr / bias_correction: a float divided raises for its divisor alone.
      if (numberOpOf(n.target) == NumberOp::TrueDiv && a == 0 && g.nodes[size_t(arg.i)].number == "float") {
        reached[i] = true;
        continue;
      }
      const c10::FunctionSchema* schema = n.isOp() ? schemaOf(n) : nullptr;
      if (!schema || a >= schema->arguments().size()) return false;
      const c10::Argument& param = schema->arguments()[a];
      bool wrapped = param.type()->kind() == c10::TypeKind::TensorType;
      if (!wrapped && !kScalars.count(param.name())) return false;
    }
  }
  return true;
}

}  // namespace magpy::replay

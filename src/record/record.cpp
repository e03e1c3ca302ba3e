// Equality and one-line renderings of the record model's parts, and the
// file's blob bookkeeping.
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>

#include "magpy/record/graph.h"
#include "magpy/record/guard.h"
#include "magpy/record/mock.h"
#include "magpy/record/record.h"
#include "magpy/support/strings.h"

namespace magpy::record {

const char* toString(NodeKind k) {
  switch (k) {
    case NodeKind::Placeholder: return "placeholder";
    case NodeKind::GetAttr: return "get_attr";
    case NodeKind::CallFunction: return "call_function";
    case NodeKind::CallMethod: return "call_method";
    case NodeKind::CallModule: return "call_module";
    case NodeKind::Output: return "output";
  }
  return "?";
}

const char* toString(GradMode m) {
  switch (m) {
    case GradMode::Ambient: return "";
    case GradMode::Off: return "no_grad";
    case GradMode::On: return "enable_grad";
  }
  return "?";
}

bool Arg::operator==(const Arg& o) const {
  return kind == o.kind && i == o.i && std::memcmp(&f, &o.f, sizeof f) == 0 && s == o.s && ints == o.ints &&
         floats.size() == o.floats.size() &&
         (floats.empty() || std::memcmp(floats.data(), o.floats.data(), floats.size() * sizeof(double)) == 0);
}

const Node* Graph::output() const {
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it)
    if (it->kind == NodeKind::Output) return &*it;
  return nullptr;
}

namespace {

// Markers, checks and backward are all "magpy.<name>": the predicates below
// run per node in every pass, and most targets ("aten::...") fail here.
bool magpyTarget(const std::string& target) { return target.size() > 6 && target.compare(0, 6, "magpy.") == 0; }

}  // namespace

bool readsItem(const Node& n) { return n.kind == NodeKind::CallFunction && n.target == kItem && !n.number.empty(); }

bool Node::isOp() const {
  if (kind != NodeKind::CallFunction || target == "getitem" || (!number.empty() && !readsItem(*this))) return false;
  return !magpyTarget(target) || (!isCheck(target) && !isRegionMarker(target) && target != kBackward);
}

bool isLoopMarker(const std::string& target) {
  return magpyTarget(target) && (target == kLoop || target == kCarried || target == kLoopEnd);
}
bool isIfMarker(const std::string& target) { return magpyTarget(target) && (target == kIf || target == kIfElse || target == kIfEnd); }
bool isRegionMarker(const std::string& target) { return isLoopMarker(target) || isIfMarker(target); }
bool hasUnseenSide(const Node& n) {
  return n.target == kIf && n.args.size() >= 3 && !(n.args[1].i && n.args[2].i);
}

bool isCollective(const std::string& target) {
  return target.compare(0, 6, "c10d::") == 0 && (target == "c10d::allreduce_" || target == "c10d::broadcast_");
}

bool isRecordedReduceOp(int64_t code) { return code == 0 || (code >= 2 && code <= 7); }

bool isCheck(const std::string& target) {
  return magpyTarget(target) && (target == kExpectEqual || target == kExpectSizes || target == kExpectTrue);
}

namespace {

enum class NumberFamily { None, Arithmetic, MinMax, Sign, Convert, Real, Rounding, Comparison };

// The one table of the graph's number operators: the capture's callees,
// the record's targets and replay's operations all come from it.
struct NumberOpInfo {
  const char* target;
  NumberOp op;
  NumberFamily family;
};
constexpr NumberOpInfo kNumberOps[] = {
    {"operator.add", NumberOp::Add, NumberFamily::Arithmetic},
    {"operator.sub", NumberOp::Sub, NumberFamily::Arithmetic},
    {"operator.mul", NumberOp::Mul, NumberFamily::Arithmetic},
    {"operator.truediv", NumberOp::TrueDiv, NumberFamily::Arithmetic},
    {"operator.floordiv", NumberOp::FloorDiv, NumberFamily::Arithmetic},
    {"operator.mod", NumberOp::Mod, NumberFamily::Arithmetic},
    {"operator.pow", NumberOp::Pow, NumberFamily::Arithmetic},
    {"builtins.min", NumberOp::Min, NumberFamily::MinMax},
    {"builtins.max", NumberOp::Max, NumberFamily::MinMax},
    {"operator.neg", NumberOp::Neg, NumberFamily::Sign},
    {"builtins.abs", NumberOp::Abs, NumberFamily::Sign},
    {"builtins.int", NumberOp::Int, NumberFamily::Convert},
    {"builtins.float", NumberOp::Float, NumberFamily::Convert},
    {"math.sqrt", NumberOp::Sqrt, NumberFamily::Real},
    {"math.ceil", NumberOp::Ceil, NumberFamily::Rounding},
    {"math.floor", NumberOp::Floor, NumberFamily::Rounding},
    {"operator.lt", NumberOp::Lt, NumberFamily::Comparison},
    {"operator.le", NumberOp::Le, NumberFamily::Comparison},
    {"operator.gt", NumberOp::Gt, NumberFamily::Comparison},
    {"operator.ge", NumberOp::Ge, NumberFamily::Comparison},
    {"operator.eq", NumberOp::Eq, NumberFamily::Comparison},
    {"operator.ne", NumberOp::Ne, NumberFamily::Comparison},
};

const NumberOpInfo* numberOpInfo(const std::string& target) {
  static const std::map<std::string, const NumberOpInfo*> kByTarget = [] {
    std::map<std::string, const NumberOpInfo*> m;
    for (const auto& info : kNumberOps) m.emplace(info.target, &info);
    return m;
  }();
  auto it = kByTarget.find(target);
  return it == kByTarget.end() ? nullptr : it->second;
}

NumberFamily familyOf(const std::string& t) {
  const NumberOpInfo* info = numberOpInfo(t);
  return info ? info->family : NumberFamily::None;
}

bool isNumberType(const std::string& t) { return t == "int" || t == "float"; }

}  // namespace

bool isNumberOp(const std::string& target) { return familyOf(target) != NumberFamily::None; }

NumberOp numberOpOf(const std::string& target) {
  const NumberOpInfo* info = numberOpInfo(target);
  return info ? info->op : NumberOp::None;
}

const char* numberOpTarget(NumberOp op) {
  for (const auto& info : kNumberOps)
    if (info.op == op) return info.target;
  return "";
}

int numberOpArity(const std::string& target) {
  switch (familyOf(target)) {
    case NumberFamily::None: return 0;
    case NumberFamily::Sign: case NumberFamily::Convert: case NumberFamily::Real: case NumberFamily::Rounding: return 1;
    default: return 2;
  }
}

std::string numberOpResult(const std::string& target, const std::string& left, const std::string& right) {
  int arity = numberOpArity(target);
  if (arity == 0 || !isNumberType(left) || (arity == 2) != isNumberType(right) || (arity == 1 && !right.empty())) return "";
  switch (familyOf(target)) {
    case NumberFamily::Arithmetic:
      if (target == "operator.truediv") return "float";
      return left == "int" && right == "int" ? "int" : "float";
    case NumberFamily::MinMax: return left == right ? left : "";
    case NumberFamily::Sign: return left;
    case NumberFamily::Convert: return target == "builtins.int" ? "int" : "float";
    case NumberFamily::Real: return "float";
    case NumberFamily::Rounding: return "int";
    case NumberFamily::Comparison: return "bool";
    case NumberFamily::None: break;
  }
  return "";
}

bool hasBackward(const Graph& g) {
  return std::any_of(g.nodes.begin(), g.nodes.end(), [](const Node& n) { return n.target == kBackward; });
}

bool hasCollectives(const Graph& g) {
  return std::any_of(g.nodes.begin(), g.nodes.end(), [](const Node& n) { return isCollective(n.target); });
}

size_t Graph::numOps() const {
  size_t n = 0;
  for (auto& node : nodes) n += node.isOp();
  return n;
}

bool Check::operator==(const Check& o) const {
  return kind == o.kind && (kind != Kind::Number || number == o.number) && s == o.s && i == o.i && atom == o.atom && keys == o.keys && meta == o.meta && path == o.path;
}

Check numberCheck(NumberType type) {
  Check c;
  c.kind = Check::Kind::Number;
  c.number = type;
  c.s = type == NumberType::Int ? "builtins.int" : "builtins.float";
  return c;
}

std::string describe(const Check& c) {
  switch (c.kind) {
    case Check::Kind::Type:
    case Check::Kind::Number: return "type " + c.s;
    case Check::Kind::Equals: return "== " + toString(c.atom);
    case Check::Kind::Length: return "len " + std::to_string(c.i);
    case Check::Kind::DictKeys: {
      std::vector<std::string> keys;
      for (auto& k : c.keys) keys.push_back(toString(k));
      return "keys [" + join(keys, ", ") + "]";
    }
    case Check::Kind::Tensor:
      return "tensor " + toString(c.meta) + (c.meta.dynamic() ? " (sizes s >= " + std::to_string(kMinSymbolValue) + ")" : "");
    case Check::Kind::Identity: return "is " + c.s;
    case Check::Kind::Alias: return "is " + toString(c.path);
    case Check::Kind::Absent: return "absent";
    case Check::Kind::Distinct: return "is not " + toString(c.path);
  }
  return "?";
}

std::string toString(const Guard& g) { return toString(g.path) + ": " + describe(g.check); }

std::string toString(const ValueExpr& e) {
  auto items = [&](const char* open, const char* close) {
    std::vector<std::string> parts;
    for (size_t i = 0; i < e.items.size(); ++i)
      parts.push_back(e.kind == ValueExpr::Kind::Dict ? toString(e.keys[i]) + ": " + toString(e.items[i])
                                                      : toString(e.items[i]));
    std::string tail = (e.kind == ValueExpr::Kind::Tuple && parts.size() == 1) ? "," : "";
    return open + join(parts, ", ") + tail + close;
  };
  std::string name = e.index > 0 && e.kind != ValueExpr::Kind::GraphOutput ? "#" + std::to_string(e.index) : "";
  switch (e.kind) {
    case ValueExpr::Kind::Ref: return "the same " + name;
    case ValueExpr::Kind::Const: return toString(e.atom);
    case ValueExpr::Kind::GraphOutput: return "out[" + std::to_string(e.index) + "]";
    case ValueExpr::Kind::Read: return toString(e.path);
    case ValueExpr::Kind::Tuple: return name + items("(", ")");
    case ValueExpr::Kind::List: return name + items("[", "]");
    case ValueExpr::Kind::Dict: return name + (e.type.empty() ? items("{", "}") : e.type + "(" + items("{", "}") + ")");
  }
  return "?";
}

std::string toString(const Effect& e) {
  std::string target = toString(e.target);
  switch (e.kind) {
    case Effect::Kind::SetAttr: return target + "." + e.name + " = " + toString(e.value);
    case Effect::Kind::SetItem: return target + "[" + toString(e.key) + "] = " + toString(e.value);
    case Effect::Kind::DelAttr: return "del " + target + "." + e.name;
    case Effect::Kind::DelItem: return "del " + target + "[" + toString(e.key) + "]";
    case Effect::Kind::Assign: return target + "[:] = " + toString(e.value);
    case Effect::Kind::SetObjectItem: return target + "[@" + toString(e.keyPath) + "] = " + toString(e.value);
    case Effect::Kind::Extend: return target + ".extend(" + toString(e.value) + ")";
  }
  return "?";
}

bool sameMock(const MockSpec& a, const MockSpec& b) {
  bool same = toString(a.result) == toString(b.result) && a.effects.size() == b.effects.size();
  for (size_t i = 0; same && i < a.effects.size(); ++i) same = toString(a.effects[i]) == toString(b.effects[i]);
  return same;
}

std::string toString(const GraphBreak& b) {
  // Breaks found while building the record (not at an instruction) have no place.
  if (b.where.empty()) return b.function.empty() ? b.reason : "in " + b.function + ": " + b.reason;
  return b.where + " in " + b.function + (b.opcode.empty() ? "" : " (" + b.opcode + ")") + ": " + b.reason;
}

namespace {

// Calls f(index) for every blob reference: tensor values (state, globals,
// logged calls) and graph constants. f may change the index.
template <class F>
void forEachBlobReference(RecordFile& file, F&& f) {
  std::function<void(Value&)> value = [&](Value& v) {
    if (v.kind == Value::Kind::Tensor) {
      int64_t b = v.blob;
      f(b);
      v.blob = uint32_t(b);
    }
    for (auto& item : v.items) value(item);
  };
  for (auto& fn : file.functions) {
    value(fn.self);
    for (auto& r : fn.records)
      for (auto& n : r.graph.nodes)
        if (n.blob >= 0) f(n.blob);
  }
  for (auto& g : file.globals) value(g.globals);
  for (auto& c : file.calls) {
    value(c.args);
    value(c.kwargs);
    value(c.result);
    value(c.rng);
    for (auto& u : c.updates) value(u.value);
  }
}

}  // namespace

void dropUnusedBlobs(RecordFile& f) {
  std::vector<int64_t> renumbered(f.blobs.size(), -1);
  forEachBlobReference(f, [&](int64_t& b) {
    if (b >= 0 && size_t(b) < renumbered.size()) renumbered[size_t(b)] = 0;
  });
  std::vector<TensorBlob> kept;
  for (size_t b = 0; b < f.blobs.size(); ++b) {
    if (renumbered[b] < 0) continue;
    renumbered[b] = int64_t(kept.size());
    kept.push_back(std::move(f.blobs[b]));
  }
  forEachBlobReference(f, [&](int64_t& b) {
    if (b >= 0 && size_t(b) < renumbered.size()) b = renumbered[size_t(b)];
  });
  f.blobs = std::move(kept);
}

}  // namespace magpy::record

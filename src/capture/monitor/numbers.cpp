// Python numbers the program keeps in its state (a step counter, a
// learning rate, a width), lifted into the graph (MagPy 6.2.1). Only runs
// of functions whose calls were seen to differ in such numbers lift them
// (CallSpec::varyingNumbers): an int or float the run reads from its state
// becomes a graph input where the run uses it, and everything it computes
// from it stays in the graph: Python's + - * / // become number operators,
// operators take the numbers as arguments (x * gain, x[:, :width]), and a
// number stored into state or returned becomes a graph output for the mock.
//
// Any other use (a comparison, a branch, a builtin, a container index, a
// Python function summarized by its annotation, a torch layer reading its
// own attributes, a native call that keeps it, torch making it tensor data)
// means the run depends on the value: the number is fixed, and its guard
// keeps its value.
#include "capture/monitor/monitor.h"
#include "capture/monitor/state.h"

namespace magpy::capture {
namespace {

constexpr int kMaxDepth = 2;  // containers of containers of numbers, no deeper

bool isNumberAtom(const ShadowNode& n) {
  return n.kind == NodeKind::Atom && (n.atom.kind == record::Atom::Kind::Int || n.atom.kind == record::Atom::Kind::Float);
}

}  // namespace

bool Monitor::liftable(NodeId n) const {
  if (n < 0) return false;
  const ShadowNode& s = refs_.node(n);
  return isNumberAtom(s) && s.sizeOf == kNoNode && !s.dataDependent && (s.number >= 0 || s.external);
}

bool Monitor::numberFree(NodeId id) const {
  return liftNumbers_ && !allNumbersFixed_ && liftable(id) && !fixedNumbers_.count(id);
}

int Monitor::liftedNumber(NodeId id) { return liftNumbers_ && liftable(id) ? numberNode(id) : -1; }

bool Monitor::holdsNumbers(NodeId n, int depth) const {
  if (n < 0) return false;
  if (liftable(n)) return true;
  const ShadowNode& node = refs_.node(n);
  if (node.kind == NodeKind::Tuple || node.kind == NodeKind::List || node.kind == NodeKind::Dict) {
    if (depth >= kMaxDepth) return true;  // not searched: counted as holding numbers
    for (auto& e : node.last().refs)
      if (holdsNumbers(e.target, depth + 1)) return true;
    return false;
  }
  auto it = sliceParts_.find(n);
  if (it == sliceParts_.end()) return false;
  for (NodeId part : it->second)
    if (holdsNumbers(part, depth + 1)) return true;
  return false;
}

// The graph node of a liftable number; a number of the state gets an input.
int Monitor::numberNode(NodeId n) {
  ShadowNode& s = refs_.node(n);
  if (s.number < 0) {
    s.number = ops_->addNumberInput(s.atom);
    inputs_.push_back({s.number, n});
  }
  return s.number;
}

// The numbers a value holds, and those a lifted number was computed from,
// are fixed: the run used their values.
void Monitor::fixNumbers(NodeId n, const std::string& how, int depth) {
  if (n < 0) return;
  const ShadowNode& node = refs_.node(n);
  if (liftable(n)) {
    if (numberUse_.empty()) numberUse_ = how + (frames_.empty() ? "" : " at " + where(*frames_.back()));
    if (node.number >= 0) fixGraphNumber(node.number);
    else fixedNumbers_.insert(n);
    return;
  }
  bool container = node.kind == NodeKind::Tuple || node.kind == NodeKind::List || node.kind == NodeKind::Dict;
  auto parts = sliceParts_.find(n);
  if (!container && parts == sliceParts_.end()) return;
  if (depth >= kMaxDepth) {
    allNumbersFixed_ = allNumbersFixed_ || holdsNumbers(n, kMaxDepth);
    return;
  }
  std::vector<NodeId> inner;
  if (container)
    for (auto& e : node.last().refs) inner.push_back(e.target);
  else
    inner = parts->second;
  for (NodeId i : inner) fixNumbers(i, how, depth + 1);
}

// Back through the number operators to the inputs that read the state.
void Monitor::fixGraphNumber(int node) {
  const record::Node& n = ops_->graph().nodes[size_t(node)];
  if (n.isInput()) {
    for (auto& [value, shadow] : inputs_)
      if (value == node) fixedNumbers_.insert(shadow);
    return;
  }
  for (auto& a : n.args)
    if (a.kind == record::Arg::Kind::Node) fixGraphNumber(int(a.i));
}

// Hints the operators of the instruction that just finished did not take.
void Monitor::fixUnliftedNumbers() {
  for (int node : ops_->takeUnliftedNumbers()) {
    if (numberUse_.empty())
      numberUse_ = "no operator of the call took the number as an argument of its own (torch may have made it "
                   "tensor data, or passed its value twice)" + (frames_.empty() ? "" : " at " + where(*frames_.back()));
    fixGraphNumber(node);
  }
}

// At an instruction's start: where the numbers among its inputs go.
void Monitor::followNumbers(Pending& p) {
  bool any = false;
  for (NodeId n : p.inputs) any = any || holdsNumbers(n);
  if (!any) return;
  auto isTensor = [&](size_t k) { return k < p.inputs.size() && p.inputs[k] >= 0 && refs_.node(p.inputs[k]).kind == NodeKind::Tensor; };
  switch (p.ins.op) {
    case Op::STORE_FAST: case Op::STORE_DEREF: case Op::COPY: case Op::SWAP: case Op::POP_TOP:
    case Op::BUILD_TUPLE: case Op::BUILD_LIST: case Op::BUILD_SLICE: case Op::LIST_APPEND: case Op::LIST_EXTEND:
    case Op::LIST_TO_TUPLE: case Op::UNPACK_SEQUENCE: case Op::STORE_GLOBAL: case Op::STORE_ATTR:
    case Op::RETURN_VALUE:  // to a traced caller, or the mock's result
    case Op::PRECALL: case Op::CALL: case Op::CALL_FUNCTION_EX:  // beginAnnotatedCall decides
      return;
    case Op::STORE_SUBSCR:  // value, container, key
      if (isTensor(1)) {  // t[i] = n: the operators that write t take n (torch may make it a constant instead)
        hintSizes({p.inputs[0], p.inputs[2]});
        return;
      }
      if (!holdsNumbers(p.inputs[1]) && !holdsNumbers(p.inputs[2])) return;  // the value moves into the container
      break;
    case Op::BINARY_OP:
    case Op::COMPARE_OP:
      if (isTensor(0) || isTensor(1)) {  // x * gain, x > threshold: the tensor's operators take the number
        hintSizes({p.inputs[0], p.inputs[1]});
        return;
      }
      if (p.ins.op == Op::BINARY_OP && numberBinaryOp(p.ins.arg)) return;  // liftArithmetic decides
      break;
    case Op::BINARY_SUBSCR: {
      if (isTensor(0)) {  // x[:, :n]: the indexing operators take n
        hintSizes({p.inputs[1]});
        return;
      }
      NodeKind container = p.inputs[0] >= 0 ? refs_.node(p.inputs[0]).kind : NodeKind::Object;
      bool sequence = container == NodeKind::Tuple || container == NodeKind::List || container == NodeKind::Dict;
      // self.sizes[0]: the element moves out. A slice makes a new container
      // whose elements are not followed back to these: a use of them all.
      if (sequence && !holdsNumbers(p.inputs[1]) && !PySlice_Check(p.inputObjs[1].get())) return;
      break;
    }
    default:
      break;
  }
  for (NodeId n : p.inputs) fixNumbers(n, std::string(opName(p.ins.op)) + " uses a number");
}

// a + b on numbers, one of them lifted: a number operator of the graph.
void Monitor::liftArithmetic(Step& s) {
  const char* target = numberBinaryOp(s.ins().arg);
  NodeId out = s.out[0];
  if (!target || out < 0 || !(liftable(s.in(0)) || liftable(s.in(1)))) return;
  for (size_t k = 0; k < 2; ++k)
    if (s.in(k) >= 0 && refs_.node(s.in(k)).kind == NodeKind::Tensor) return;  // the tensor's operator took it
  auto typeOf = [](const ShadowNode& n) -> std::string {
    if (!isNumberAtom(n) || n.sizeOf != kNoNode || n.dataDependent) return "";
    return n.atom.kind == record::Atom::Kind::Int ? "int" : "float";
  };
  std::vector<record::Arg> args;
  std::string types[2];
  for (size_t k = 0; k < 2; ++k) {
    NodeId in = s.in(k);
    const ShadowNode& n = refs_.node(in);
    types[k] = typeOf(n);
    if (liftable(in)) args.push_back(record::Arg::node(numberNode(in)));
    else args.push_back(types[k] == "int" ? record::Arg::integer(n.atom.i) : record::Arg::floating(n.atom.f));
  }
  // A size, a bool, a result beyond 64 bits: the run used the values.
  std::string type = typeOf(refs_.node(out));
  if (type.empty() || record::numberOpResult(target, types[0], types[1]) != type) {
    fixNumbers(s.in(0), std::string(target) + " of a number and something else");
    fixNumbers(s.in(1), std::string(target) + " of a number and something else");
    return;
  }
  refs_.node(out).number = ops_->addNumberOp(target, std::move(args), type);
}

}  // namespace magpy::capture

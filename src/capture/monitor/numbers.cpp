#include "capture/monitor/numbers.h"

#include "capture/op_recorder.h"

namespace magpy::capture {
namespace {

constexpr int kMaxDepth = 2;  // containers of containers of numbers, no deeper

bool isNumberAtom(const ShadowNode& n) {
  return n.kind == NodeKind::Atom && (n.atom.kind == record::Atom::Kind::Int || n.atom.kind == record::Atom::Kind::Float);
}

bool isContainer(const ShadowNode& n) {
  return n.kind == NodeKind::Tuple || n.kind == NodeKind::List || n.kind == NodeKind::Dict;
}

}  // namespace

NumberLifter::NumberLifter(const RefGraph& refs, OpRecorder& ops, const SizeTracker& sizes, const SliceParts& slices,
                           std::vector<std::pair<int, NodeId>>& inputs, std::function<std::string()> location)
    : refs_(refs), ops_(ops), sizes_(sizes), slices_(slices), inputs_(inputs), location_(std::move(location)) {}

bool NumberLifter::liftable(NodeId n) const {
  if (n < 0) return false;
  const ShadowNode& s = refs_.node(n);
  if (!isNumberAtom(s) || sizes_.find(n) || s.dataDependent) return false;
  return s.external || (size_t(n) < graphNodes_.size() && graphNodes_[size_t(n)] >= 0);
}

bool NumberLifter::holds(NodeId n, int depth) const {
  if (n < 0) return false;
  if (liftable(n)) return true;
  const ShadowNode& node = refs_.node(n);
  if (isContainer(node)) {
    if (depth >= kMaxDepth) return true;  // not searched: counted as holding numbers
    for (auto& e : node.last().refs)
      if (holds(e.target, depth + 1)) return true;
    return false;
  }
  auto it = slices_.find(n);
  if (it == slices_.end()) return false;
  for (NodeId part : it->second)
    if (holds(part, depth + 1)) return true;
  return false;
}

int NumberLifter::graphNode(NodeId n) {
  if (graphNodes_.size() <= size_t(n)) graphNodes_.resize(refs_.size(), -1);
  int32_t& node = graphNodes_[size_t(n)];
  if (node < 0) {
    node = ops_.addNumberInput(refs_.node(n).atom);
    inputs_.push_back({node, n});
  }
  return node;
}

void NumberLifter::noteUse(const std::string& how) {
  if (!firstUse_.empty()) return;
  firstUse_ = how;
  std::string where = location_();
  if (!where.empty()) firstUse_ += " at " + where;
}

void NumberLifter::fix(NodeId n, const std::string& how, int depth) {
  if (n < 0) return;
  const ShadowNode& node = refs_.node(n);
  if (liftable(n)) {
    noteUse(how);
    int graph = size_t(n) < graphNodes_.size() ? graphNodes_[size_t(n)] : -1;
    if (graph >= 0) fixGraphNumber(graph);
    else fixed_.insert(n);
    return;
  }
  auto parts = slices_.find(n);
  if (!isContainer(node) && parts == slices_.end()) return;
  if (depth >= kMaxDepth) {
    allFixed_ = allFixed_ || holds(n, kMaxDepth);
    return;
  }
  std::vector<NodeId> inner;
  if (isContainer(node))
    for (auto& e : node.last().refs) inner.push_back(e.target);
  else
    inner = parts->second;
  for (NodeId i : inner) fix(i, how, depth + 1);
}

// Back through the number operators to the inputs that read the state.
void NumberLifter::fixGraphNumber(int node) {
  const record::Node& n = ops_.graph().nodes[size_t(node)];
  if (n.isInput()) {
    for (auto& [value, shadow] : inputs_)
      if (value == node) fixed_.insert(shadow);
    return;
  }
  for (auto& a : n.args)
    if (a.kind == record::Arg::Kind::Node) fixGraphNumber(int(a.i));
}

void NumberLifter::fixUntaken() {
  for (int node : ops_.takeUnliftedNumbers()) {
    noteUse("no operator of the call took the number as an argument of its own (torch may have made it "
            "tensor data, or passed its value twice)");
    fixGraphNumber(node);
  }
}

Flow NumberLifter::follow(const Instruction& ins, const std::vector<NodeId>& inputs,
                          const std::vector<PyRef>& inputObjs) const {
  bool any = false;
  for (NodeId n : inputs) any = any || holds(n);
  if (!any) return Flow::moves();
  auto isTensor = [&](size_t k) { return k < inputs.size() && inputs[k] >= 0 && refs_.node(inputs[k]).kind == NodeKind::Tensor; };
  switch (ins.op) {
    case Op::STORE_FAST: case Op::STORE_DEREF: case Op::COPY: case Op::SWAP: case Op::POP_TOP:
    case Op::BUILD_TUPLE: case Op::BUILD_LIST: case Op::BUILD_SLICE: case Op::LIST_APPEND: case Op::LIST_EXTEND:
    case Op::LIST_TO_TUPLE: case Op::UNPACK_SEQUENCE: case Op::STORE_GLOBAL: case Op::STORE_ATTR:
    case Op::RETURN_VALUE:  // to a traced caller, or the mock's result
    case Op::PRECALL: case Op::CALL: case Op::CALL_FUNCTION_EX:  // the monitor decides at the call
      return Flow::moves();
    case Op::STORE_SUBSCR:  // value, container, key
      // t[i] = n: the operators that write t take n (torch may make it a constant instead)
      if (isTensor(1)) return Flow::operators(1 << 0 | 1 << 2);
      // the value moves into the container
      return !holds(inputs[1]) && !holds(inputs[2]) ? Flow::moves() : Flow::used();
    case Op::BINARY_OP:
    case Op::COMPARE_OP:
      // x * gain, x > threshold: the tensor's operators take the number
      if (isTensor(0) || isTensor(1)) return Flow::operators(1 << 0 | 1 << 1);
      // liftArithmetic decides
      return ins.op == Op::BINARY_OP && numberBinaryOp(ins.arg) ? Flow::moves() : Flow::used();
    case Op::BINARY_SUBSCR: {
      if (isTensor(0)) return Flow::operators(1 << 1);  // x[:, :n]: the indexing operators take n
      NodeKind container = inputs[0] >= 0 ? refs_.node(inputs[0]).kind : NodeKind::Object;
      bool sequence = container == NodeKind::Tuple || container == NodeKind::List || container == NodeKind::Dict;
      // self.sizes[0]: the element moves out. A slice makes a new container
      // whose elements are not followed back to these: a use of them all.
      bool movesOut = sequence && !holds(inputs[1]) && !PySlice_Check(inputObjs[1].get());
      return movesOut ? Flow::moves() : Flow::used();
    }
    default:
      return Flow::used();
  }
}

void NumberLifter::liftArithmetic(int binaryArg, NodeId a, NodeId b, NodeId out) {
  const char* target = numberBinaryOp(binaryArg);
  if (!target || out < 0 || !(liftable(a) || liftable(b))) return;
  if (a < 0 || b < 0) {  // an operand no shadow follows: the result is not the graph's
    fix(a, std::string(target) + " of a number and a value magpy does not follow");
    fix(b, std::string(target) + " of a number and a value magpy does not follow");
    return;
  }
  for (NodeId in : {a, b})
    if (in >= 0 && refs_.node(in).kind == NodeKind::Tensor) return;  // the tensor's operator took it
  auto typeOf = [&](NodeId id) -> std::string {
    const ShadowNode& n = refs_.node(id);
    if (!isNumberAtom(n) || sizes_.find(id) || n.dataDependent) return "";
    return n.atom.kind == record::Atom::Kind::Int ? "int" : "float";
  };
  std::vector<record::Arg> args;
  std::string types[2];
  NodeId operands[2] = {a, b};
  for (size_t k = 0; k < 2; ++k) {
    NodeId in = operands[k];
    const ShadowNode& n = refs_.node(in);
    types[k] = typeOf(in);
    if (liftable(in)) args.push_back(record::Arg::node(graphNode(in)));
    else args.push_back(types[k] == "int" ? record::Arg::integer(n.atom.i) : record::Arg::floating(n.atom.f));
  }
  // A size, a bool, a result beyond 64 bits: the run used the values.
  std::string type = typeOf(out);
  if (type.empty() || record::numberOpResult(target, types[0], types[1]) != type) {
    fix(a, std::string(target) + " of a number and something else");
    fix(b, std::string(target) + " of a number and something else");
    return;
  }
  int node = ops_.addNumberOp(target, std::move(args), type);
  if (graphNodes_.size() <= size_t(out)) graphNodes_.resize(refs_.size(), -1);
  graphNodes_[size_t(out)] = node;
}

}  // namespace magpy::capture

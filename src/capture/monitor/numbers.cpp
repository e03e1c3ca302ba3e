#include "capture/monitor/numbers.h"

#include "capture/op_recorder.h"

namespace magpy::capture {
namespace {

constexpr int kMaxDepth = 2;  // containers of containers of numbers are followed, no deeper
// How many values below a container `holds` searches for numbers (a
// defaultdict of dicts of gradient lists holds none); beyond, counted as
// holding some (as is a container that holds itself).
constexpr int kSearchBudget = 256;

bool isNumberAtom(const ShadowNode& n) {
  return n.kind == NodeKind::Atom && (n.atom.kind == record::Atom::Kind::Int || n.atom.kind == record::Atom::Kind::Float);
}

bool isContainer(const ShadowNode& n) {
  return n.kind == NodeKind::Tuple || n.kind == NodeKind::List || n.kind == NodeKind::Dict;
}

}  // namespace

NumberLifter::NumberLifter(const RefGraph& refs, OpRecorder& ops, SizeTracker& sizes, const SliceParts& slices,
                           std::vector<std::pair<int, NodeId>>& inputs, std::function<std::string()> location,
                           std::function<int(NodeId)> sizeNode)
    : refs_(refs), ops_(ops), sizes_(sizes), slices_(slices), inputs_(inputs), location_(std::move(location)),
      sizeNode_(std::move(sizeNode)) {}

bool NumberLifter::liftable(NodeId n) const {
  if (n < 0) return false;
  const ShadowNode& s = refs_.node(n);
  if (!isNumberAtom(s) || s.dataDependent) return false;
  if (size_t(n) < graphNodes_.size() && graphNodes_[size_t(n)] >= 0) return true;
  return sizes_.find(n) || (liftState_ && s.external);
}

bool NumberLifter::holds(NodeId n) const {
  int budget = kSearchBudget;
  return holdsWithin(n, budget);
}

bool NumberLifter::holdsWithin(NodeId n, int& budget) const {
  if (n < 0) return false;
  if (--budget < 0) return true;  // not searched: counted as holding numbers
  if (liftable(n)) return !sizes_.find(n);
  const ShadowNode& node = refs_.node(n);
  if (isContainer(node)) {
    for (auto& e : node.last().refs)
      if (holdsWithin(e.target, budget)) return true;
    return false;
  }
  auto it = slices_.find(n);
  if (it == slices_.end()) return false;
  for (NodeId part : it->second)
    if (holdsWithin(part, budget)) return true;
  return false;
}

int NumberLifter::graphNode(NodeId n) {
  if (n < 0 || !liftable(n)) return -1;
  if (graphNodes_.size() <= size_t(n)) graphNodes_.resize(refs_.size(), -1);
  if (graphNodes_[size_t(n)] >= 0) return graphNodes_[size_t(n)];
  int node = -1;
  if (sizes_.find(n)) {
    node = sizeNode_(n);
  } else {
    node = ops_.addNumberInput(refs_.node(n).atom);
    inputs_.push_back({node, n});
  }
  graphNodes_[size_t(n)] = node;
  return node;
}

void NumberLifter::bindIndex(NodeId n, int node) {
  if (graphNodes_.size() <= size_t(n)) graphNodes_.resize(refs_.size(), -1);
  graphNodes_[size_t(n)] = node;
  indexNodes_.insert(node);
}

void NumberLifter::bindItem(NodeId n, int node) {
  if (graphNodes_.size() <= size_t(n)) graphNodes_.resize(refs_.size(), -1);
  graphNodes_[size_t(n)] = node;
  items_ = true;
}

void NumberLifter::noteUse(NodeId n, const std::string& how) {
  if (uses_.count(n)) return;
  std::string where = location_();
  std::string use = where.empty() ? how : how + " at " + where;
  uses_.emplace(n, use);
  if (firstUse_.empty()) firstUse_ = use;
}

void NumberLifter::fix(NodeId n, const std::string& how, int depth) {
  if (n < 0) return;
  const ShadowNode& node = refs_.node(n);
  if (sizes_.find(n)) {
    sizes_.use(how);
    return;
  }
  if (liftable(n)) {
    int graph = size_t(n) < graphNodes_.size() ? graphNodes_[size_t(n)] : -1;
    if (graph >= 0) {
      fixGraphNumber(graph, how);
    } else {
      noteUse(n, how);
      fixed_.insert(n);
    }
    return;
  }
  auto parts = slices_.find(n);
  if (!isContainer(node) && parts == slices_.end()) return;
  if (depth >= kMaxDepth) {
    if (holds(n)) {
      allFixed_ = true;
      sizes_.use(how);
    }
    return;
  }
  std::vector<NodeId> inner;
  if (isContainer(node))
    for (auto& e : node.last().refs) inner.push_back(e.target);
  else
    inner = parts->second;
  for (NodeId i : inner) fix(i, how, depth + 1);
}

// Back through the number operators to the inputs that read the state and
// the sizes read from tensors (each node once: `n = n + n` in a loop
// shares operands).
void NumberLifter::fixGraphNumber(int node, const std::string& how) {
  const record::Graph& g = ops_.graph();
  std::vector<bool> seen(g.nodes.size(), false);
  std::vector<int> stack{node};
  while (!stack.empty()) {
    int i = stack.back();
    stack.pop_back();
    if (seen[size_t(i)]) continue;
    seen[size_t(i)] = true;
    const record::Node& n = g.nodes[size_t(i)];
    if (indexNodes_.count(i) && onIndexFixed_) onIndexFixed_(i, how);
    if (n.isInput()) {
      for (auto& [value, shadow] : inputs_)
        if (value == i) {
          noteUse(shadow, how);
          fixed_.insert(shadow);
        }
    } else if (record::readsItem(n)) {
      if (onItemFixed_) onItemFixed_(i, how);
    } else if (n.number.empty()) {  // an aten::size.int node
      sizes_.use(how);
    } else {
      for (auto& a : n.args)
        if (a.kind == record::Arg::Kind::Node) stack.push_back(int(a.i));
    }
  }
}

void NumberLifter::fixUntaken() {
  for (int node : ops_.takeUnliftedNumbers()) {
    // A number computed from a loop's index that an operator took as a
    // plain number equal to another of its arguments (select(x, 0, t) at
    // t = 0): rolling the loop finds where (loop_rolling.h), or keeps it
    // unrolled.
    if (int index = indexOf(node); index >= 0 && onIndexUntaken_) {
      onIndexUntaken_(node, index);
      continue;
    }
    fixGraphNumber(node, "no operator of the call took the number as an argument of its own (torch may have made it "
                         "tensor data, or passed its value twice)");
  }
}

int NumberLifter::indexOf(int node) const {
  if (indexNodes_.empty()) return -1;
  const record::Graph& g = ops_.graph();
  std::vector<int> stack{node};
  while (!stack.empty()) {
    int i = stack.back();
    stack.pop_back();
    if (indexNodes_.count(i)) return i;
    const record::Node& n = g.nodes[size_t(i)];
    if (n.isInput() || n.number.empty() || record::readsItem(n)) continue;
    for (auto& a : n.args)
      if (a.kind == record::Arg::Kind::Node) stack.push_back(int(a.i));
  }
  return -1;
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
    case Op::UNARY_NEGATIVE:  // the graph negates it (liftArithmetic)
      return Flow::moves();
    case Op::BUILD_CONST_KEY_MAP:  // values..., a constant tuple of keys: f(a, b=n, c=m, ...) passes such a dict
      return Flow::moves();
    case Op::BUILD_MAP:  // key, value, key, value...: a number as a key is hashed
      for (size_t k = 0; k < inputs.size(); k += 2)
        if (holds(inputs[k])) return Flow::used();
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
      // (n, 1) == (2.0, 1), d == {k: 2.0}: the answer reads the numbers a
      // container holds, which no number operator computes
      for (NodeId in : inputs)
        if (in >= 0 && isContainer(refs_.node(in)) && holds(in)) return Flow::used();
      // liftArithmetic and liftComparison decide
      return ins.op == Op::COMPARE_OP || numberBinaryOp(ins.arg) ? Flow::moves() : Flow::used();
    case Op::GET_ITER: {
      // for group in self.param_groups: a list's or tuple's iterator yields
      // its elements through their edges (Monitor::iterationValue), a
      // dict's its keys: the numbers they hold move out, none is used.
      PyObject* o = inputObjs.empty() ? nullptr : inputObjs[0].get();
      bool followed = o && (PyList_CheckExact(o) || PyTuple_CheckExact(o) || PyDict_CheckExact(o));
      return followed ? Flow::moves() : Flow::used();
    }
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

std::string NumberLifter::typeOf(NodeId id) const {
  if (id < 0) return "";
  const ShadowNode& n = refs_.node(id);
  if (!isNumberAtom(n) || n.dataDependent) return "";
  return n.atom.kind == record::Atom::Kind::Int ? "int" : "float";
}

bool NumberLifter::operandsOf(const std::vector<NodeId>& operands, std::vector<record::Arg>& args, std::string types[2]) {
  for (size_t k = 0; k < operands.size() && k < 2; ++k) {
    NodeId in = operands[k];
    types[k] = typeOf(in);
    if (types[k].empty()) return false;
    if (liftable(in)) {
      int node = graphNode(in);
      if (node < 0) return false;
      args.push_back(record::Arg::node(node));
    } else {
      const record::Atom& a = refs_.node(in).atom;
      args.push_back(types[k] == "int" ? record::Arg::integer(a.i) : record::Arg::floating(a.f));
    }
  }
  return true;
}

void NumberLifter::fixAll(const std::vector<NodeId>& operands, const std::string& how) {
  for (NodeId in : operands) fix(in, how);
}

void NumberLifter::liftArithmetic(const char* target, const std::vector<NodeId>& operands, NodeId out) {
  bool any = false;
  for (NodeId in : operands) any = any || liftable(in);
  if (!target || out < 0 || !any) return;
  for (NodeId in : operands)
    if (in >= 0 && refs_.node(in).kind == NodeKind::Tensor) return;  // the tensor's operator took it
  std::vector<record::Arg> args;
  std::string types[2];
  // A size, a bool, a result beyond 64 bits: the run used the values.
  std::string type = typeOf(out);
  if (!operandsOf(operands, args, types) || type.empty() ||
      record::numberOpResult(target, types[0], operands.size() > 1 ? types[1] : "") != type) {
    fixAll(operands, std::string(target) + " of a number and something else");
    return;
  }
  int node = ops_.addNumberOp(target, std::move(args), type, refs_.node(out).atom);
  if (graphNodes_.size() <= size_t(out)) graphNodes_.resize(refs_.size(), -1);
  graphNodes_[size_t(out)] = node;
}

int NumberLifter::liftComparison(int compareArg, NodeId a, NodeId b, PyObject* result) {
  if (!liftable(a) && !liftable(b)) return -1;
  const char* target = result == Py_True || result == Py_False ? numberComparison(compareArg, result == Py_True) : nullptr;
  std::vector<record::Arg> args;
  std::string types[2];
  if (!target || !operandsOf({a, b}, args, types)) {
    fixAll({a, b}, "a comparison of a number and something else");
    return -1;
  }
  return ops_.addNumberOp(target, std::move(args), "bool", record::Atom::boolean(true));
}

}  // namespace magpy::capture

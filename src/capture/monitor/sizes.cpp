#include "capture/monitor/sizes.h"

#include "capture/op_recorder.h"

namespace magpy::capture {
namespace {

// Searched for sizes at every instruction of a run that read some: kept
// small, but above the lengths a loop over a size appends to (an element
// is one table lookup). A container beyond them counts as holding sizes.
constexpr int kMaxDepth = 2;       // a tuple of tuples of sizes, no deeper
constexpr size_t kMaxItems = 1024;

// Every input a Python int or float (not a bool): numbers the graph can
// compute with.
bool numbers(const std::vector<PyRef>& objs) {
  for (auto& o : objs)
    if (!o || !(PyLong_CheckExact(o.get()) || PyFloat_CheckExact(o.get()))) return false;
  return !objs.empty();
}

}  // namespace

SizeTracker::SizeTracker(const RefGraph& refs, OpRecorder& ops, const SliceParts& slices,
                         std::function<std::string()> location)
    : refs_(refs), ops_(ops), slices_(slices), location_(std::move(location)) {}

void SizeTracker::tag(NodeId size, NodeId tensor, int64_t dim) {
  const ShadowNode& n = refs_.node(size);
  PyObject* t = refs_.node(tensor).obj;
  if (n.kind != NodeKind::Atom || n.atom.kind != record::Atom::Kind::Int || !t || !isTensor(t)) return;
  if (sizes_.size() <= size_t(size)) sizes_.resize(refs_.size());
  sizes_[size_t(size)] = Size{tensor, int32_t(dim), ops_.valueOf(tensorOf(t))};
  active_ = true;
}

// x.shape, x.size(): each element of the torch.Size is a dimension of x.
void SizeTracker::tagAll(NodeId sizes, NodeId tensor) {
  for (auto& e : refs_.node(sizes).last().refs)
    if (e.rel.kind == Relation::Kind::Index && e.target >= 0) tag(e.target, tensor, e.rel.index);
}

// x.shape[:2]: the elements of the new tuple are those sizes.
void SizeTracker::slice(NodeId from, PyObject* slice, NodeId to) {
  Py_ssize_t start, stop, step, count;
  const ShadowNode& source = refs_.node(from);
  const ShadowNode& target = refs_.node(to);
  if (PySlice_GetIndicesEx(slice, Py_ssize_t(source.last().refs.size()), &start, &stop, &step, &count) < 0) {
    PyErr_Clear();
    return;
  }
  for (Py_ssize_t k = 0; k < count; ++k)
    copy(source.refOf(Relation::at(start + k * step), source.versions.size() - 1),
         target.refOf(Relation::at(k), target.versions.size() - 1));
}

// x.size()[:-1] + (h, d): the new tuple's elements are those of both.
void SizeTracker::concat(NodeId left, NodeId right, NodeId to) {
  const auto& out = refs_.node(to).last().refs;
  size_t k = 0;
  for (NodeId part : {left, right})
    for (auto& e : refs_.node(part).last().refs) {
      if (k >= out.size()) return;
      copy(e.target, out[k++].target);
    }
}

void SizeTracker::copy(NodeId from, NodeId to) {
  const Size* s = find(from);
  if (!s || to < 0) return;
  const ShadowNode& t = refs_.node(to);
  if (t.kind != NodeKind::Atom || t.atom.kind != record::Atom::Kind::Int) return;
  Size copied = *s;  // resizing may move *s
  if (sizes_.size() <= size_t(to)) sizes_.resize(refs_.size());
  sizes_[size_t(to)] = copied;
}

bool SizeTracker::holds(NodeId n, int depth) const {
  if (n < 0 || depth > kMaxDepth) return false;
  if (find(n)) return true;
  const ShadowNode& node = refs_.node(n);
  if (node.kind == NodeKind::Tuple || node.kind == NodeKind::List) {
    const auto& refs = node.last().refs;
    for (size_t k = 0; k < refs.size() && k < kMaxItems; ++k)
      if (holds(refs[k].target, depth + 1)) return true;
    return refs.size() > kMaxItems;  // not searched: counted as holding sizes
  }
  auto it = slices_.find(n);
  if (it == slices_.end()) return false;
  for (NodeId part : it->second)
    if (holds(part, depth + 1)) return true;
  return false;
}

Flow SizeTracker::follow(const Instruction& ins, const std::vector<NodeId>& inputs,
                         const std::vector<PyRef>& inputObjs, bool returnsToTracedCaller) const {
  bool any = false;
  for (NodeId n : inputs) any = any || holds(n);
  if (!any) return Flow::moves();
  switch (ins.op) {
    case Op::STORE_FAST: case Op::STORE_DEREF: case Op::COPY: case Op::SWAP: case Op::POP_TOP:
    case Op::BUILD_TUPLE: case Op::BUILD_LIST: case Op::BUILD_SLICE: case Op::LIST_APPEND:
    case Op::LIST_EXTEND: case Op::LIST_TO_TUPLE: case Op::UNPACK_SEQUENCE:
    case Op::PRECALL: case Op::CALL: case Op::CALL_FUNCTION_EX:  // the monitor decides at the call
      return Flow::moves();
    case Op::RETURN_VALUE:
      return returnsToTracedCaller ? Flow::moves() : Flow::used();
    case Op::LOAD_METHOD: {
      // outputs.append: a list's method, which the call then gets the list
      // itself for (the monitor decides there)
      NodeKind owner = refs_.node(inputs[0]).kind;
      return owner == NodeKind::List || owner == NodeKind::Tuple ? Flow::moves() : Flow::used();
    }
    case Op::BINARY_OP: case Op::COMPARE_OP: {
      // x / t, x > n: the tensor's operators take the size (as graph values,
      // Monitor::followAnalyses)
      bool tensor = false;
      for (NodeId n : inputs) tensor = tensor || (n >= 0 && refs_.node(n).kind == NodeKind::Tensor);
      if (tensor) return Flow::operators(1 << 0 | 1 << 1);
      // n // 2, n > 8: number arithmetic and predicates (NumberLifter decides)
      if (numbers(inputObjs) && (ins.op == Op::COMPARE_OP || numberBinaryOp(ins.arg))) return Flow::moves();
      // tuple + tuple: the sizes move into the new tuple
      bool tuples = PyTuple_Check(inputObjs[0].get()) && PyTuple_Check(inputObjs[1].get());
      bool add = ins.arg == 0 || ins.arg == 13;  // NB_ADD, NB_INPLACE_ADD
      return ins.op == Op::BINARY_OP && tuples && add ? Flow::moves() : Flow::used();
    }
    case Op::UNARY_NEGATIVE:
      return numbers(inputObjs) ? Flow::moves() : Flow::used();
    case Op::BINARY_SUBSCR: {
      NodeKind container = refs_.node(inputs[0]).kind;
      if (container == NodeKind::Tensor) return Flow::operators(1 << 1);  // x[:, :n]: indexing operators take n
      // x.shape[1], x.shape[:2]: sizes move out of a tuple that holds them.
      // A size as the key (FLAGS[n], T[:n]) picks entries: a use.
      PyObject* key = inputObjs[1].get();
      bool byPlainKey = !holds(inputs[1]) && (PyLong_CheckExact(key) || PySlice_Check(key));
      return container == NodeKind::Tuple && byPlainKey ? Flow::moves() : Flow::used();
    }
    default:
      return Flow::used();
  }
}

void SizeTracker::use(const std::string& how) {
  if (!firstUse_.empty()) return;
  firstUse_ = how;
  std::string where = location_();
  if (!where.empty()) firstUse_ += " at " + where;
}

}  // namespace magpy::capture

// Sizes the program reads from tensors (x.shape[1], b, n, _ = x.size()),
// followed from the read to the operators they reach. A size that only
// moves (locals, tuples and lists, unpacking, slices) and ends as an
// operator's argument becomes an aten::size.int node of the graph, so a
// dynamic record reads it from the call's tensors. Any other use (a
// comparison, a branch, arithmetic, a builtin, a store to state) is a
// decision magpy does not record yet: the run then reads sizes
// (readSizes(), sizeUse() says where), and its record keeps its sizes.
#include "capture/monitor/monitor.h"
#include "capture/monitor/state.h"

namespace magpy::capture {
namespace {

// Searched for sizes at every instruction of a run that read some: kept
// small. A container beyond them counts as holding sizes.
constexpr int kMaxDepth = 2;       // a tuple of tuples of sizes, no deeper
constexpr size_t kMaxItems = 16;

}  // namespace

void Monitor::tagSize(NodeId size, NodeId tensor, int64_t dim) {
  ShadowNode& n = refs_.node(size);
  PyObject* t = refs_.node(tensor).obj;
  if (n.kind != NodeKind::Atom || n.atom.kind != record::Atom::Kind::Int || !t || !isTensor(t)) return;
  n.sizeOf = tensor;
  n.sizeDim = int32_t(dim);
  n.sizeValue = ops_->valueOf(tensorOf(t));
  sizesTagged_ = true;
}

// x.shape, x.size(): each element of the torch.Size is a dimension of x.
void Monitor::tagSizes(NodeId sizes, NodeId tensor) {
  const auto& refs = refs_.node(sizes).last().refs;
  for (auto& e : refs)
    if (e.rel.kind == Relation::Kind::Index && e.target >= 0) tagSize(e.target, tensor, e.rel.index);
}

// x.shape[:2]: the elements of the new tuple are those sizes.
void Monitor::sliceSizes(NodeId from, PyObject* slice, NodeId to) {
  Py_ssize_t start, stop, step, count;
  Py_ssize_t length = Py_ssize_t(refs_.node(from).last().refs.size());
  if (PySlice_GetIndicesEx(slice, length, &start, &stop, &step, &count) < 0) {
    PyErr_Clear();
    return;
  }
  for (Py_ssize_t k = 0; k < count; ++k) {
    NodeId source = refs_.node(from).refOf(Relation::at(start + k * step), refs_.node(from).versions.size() - 1);
    copySizeTag(source, refs_.node(to).refOf(Relation::at(k), refs_.node(to).versions.size() - 1));
  }
}

void Monitor::copySizeTag(NodeId from, NodeId to) {
  if (from < 0 || to < 0 || refs_.node(from).sizeOf == kNoNode) return;
  const ShadowNode& s = refs_.node(from);
  ShadowNode& t = refs_.node(to);
  if (t.kind != NodeKind::Atom || t.atom.kind != record::Atom::Kind::Int) return;
  t.sizeOf = s.sizeOf;
  t.sizeDim = s.sizeDim;
  t.sizeValue = s.sizeValue;
}

// x.size()[:-1] + (h, d): the new tuple's elements are those of both.
void Monitor::concatSizes(NodeId left, NodeId right, NodeId to) {
  const auto& out = refs_.node(to).last().refs;
  size_t k = 0;
  for (NodeId part : {left, right})
    for (auto& e : refs_.node(part).last().refs) {
      if (k >= out.size()) return;
      copySizeTag(e.target, out[k++].target);
    }
}

bool Monitor::isSizeCall(const Pending& p) const {
  const std::string& n = p.calleeName;
  return p.annotation && !p.annotation->op && n.size() > 5 && n.compare(n.size() - 5, 5, ".size") == 0 && !p.positionalObjs.empty() &&
         isTensor(p.positionalObjs[0]);
}

bool Monitor::holdsSizes(NodeId n, int depth) const {
  if (n < 0 || depth > kMaxDepth) return false;
  const ShadowNode& node = refs_.node(n);
  if (node.sizeOf != kNoNode) return true;
  if (node.kind == NodeKind::Tuple || node.kind == NodeKind::List) {
    const auto& refs = node.last().refs;
    for (size_t k = 0; k < refs.size() && k < kMaxItems; ++k)
      if (holdsSizes(refs[k].target, depth + 1)) return true;
    return refs.size() > kMaxItems;  // not searched: counted as holding sizes
  }
  auto it = sliceParts_.find(n);
  if (it == sliceParts_.end()) return false;
  for (NodeId part : it->second)
    if (holdsSizes(part, depth + 1)) return true;
  return false;
}

// The numbers a value holds, in order: each a size, a lifted number (runs
// that lift numbers; floats only there), or a plain number. Numbers an
// operator call passes where no hint reaches (nested deeper, in a dict)
// are fixed.
void Monitor::flattenInts(NodeId n, std::vector<OpRecorder::NumberHint>& out, int depth) {
  if (n < 0) return;
  if (depth > kMaxDepth) {
    if (liftNumbers_) fixNumbers(n, "an operator takes numbers nested too deeply", depth);
    return;
  }
  const ShadowNode& node = refs_.node(n);
  bool isInt = node.kind == NodeKind::Atom && node.atom.kind == record::Atom::Kind::Int;
  bool isFloat = node.kind == NodeKind::Atom && node.atom.kind == record::Atom::Kind::Float;
  if (isInt || (isFloat && liftNumbers_)) {
    OpRecorder::NumberHint h;
    h.number = isInt ? node.atom.i : 0;
    h.real = isFloat;
    h.f = node.atom.f;
    if (node.sizeOf != kNoNode) {
      // The size of the tensor as read: if the tensor has since become
      // another graph value (written in place), the number stays a number.
      const at::Tensor& t = tensorOf(refs_.node(node.sizeOf).obj);
      int now = ops_->valueOf(t);
      if (now < 0 && node.sizeValue < 0) now = externalTensor(t);
      bool same = node.sizeValue >= 0 ? now == node.sizeValue
                                      : now >= 0 && ops_->graph().nodes[size_t(now)].isInput();
      if (same) {
        h.value = now;
        h.dim = node.sizeDim;
      }
    } else if (liftNumbers_ && liftable(n)) {
      h.node = numberNode(n);
    }
    out.push_back(h);
    return;
  }
  if (node.kind == NodeKind::Tuple || node.kind == NodeKind::List) {
    for (auto& e : node.last().refs) flattenInts(e.target, out, depth + 1);
    return;
  }
  if (node.kind == NodeKind::Dict) {
    if (liftNumbers_) fixNumbers(n, "an operator takes numbers in a dict", depth);
    return;
  }
  auto it = sliceParts_.find(n);
  if (it != sliceParts_.end())
    for (NodeId part : it->second) flattenInts(part, out, depth + 1);
}

void Monitor::hintSizes(const std::vector<NodeId>& values) {
  std::vector<OpRecorder::NumberHint> hints;
  for (NodeId v : values) flattenInts(v, hints, 0);
  ops_->setNumberHints(std::move(hints));
}

// At an instruction's start: where the sizes among its inputs go.
void Monitor::followSizes(Pending& p) {
  bool any = false;
  for (NodeId n : p.inputs) any = any || holdsSizes(n);
  if (!any) return;
  switch (p.ins.op) {
    case Op::STORE_FAST: case Op::STORE_DEREF: case Op::COPY: case Op::SWAP: case Op::POP_TOP:
    case Op::BUILD_TUPLE: case Op::BUILD_LIST: case Op::BUILD_SLICE: case Op::LIST_APPEND:
    case Op::LIST_EXTEND: case Op::LIST_TO_TUPLE: case Op::UNPACK_SEQUENCE:
    case Op::PRECALL: case Op::CALL: case Op::CALL_FUNCTION_EX:  // beginAnnotatedCall decides
      return;
    case Op::RETURN_VALUE:
      if (frames_.size() > 1) return;  // to a traced caller
      break;
    case Op::BINARY_OP: {  // tuple + tuple: the sizes move into the new tuple
      bool tuples = PyTuple_Check(p.inputObjs[0].get()) && PyTuple_Check(p.inputObjs[1].get());
      if (tuples && (p.ins.arg == 0 || p.ins.arg == 13)) return;  // NB_ADD, NB_INPLACE_ADD
      break;
    }
    case Op::BINARY_SUBSCR: {
      NodeKind container = refs_.node(p.inputs[0]).kind;
      if (container == NodeKind::Tensor) {  // x[:, :n]: indexing operators take n
        hintSizes({p.inputs[1]});
        return;
      }
      // x.shape[1], x.shape[:2]: sizes move out of a tuple that holds them.
      // A size as the key (FLAGS[n], T[:n]) picks entries: a use.
      PyObject* key = p.inputObjs[1].get();
      bool keyHoldsSizes = holdsSizes(p.inputs[1]);
      if (container == NodeKind::Tuple && !keyHoldsSizes && (PyLong_CheckExact(key) || PySlice_Check(key))) return;
      break;
    }
    default:
      break;
  }
  useSizes(std::string(opName(p.ins.op)) + " uses a size");
}

void Monitor::useSizes(const std::string& how) {
  if (!sizeUse_.empty()) return;
  sizeUse_ = how;
  if (!frames_.empty()) sizeUse_ += " at " + where(*frames_.back());
}

}  // namespace magpy::capture

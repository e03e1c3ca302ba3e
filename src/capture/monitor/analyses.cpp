// Where instructions and operators take the sizes and lifted numbers the
// monitor's analyses follow (sizes.h, numbers.h): each analysis says what
// an instruction does with them, and the monitor hints the operators the
// instruction dispatches, so that they take them as graph values.
#include "capture/monitor/monitor.h"
#include "capture/monitor/state.h"

namespace magpy::capture {
namespace {

constexpr int kMaxDepth = 2;  // numbers nested in containers of containers, no deeper

}  // namespace

// At an instruction's start: where the sizes and numbers among its inputs go.
void Monitor::followAnalyses(Pending& p) {
  auto hinted = [&](const Flow& flow) {
    std::vector<NodeId> values;
    for (size_t k = 0; k < p.inputs.size() && k < 8; ++k)
      if (flow.hinted & (1u << k)) values.push_back(p.inputs[k]);
    return values;
  };
  if (sizes_.active()) {
    Flow flow = sizes_.follow(p.ins, p.inputs, p.inputObjs, frames_.size() > 1);
    // x / t: the operator takes t as a wrapped number, which only a graph
    // value's hint reaches (and which reports it untaken).
    bool asValues = p.ins.op == Op::BINARY_OP || p.ins.op == Op::COMPARE_OP;
    if (flow.kind == Flow::Kind::Operators) hintOperators(hinted(flow), asValues);
    else if (flow.kind == Flow::Kind::Used) sizes_.use(std::string(opName(p.ins.op)) + " uses a size");
  }
  if (numbers_.active()) {
    Flow flow = numbers_.follow(p.ins, p.inputs, p.inputObjs);
    if (flow.kind == Flow::Kind::Operators) hintOperators(hinted(flow));
    else if (flow.kind == Flow::Kind::Used)
      for (NodeId n : p.inputs) numbers_.fix(n, std::string(opName(p.ins.op)) + " uses a number");
  }
}

void Monitor::hintOperators(const std::vector<NodeId>& values, bool sizesAsValues) {
  std::vector<OpRecorder::NumberHint> hints;
  for (NodeId v : values) numberHints(v, hints, 0, sizesAsValues);
  ops_->setNumberHints(std::move(hints));
}

// The numbers a value holds, in order: each a size, a number the graph
// computes (a lifted number, arithmetic on sizes), or a plain number.
// sizesAsValues: sizes as their aten::size.int nodes, as numbers the graph
// computes are. Numbers an operator call passes where no hint reaches
// (nested deeper, in a dict) are fixed.
void Monitor::numberHints(NodeId n, std::vector<OpRecorder::NumberHint>& out, int depth, bool sizesAsValues) {
  if (n < 0) return;
  if (depth > kMaxDepth) {
    if (numbers_.active()) numbers_.fix(n, "an operator takes numbers nested too deeply", depth);
    return;
  }
  const ShadowNode& node = refs_.node(n);
  bool isInt = node.kind == NodeKind::Atom && node.atom.kind == record::Atom::Kind::Int;
  bool isFloat = node.kind == NodeKind::Atom && node.atom.kind == record::Atom::Kind::Float;
  if (isInt || (isFloat && numbers_.active())) {
    OpRecorder::NumberHint h;
    h.number = isInt ? node.atom.i : 0;
    h.real = isFloat;
    h.f = node.atom.f;
    if (const SizeTracker::Size* size = sizes_.find(n); size && sizesAsValues) {
      h.node = numbers_.graphNode(n);
      if (h.node < 0) sizes_.use("an operator takes a size of a tensor the graph has since written");
    } else if (size) {
      h.value = sizeSource(*size);
      h.dim = size->dim;
    } else if (numbers_.active() && numbers_.liftable(n)) {
      h.node = numbers_.graphNode(n);
    }
    out.push_back(h);
    return;
  }
  if (node.kind == NodeKind::Tuple || node.kind == NodeKind::List) {
    for (auto& e : node.last().refs) numberHints(e.target, out, depth + 1, sizesAsValues);
    return;
  }
  if (node.kind == NodeKind::Dict) {
    if (numbers_.active()) numbers_.fix(n, "an operator takes numbers in a dict", depth);
    return;
  }
  auto it = slices_.find(n);
  if (it != slices_.end())
    for (NodeId part : it->second) numberHints(part, out, depth + 1, sizesAsValues);
}

// The size of the tensor as read: if the tensor has since become another
// graph value (written in place), the number stays a number.
int Monitor::sizeSource(const SizeTracker::Size& size) {
  const at::Tensor& t = tensorOf(refs_.node(size.tensor).obj);
  int now = ops_->valueOf(t);
  if (now < 0 && size.value < 0) now = externalTensor(t);
  bool same = size.value >= 0 ? now == size.value : now >= 0 && ops_->graph().nodes[size_t(now)].isInput();
  return same ? now : -1;
}

int Monitor::sizeNodeOf(NodeId n) {
  const SizeTracker::Size* size = sizes_.find(n);
  int value = size ? sizeSource(*size) : -1;
  return value >= 0 ? ops_->sizeNode(value, size->dim, currentLocation()) : -1;
}

const char* Monitor::numberCall(const Pending& p) const {
  // The graph's number operators a call names (min, abs, math.sqrt); the
  // operator module's come from instructions.
  record::NumberOp op = record::numberOpOf(p.calleeName);
  if (op == record::NumberOp::None || p.calleeName.rfind("operator.", 0) == 0 || !p.keywords.empty() ||
      p.positional.size() != size_t(record::numberOpArity(p.calleeName)))
    return nullptr;
  bool any = false;
  for (NodeId n : p.positional) {
    const ShadowNode* node = n >= 0 ? &refs_.node(n) : nullptr;
    bool number = node && node->kind == NodeKind::Atom &&
                  (node->atom.kind == record::Atom::Kind::Int || node->atom.kind == record::Atom::Kind::Float);
    if (!number) return nullptr;
    any = any || numbers_.liftable(n);
  }
  return any ? record::numberOpTarget(op) : nullptr;
}

bool Monitor::isSizeCall(const Pending& p) const {
  const std::string& n = p.calleeName;
  bool size = n.size() > 5 && n.compare(n.size() - 5, 5, ".size") == 0;
  bool len = n == "builtins.len" && p.positional.size() == 1;  // len(x): x.size(0)
  return p.annotation && !p.annotation->op && (size || len) && !p.positionalObjs.empty() && isTensor(p.positionalObjs[0]);
}

}  // namespace magpy::capture

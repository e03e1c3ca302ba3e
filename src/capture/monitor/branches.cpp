// Branches on a tensor's truth (MagPy 6.2.2). At `if t:` on a one-element
// bool tensor the recorder checks t (the call's record holds only where t
// is as it was); the side the program takes runs from the jump to where
// the jump's two ways meet again (branchRejoin). The record builder makes
// the check a branch (capture/branches.h) where the monitor saw the side
// leave the Python state as it found it, but for tensors:
//   - where the ways meet, the frame's locals and stack hold the objects
//     they held at the jump, but for tensors (which may be others);
//   - the side writes no object but tensors (whose writes operators
//     record) and containers it built;
//   - it advances no iterator or generator but those it made;
//   - it does not switch grad mode;
//   - it ends in the frame that jumped (no return, no yield on the way).
// One branch is watched at a time: a branch inside a side stays a check.
// Once a branch began, Python that tells tensors apart by identity makes
// the run path-dependent (branches.h says why that matters).
#include "capture/monitor/monitor.h"
#include "capture/monitor/state.h"

#include <set>

namespace magpy::capture {
namespace {

// Places of a frame: its locals (a cell's contents for a cell) and its
// stack, without the top `skip` values.
std::vector<PyRef> placesOf(const Frame& f, int skip) {
  std::vector<PyRef> out;
  for (int i = 0; i < f.numLocals(); ++i) {
    PyObject* v = f.local(i);
    if (v && f.localKind(i) != LocalKind::Plain && PyCell_Check(v)) v = PyCell_GET(v);
    out.push_back(PyRef::borrow(v));
  }
  for (int i = 0; i + skip < f.stackDepth(); ++i) out.push_back(PyRef::borrow(f.stack(i)));
  return out;
}

bool tellsIdentity(const std::string& attribute) {
  static const std::set<std::string> kNames = {"_version", "data_ptr", "is_leaf", "grad_fn", "_base", "storage",
                                               "untyped_storage", "_cdata", "is_set_to", "_is_view", "__hash__"};
  return kNames.count(attribute) > 0;
}

// Functions whose result depends on which objects their arguments are.
bool tellsIdentityOf(const std::string& callee) {
  static const std::set<std::string> kNames = {"builtins.id", "builtins.hash", "_operator.is_", "_operator.is_not",
                                               "operator.is_", "operator.is_not", "builtins.object.__hash__"};
  return kNames.count(callee) > 0;
}

}  // namespace

// At a conditional jump on a tensor, before it runs (and reads t).
void Monitor::branchJump(ShadowFrame& sf, const Pending& p) {
  if (branchOpen_ || p.inputs.empty() || p.inputs[0] < 0 || refs_.node(p.inputs[0]).kind != NodeKind::Tensor) return;
  PyObject* cond = p.inputObjs[0].get();
  if (!cond || !isTensor(cond) || tensorOf(cond).scalar_type() != at::kBool || tensorOf(cond).numel() != 1) return;
  BranchWatch w;
  w.frame = &sf;
  w.rejoin = branchRejoin(sf.view.code(), p.ins.offset);
  if (w.rejoin < 0) return;
  w.cond = p.inputObjs[0];
  w.places = placesOf(sf.view, 1);
  w.graphAtJump = ops_->graph().nodes.size();
  w.where = currentLocation();
  branchOpen_ = std::move(w);
}

// Each instruction while a branch is open (the first one after the jump
// begins its side).
void Monitor::watchBranch(ShadowFrame& sf, const Pending& p) {
  BranchWatch& w = *branchOpen_;
  if (w.run < 0) {
    const record::Graph& g = ops_->graph();
    // The jump's truth test added the check, and it checks the condition.
    bool checked = g.nodes.size() > w.graphAtJump && g.nodes.back().target == record::kExpectEqual &&
                   g.nodes.back().args[0].i == ops_->valueOf(tensorOf(w.cond.get()));
    if (&sf != w.frame || !checked) {  // no check (guards fix t), or t's truth ran Python
      branchOpen_.reset();
      return;
    }
    BranchRun run;
    run.span.check = int(g.nodes.size()) - 1;
    run.span.begin = int(g.nodes.size());
    run.span.taken = tensorOf(w.cond.get()).item<bool>();
    run.where = w.where;
    w.run = int(branchRuns_.size());
    branchRuns_.push_back(std::move(run));
  }
  if (&sf == w.frame && p.ins.offset == w.rejoin) return closeBranch(sf);
  if (&sf == w.frame && (p.ins.op == Op::RETURN_VALUE || p.ins.op == Op::YIELD_VALUE))
    return failBranch("it returns or yields before its sides meet");
  if (!movesOnly(p.ins.op))
    for (NodeId in : p.inputs)
      if (in >= 0 && !w.made.count(in) && advancesIterator(in))
        failBranch("it advances an iterator or generator it did not make");
}

void Monitor::closeBranch(ShadowFrame& sf) {
  BranchRun& run = branchRuns_[size_t(branchOpen_->run)];
  const std::vector<PyRef>& before = branchOpen_->places;
  std::vector<PyRef> now = placesOf(sf.view, 0);
  if (now.size() < before.size()) return failBranch("its sides meet with fewer values on the stack");
  for (size_t k = 0; k < now.size(); ++k) {
    // A variable unbound at the jump (or a stack slot above it: a
    // conditional expression's value) may hold a tensor where they meet.
    PyObject *was = k < before.size() ? before[k].get() : nullptr, *is = now[k].get();
    bool tensors = is && isTensor(is) && (!was || isTensor(was));
    int locals = sf.view.numLocals();
    int value = tensors ? ops_->valueOf(tensorOf(is)) : -1;
    if (tensors && value < 0) {  // an argument nothing read yet: the branch's value reads it
      NodeId id = int(k) < locals ? sf.locals[k] : sf.stack[k - size_t(locals)];
      if (id >= 0) refs_.use(id);
      value = externalTensor(tensorOf(is));
    }
    std::string place = int(k) < locals ? "`" + utf8(codeLocalName(sf.view.code(), int(k))) + "`" : "the stack";
    if (tensors && value < 0) return failBranch(place + " holds a tensor the graph does not compute where its sides meet");
    if (tensors) run.span.places.push_back(int(k));
    if (tensors) run.span.values.push_back(value);
    if (!tensors && was != is) return failBranch(place + " holds another object where its sides meet");
  }
  run.span.end = int(ops_->graph().nodes.size());  // with inputs the values may have added
  branchOpen_.reset();
}

void Monitor::failBranch(const std::string& why) {
  if (branchOpen_ && branchOpen_->run >= 0) {
    std::string& slot = branchRuns_[size_t(branchOpen_->run)].why;
    if (slot.empty()) slot = why;
  }
  branchOpen_.reset();
}

// A write while a side runs: only tensors, and containers the side built.
// (A shadow node made in the side may stand for an object from before it,
// first reached there: only instructions that build are sure to make one.)
void Monitor::branchWrites(NodeId written) {
  if (!branchOpen_ || branchOpen_->run < 0) return;
  const ShadowNode& n = refs_.node(written);
  // Bound methods and tuples Python cannot change: what the shadow notes
  // of them (a method's __self__) is no write of the program's.
  bool fixed = n.obj && (PyMethod_Check(n.obj) || PyCFunction_Check(n.obj) || PyTuple_Check(n.obj));
  if (n.kind != NodeKind::Tensor && !fixed && !branchOpen_->made.count(written))
    failBranch("it writes a " + typeName(Py_TYPE(n.obj)) + " object it did not build");
}

void Monitor::branchMade(const Step& s) {
  switch (s.ins().op) {
    case Op::BUILD_LIST: case Op::BUILD_MAP: case Op::BUILD_SET: case Op::BUILD_CONST_KEY_MAP: case Op::BUILD_TUPLE:
    case Op::GET_ITER:  // a new iterator (not the iterator iterated itself)
      if (!s.out.empty() && s.out[0] >= 0 && !(s.ins().op == Op::GET_ITER && s.out[0] == s.in(0)))
        branchOpen_->made.insert(s.out[0]);
      break;
    default:
      break;
  }
}

// Python that could tell a side's tensors from the other side's, once a
// branch began: `is`, `in`, dict keys and identity-revealing attributes.
void Monitor::watchIdentity(ShadowFrame& sf, const Pending& p) {
  if (!pathDependent_.empty() || (!branchOpen_ && branchRuns_.empty())) return;
  auto tensor = [&](size_t k) { return k < p.inputs.size() && p.inputs[k] >= 0 && refs_.node(p.inputs[k]).kind == NodeKind::Tensor; };
  auto keyed = [&](size_t container) {
    return container < p.inputs.size() && p.inputs[container] >= 0 &&
           (refs_.node(p.inputs[container]).kind == NodeKind::Dict || refs_.node(p.inputs[container]).kind == NodeKind::Object);
  };
  std::string how;
  switch (p.ins.op) {
    case Op::IS_OP: case Op::CONTAINS_OP:
      if (tensor(0) || tensor(1)) how = std::string(p.ins.op == Op::IS_OP ? "is" : "in") + " on a tensor";
      break;
    case Op::BINARY_SUBSCR: case Op::DELETE_SUBSCR:
      if (tensor(1) && keyed(0)) how = "a tensor as a key";
      break;
    case Op::STORE_SUBSCR:
      if (tensor(2) && keyed(1)) how = "a tensor as a key";
      break;
    case Op::BUILD_MAP: case Op::BUILD_CONST_KEY_MAP: case Op::MAP_ADD: case Op::SET_ADD:
      for (size_t k = 0; k < p.inputs.size(); ++k)
        if (tensor(k)) how = "a tensor as a key";
      break;
    case Op::LOAD_ATTR: case Op::LOAD_METHOD:
      if (tensor(0) && tellsIdentity(utf8(instructionName(sf.view.code(), p.ins))))
        how = "tensor ." + utf8(instructionName(sf.view.code(), p.ins));
      break;
    default:
      for (NodeId in : p.positional)
        if (in >= 0 && refs_.node(in).kind == NodeKind::Tensor && tellsIdentityOf(p.calleeName)) how = p.calleeName + "() of a tensor";
  }
  if (!how.empty()) pathDependent_ = how + " after a branch on a tensor, at " + currentLocation();
}

void Monitor::finishBranches() {
  if (branchOpen_) failBranch("the call ended before its sides met");
}

}  // namespace magpy::capture

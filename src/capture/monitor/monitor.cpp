// The monitored run: events, opcode dispatch, node and tensor bookkeeping.
// Each family of instructions has its own file: frames and binding
// (frames.cpp), loads and stores (loads.cpp), containers
// (containers.cpp), operators and control flow
// (control.cpp), calls (calls.cpp). The analyses of sizes (sizes.h) and
// lifted numbers (numbers.h) keep their own tables; analyses.cpp tells
// them what instructions do.
#include "capture/monitor/monitor.h"
#include "capture/monitor/state.h"

#include <ATen/SequenceNumber.h>
#include <ATen/core/grad_mode.h>
#include <frameobject.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "magpy/record/graph_utils.h"
#include "magpy/replay/passes.h"
#include "magpy/replay/state.h"
#include "magpy/replay/tensors.h"
#include "magpy/support/error.h"

namespace magpy::capture {
namespace {

thread_local Monitor* tMonitor = nullptr;

int traceTrampoline(PyObject*, PyFrameObject* frame, int what, PyObject* arg) {
  return tMonitor ? tMonitor->onEvent(frame, what, arg) : 0;
}

void builtinCalled(PyObject* callable) {
  if (tMonitor) tMonitor->onBuiltinCall(callable);
}

void nativeWarned(const char* text) {
  if (tMonitor) tMonitor->onNativeWarning(text);
}

// warnings.warn and warn_explicit, the functions Python code warns through.
bool warns(PyObject* callable) {
  static PyObject* warn = nullptr;
  static PyObject* warnExplicit = nullptr;
  if (!warn) {
    PyRef module = PyRef::steal(PyImport_ImportModule("_warnings"));
    if (!module) {
      PyErr_Clear();
      return false;
    }
    warn = PyObject_GetAttrString(module.get(), "warn");  // kept: builtins live as long as the interpreter
    warnExplicit = PyObject_GetAttrString(module.get(), "warn_explicit");
    if (!warn || !warnExplicit) PyErr_Clear();
  }
  return callable && (callable == warn || callable == warnExplicit);
}

// "model.py:12", from the code object's file name without its directory.
std::string sourceLine(PyCodeObject* code, int line) {
  std::string file = utf8(codeFileName(code));
  size_t slash = file.rfind('/');
  if (slash != std::string::npos) file = file.substr(slash + 1);
  return file + ":" + std::to_string(line);
}

// Whether code is torch's own Python code (torch.no_grad's __enter__):
// it runs on behalf of the program line that called it.
bool isTorchCode(PyCodeObject* code) {
  static const std::string torchDir = [] {
    PyRef torch = PyRef::steal(PyImport_ImportModule("torch"));
    PyRef file = torch ? PyRef::steal(PyObject_GetAttrString(torch.get(), "__file__")) : PyRef();
    PyErr_Clear();
    std::string path = file && PyUnicode_Check(file.get()) ? utf8(file.get()) : "";
    return path.substr(0, path.rfind('/') + 1);
  }();
  return !torchDir.empty() && utf8(codeFileName(code)).rfind(torchDir, 0) == 0;
}

}  // namespace

void Monitor::Pending::clear() {
  active = false;
  ins = Instruction{};
  line = 0;
  base = 0;
  inputs.clear();
  inputObjs.clear();
  outputs.clear();
  traceCallees = true;
  suppressOps = false;
  calleeResult = kNoNode;
  calleeResultObj = nullptr;
  callable = PyRef();
  callableNode = kNoNode;
  calleeFunction = kNoNode;
  autogradForward = false;
  backward = false;
  keyAbsent = false;
  returnsSelf = false;
  dereferences = false;
  positional.clear();
  positionalObjs.clear();
  keywords.clear();
  keywordObjs.clear();
  calleeName.clear();
  annotation = nullptr;
  inlined = false;
  numberCall = nullptr;
  itemOf = -1;
  loopTrip = -1;
}

Monitor::Monitor(const record::AnnotationSet& annotations)
    : annotations_(annotations),
      ops_(std::make_unique<OpRecorder>(*this)),
      sizes_(refs_, *ops_, slices_, [this] { return currentLocation(); }),
      numbers_(refs_, *ops_, sizes_, slices_, inputs_, [this] { return currentLocation(); },
               [this](NodeId n) { return sizeNodeOf(n); }) {
  refs_.onTensor([this](NodeId id) { registerTensor(id); });
  numbers_.onItemFixed([this](int node, const std::string& how) { checkItem(node, how); });
  refs_.onWrite([this](NodeId id) {
    if (!loopWatches_.empty()) loopWrites(id);
    if (branchOpen_) branchWrites(id);
  });
}

Monitor::~Monitor() = default;

const at::Tensor* Monitor::entryContent(const at::Tensor& t) const {
  auto it = entryContent_.find(t.unsafeGetTensorImpl());
  return it == entryContent_.end() ? nullptr : &it->second;
}

const record::TensorMeta* Monitor::entryMeta(NodeId id) const {
  auto it = entryMeta_.find(id);
  return it == entryMeta_.end() ? nullptr : &it->second;
}

// ---------------------------------------------------------------------------
// The run

PyObject* Monitor::run(const CallSpec& call) {
  call_ = &call;
  numbers_.liftState(!call.varyingNumbers.empty());
  callerFrame_ = PyEval_GetFrame();
  autogradStart_ = at::sequence_number::peek();
  readRuntimeState("default_dtype");
  // Autocast picks operators' result dtypes, which the program may read
  // (y.dtype after a linear), as the default dtype picks factories'.
  readRuntimeState("autocast");
  readRuntimeState("autocast_cpu");
  readRuntimeState("autocast_dtype");
  readRuntimeState("autocast_cpu_dtype");
  // A torch function or dispatch mode the program entered runs its Python
  // inside torch calls, where the monitor does not trace: the record holds
  // what the mode did this time, not the mode.
  readRuntimeState("torch_modes");
  if (auto modes = runtimeReads_.find("torch_modes"); modes != runtimeReads_.end() && modes->second.i != 0)
    graphBreak("a torch function or dispatch mode is active (torch.overrides.TorchFunctionMode, "
               "TorchDispatchMode): its Python runs inside torch calls, which a record cannot repeat");

  // Node 0's edges: self and the arguments, counted once the run uses them.
  auto root = [&](PyObject* obj, Relation rel) {
    NodeId id = newNode(obj);
    refs_.addLazyRoot(id, rel);
    return id;
  };
  rootSelf_ = root(call.self, Relation::self());
  Py_ssize_t nargs = call.args ? PyTuple_GET_SIZE(call.args) : 0;
  for (Py_ssize_t i = 0; i < nargs; ++i) rootArgs_.push_back(root(PyTuple_GET_ITEM(call.args, i), Relation::arg(i)));
  if (call.kwargs) {
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(call.kwargs, &pos, &k, &v))
      rootKwargs_.push_back({utf8(k), root(v, Relation::kwarg(utf8(k)))});
  }

  Monitor* previous = tMonitor;
  tMonitor = this;
  PyObject* result;
  {
    TraceFunctionScope trace(traceTrampoline);
    BuiltinCallWatch watch(&builtinCalled);
    NativeWarningWatch warnings(&nativeWarned);
    ops_->setEnabled(true);
    // Calling self binds it as Python would (a module's __call__, a bound method).
    result = call.invoke ? call.invoke() : PyObject_Call(call.self, call.args, call.kwargs);
    ops_->setEnabled(false);
  }
  tMonitor = previous;
  finishLoops();
  finishBranches();

  if (!result) return nullptr;
  if (!done_ && !broken_) graphBreak("the monitored call returned without its frame being traced");
  if (!broken_ && at::GradMode::is_enabled() != ops_->gradEnabledAtEntry())  // the call has returned: where the program switched
    graphBreakAt(gradSwitch_,
                 "the call returns with grad mode " + std::string(at::GradMode::is_enabled() ? "enabled" : "disabled") +
                     " and a record replays grad mode regions only inside the call: restore the mode before "
                     "returning (`with torch.no_grad():`, `with torch.set_grad_enabled(...):`)",
                 "torch._C._set_grad_enabled");
  breakUnlessChecksStopCleanly();
  return result;
}

// A call whose check fails stops there and runs as Python instead, which
// is right only if nothing it did before is seen: no state written in
// place, no random numbers drawn (replay::firstEffect, in the order plans
// run the graph, which moves checks before effects where it can).
void Monitor::breakUnlessChecksStopCleanly() {
  if (broken_ || checkLocations_.empty()) return;
  record::Graph planned = replay::planOrder(ops_->graph());
  size_t effect = replay::firstEffect(planned);
  for (size_t i = effect; i < planned.nodes.size(); ++i) {
    // A record with effects keeps the sizes of its capture (it never
    // becomes dynamic): a decision on sizes alone goes the same way on
    // every call its guards admit.
    if (!record::isCheck(planned.nodes[i].target) || record::decidesOnSizesOnly(planned, planned.nodes[i])) continue;
    graphBreakAt(checkLocations_.at(planned.nodes[i].name),
                 "decides on tensor contents, content-dependent sizes or sizes the graph computes after the graph "
                 "wrote its inputs in place or drew random numbers (" + record::nameAndSource(planned.nodes[effect]) +
                 "): a record checks such decisions while it runs, and could not stop there cleanly");
    return;
  }
}

bool Monitor::checksContents(const at::Tensor& t) {
  GilScope gil;
  constexpr int64_t kMaxCheckedElements = 4096;  // the record keeps them as a constant
  if (!call_->contentChecks || t.numel() > kMaxCheckedElements || t.layout() != at::kStrided || t.is_quantized() ||
      !t.has_storage())
    return false;
  int value = ops_->valueOf(t);
  if (value < 0) value = externalTensor(t);
  if (value < 0) return false;
  int seen = pythonDataTensor(t.detach().clone());
  record::GraphBreak at = programLocation();
  checkLocations_[ops_->addContentsCheck(value, seen, at.where)] = at;
  return true;
}

int Monitor::itemSource(const at::Tensor& t) {
  if (t.numel() != 1 || t.layout() != at::kStrided || t.is_quantized() || !t.has_storage() ||
      !(at::isFloatingType(t.scalar_type()) || at::isIntegralType(t.scalar_type(), false)) || ops_->contentsFixedByGuards(t))
    return -1;
  int value = ops_->valueOf(t);
  return value >= 0 ? value : externalTensor(t);
}

void Monitor::liftItem(const Pending& p, NodeId result) {
  const ShadowNode& n = refs_.node(result);
  bool number = n.kind == NodeKind::Atom && (n.atom.kind == record::Atom::Kind::Float || n.atom.kind == record::Atom::Kind::Int);
  if (!number) {
    graphBreak("internal: " + p.calleeName + " gave no int or float");
    return;
  }
  numbers_.bindItem(result, ops_->addItem(p.itemOf, n.atom));
}

void Monitor::checkItem(int node, const std::string& how) {
  if (!itemsChecked_.insert(node).second) return;
  const record::Atom seen = ops_->graph().nodes[size_t(node)].seen;
  if (!call_->contentChecks || (seen.kind == record::Atom::Kind::Float && std::isnan(seen.f))) {
    graphBreak("the program depends on a number t.item() read (" + how + ")" +
               (call_->contentChecks ? ", and it is NaN, which no check can compare"
                                     : ": data-dependent control flow is not captured"));
    return;
  }
  record::Arg expected = seen.kind == record::Atom::Kind::Int ? record::Arg::integer(seen.i) : record::Arg::floating(seen.f);
  checksDecision(ops_->addNumberOp("operator.eq", {record::Arg::node(node), expected}, "bool", record::Atom::boolean(true)));
}

void Monitor::checksDecision(int comparison) {
  record::GraphBreak at = programLocation();
  checkLocations_[ops_->addDecisionCheck(comparison, at.where)] = at;
}

bool Monitor::checksSizes(const at::Tensor& t) {
  int value = ops_->valueOf(t);
  if (!call_->contentChecks || value < 0) return false;
  record::GraphBreak at = programLocation();
  checkLocations_[ops_->addSizesCheck(value, t.sizes().vec(), at.where)] = at;
  return true;
}

int Monitor::onEvent(PyFrameObject* frame, int what, PyObject* arg) {
  ops_->setEnabled(false);
  try {
    failIfArmed(PythonEntry::Trace);
    if (!done_ && !broken_) {
      switch (what) {
        case PyTrace_CALL:
          enterFrame(frame);
          break;
        case PyTrace_OPCODE:
          if (!frames_.empty() && frames_.back()->frame == frame) {
            ShadowFrame& sf = *frames_.back();
            if (sf.pending.active) finish(sf);
            if (!broken_) begin(sf, sf.view.current());
          }
          break;
        case PyTrace_RETURN:
          if (!frames_.empty() && frames_.back()->frame == frame) leaveFrame(*frames_.back(), arg);
          break;
        case PyTrace_EXCEPTION:
          if (!frames_.empty() && frames_.back()->frame == frame) {
            PyObject* type = PyTuple_Check(arg) && PyTuple_GET_SIZE(arg) > 0 ? PyTuple_GET_ITEM(arg, 0) : nullptr;
            std::string name = type && PyType_Check(type) ? reinterpret_cast<PyTypeObject*>(type)->tp_name : "exception";
            graphBreak("an exception (" + name + ") was raised; control flow through exceptions is not captured");
          }
          break;
        default:
          break;
      }
    }
    if (done_ || broken_) Frame(frame).traceOpcodes(false);
    if (broken_ && !released_) releaseAfterBreak();
  } catch (const std::exception& e) {
    graphBreak("internal error while monitoring: " + messageOf(e));
  } catch (...) {
    graphBreak("internal error of unknown kind while monitoring");
  }
  if (PyErr_Occurred()) PyErr_Clear();  // our own lookups must not leak errors into the program
  bool suppress = !frames_.empty() && frames_.back()->pending.active && frames_.back()->pending.suppressOps;
  ops_->setEnabled(!done_ && !broken_ && !suppress);
  return 0;
}

void Monitor::graphBreak(const std::string& reason, const std::string& callee) {
  record::GraphBreak at;
  if (!frames_.empty()) {
    const ShadowFrame& sf = *frames_.back();
    at = {where(sf), sf.name, sf.pending.active ? opName(sf.pending.ins.op) : "", "", ""};
  }
  graphBreakAt(std::move(at), reason, callee);
}

void Monitor::graphBreakAt(record::GraphBreak at, const std::string& reason, const std::string& callee) {
  if (broken_) return;
  broken_ = true;
  at.reason = reason;
  at.callee = callee;
  breaks_.push_back(std::move(at));
  for (auto& f : frames_) f->view.traceOpcodes(false);
}

record::GraphBreak Monitor::programLocation() const {
  for (auto f = frames_.rbegin(); f != frames_.rend(); ++f) {
    const ShadowFrame& sf = **f;
    if (std::next(f) != frames_.rend() && isTorchCode(sf.view.code())) continue;
    return {where(sf), sf.name, sf.pending.active ? opName(sf.pending.ins.op) : "", "", ""};
  }
  return {};
}

std::string Monitor::pendingCallee() const {
  return frames_.empty() || !frames_.back()->pending.active ? "" : frames_.back()->pending.calleeName;
}

// A warning given inside code the monitor does not trace (torch's Python
// under an annotation: F.softmax without dim, a deprecated function): a
// replayed graph would not give it, and the filters may make it an error,
// so the call runs as Python. (A warnings.warn the monitor traces breaks
// already, as native code without an annotation.)
void Monitor::onBuiltinCall(PyObject* callable) {
  if (broken_ || !warns(callable)) return;
  std::string callee = pendingCallee();
  graphBreak((callee.empty() ? std::string("a call") : callee) +
                 " gives a Python warning (warnings.warn), which a replayed graph would not give: change the call "
                 "so that it does not warn (F.softmax: pass dim; a deprecated function: call the one its "
                 "warning names)",
             callee);
}

// A warning torch's bindings give outside any operator's kernel
// (torch.tensor(tensor) copying, a deprecated signature, .grad of a
// non-leaf): the replayed graph gives only its kernels' warnings again
// (OpRecorder::fromRecordedOperator), so the call runs as Python.
void Monitor::onNativeWarning(const char* text) {
  if (broken_ || ops_->fromRecordedOperator(text)) return;
  std::string callee = pendingCallee();
  std::string message(text, std::find(text, text + std::strlen(text), '\n'));
  if (message.size() > 120) message = message.substr(0, 117) + "...";
  graphBreak((callee.empty() ? std::string("a call") : callee) + " gives a warning outside any operator (\"" +
                 message + "\"), which a replayed graph would not give: change the call so that it does not warn",
             callee);
}

void Monitor::breakGraph(const std::string& reason) {
  GilScope gil;
  graphBreak(reason);
}

std::string Monitor::currentLocation() const { return frames_.empty() ? std::string() : where(*frames_.back()); }

std::string Monitor::where(const ShadowFrame& sf) const {
  return sourceLine(sf.view.code(), sf.pending.active ? sf.pending.line : sf.view.line());
}

std::string Monitor::sourceLocation() const {
  GilScope gil;
  return locationCode_ ? sourceLine(reinterpret_cast<PyCodeObject*>(locationCode_.get()), locationLine_) : "";
}

// ---------------------------------------------------------------------------
// Nodes and tensors

void Monitor::registerTensor(NodeId id) {
  ShadowNode& n = refs_.node(id);
  if (n.kind != NodeKind::Tensor) return;
  const at::Tensor& t = tensorOf(n.obj);
  bool added = tensorNodes_.emplace(t.unsafeGetTensorImpl(), id).second;
  if (added && t.has_storage()) nodesByStorage_[t.storage().unsafeGetStorageImpl()].push_back(id);
  if (!entryMeta_.count(id)) entryMeta_.emplace(id, replay::metaOf(t));
}

void Monitor::readRuntimeState(const std::string& name) {
  if (runtimeReads_.count(name) || runtimeWrites_.count(name)) return;  // after a write: the program's own value
  if (auto value = replay::runtimeState(name)) runtimeReads_.emplace(name, *value);
}

// Whether autograd records the call's operators: grad mode, and inference
// mode, under which no operator records (and tensors made are inference
// tensors) whatever grad mode says.
void Monitor::readAutogradMode() {
  readRuntimeState("grad_enabled");
  readRuntimeState("inference_mode");
}

// A grad mode switch the program makes (torch._C._set_grad_enabled, which
// torch.no_grad(), enable_grad() and set_grad_enabled() call) starts a
// region: the operators after it carry its mode (record::GradMode), as
// Dynamo's graphs hold _set_grad_enabled calls. The mode it sets is the
// program's, specialized as any argument an annotation reads; the record
// guards the mode at entry. A mock cannot write other interpreter state:
// replaying such a call would leave it as it was.
bool Monitor::writeRuntimeState(const Pending& p, const std::string& name) {
  if (name != "grad_enabled") {
    graphBreak(p.calleeName + " changes interpreter state (" + name + "), which a record cannot replay");
    return false;
  }
  if (branchOpen_) failBranch("it switches grad mode, which the other side would not");
  runtimeReads_.emplace(name, record::Atom::boolean(ops_->gradEnabledAtEntry()));  // kept if read before
  runtimeWrites_.insert(name);
  ops_->allowGradRegions();
  gradSwitch_ = programLocation();
  return true;
}

// What CPython finds on a class of Python code (a heap type: static types
// cannot change) may change between calls; a super object looks along
// the MRO of the class it was made for.
void Monitor::readClassOf(PyObject* obj) {
  PyTypeObject* type = Py_TYPE(obj);
  if (type == lastClassRead_) return;  // per instruction: most inputs are of the class just seen (tensors)
  if (PyObject_TypeCheck(obj, &PySuper_Type)) {
    PyRef of = PyRef::steal(PyObject_GetAttrString(obj, "__self_class__"));
    PyErr_Clear();
    if (!of || !PyType_Check(of.get())) return;
    type = reinterpret_cast<PyTypeObject*>(of.get());
  }
  if (!(type->tp_flags & Py_TPFLAGS_HEAPTYPE) || !classSeen_.insert(type).second) return;
  classesRead_.push_back(PyRef::borrow(reinterpret_cast<PyObject*>(type)));
  if (type == Py_TYPE(obj)) lastClassRead_ = type;  // held in classesRead_: its address stays its own
}

NodeId Monitor::newNode(PyObject* obj) {
  NodeId id = refs_.nodeFor(obj);
  registerTensor(id);
  return id;
}

int Monitor::externalTensor(const at::Tensor& t) {
  auto it = tensorNodes_.find(t.unsafeGetTensorImpl());
  if (it == tensorNodes_.end()) return -1;
  NodeId id = it->second;
  // Only state the call began with is an input; tensors the run made
  // without an operator (torch.tensor from Python data) are constants.
  if (!refs_.node(id).external) return -1;
  std::string name = "input";
  int value = ops_->addInput(t, name);
  inputs_.push_back({value, id});
  refs_.node(id).versions.front().graphValue = value;
  return value;
}

// Its data came from Python values the run read (and guarded), as
// torch.tensor's does: a constant of the graph.
int Monitor::pythonDataTensor(const at::Tensor& t) {
  int node = ops_->addConstant(t, -1);
  constants_.push_back({node, t.detach().clone()});
  return node;
}

// The RefGraph's references are the object's only ones: the program
// dropped it (and holds no weak reference that could hand it back).
int Monitor::unreachableHolds(const at::Tensor& t) {
  PyObject* obj = pythonObjectHolding(t);
  if (!obj) return 0;
  Py_ssize_t unusable = refs_.unusableRefs(obj);
  return unusable > 0 && Py_REFCNT(obj) == unusable && !hasWeakReferences(obj) ? 1 : -1;
}

void Monitor::freed(const at::Tensor& t) {
  if (PyObject* obj = pythonObjectHolding(t)) PyObject_GC_UnTrack(obj);
}

// After a break the run goes on as Python, untraced, and no graph will be
// made of it: what the monitor holds only for recording is let go, so the
// objects and tensors the program drops from here on (or dropped already)
// are freed as in eager: weak references to them answer None, their
// finalizers run. Called between events, where no handler holds a node's
// object.
void Monitor::releaseAfterBreak() {
  released_ = true;
  for (auto& f : frames_) f->pending.clear();
  suspended_.clear();
  unstarted_.clear();
  if (branchOpen_) failBranch("the call breaks");
  ops_->releaseBindings();
  refs_.releaseUnreached();
}

// Eager would have freed obj by now: only the RefGraph and containers the
// program dropped hold it, and, for a tensor, nothing but its Python
// object and the recorder's bindings hold the tensor itself (eager keeps
// the Python object of a tensor C++ still holds: a view's base, a tensor
// autograd saved).
bool Monitor::droppedByProgram(PyObject* obj) {
  refs_.settle();
  Py_ssize_t unusable = refs_.unusableRefs(obj);
  if (unusable == 0 || Py_REFCNT(obj) != unusable) return false;
  if (!isTensor(obj)) return true;
  const at::Tensor& t = tensorOf(obj);
  return size_t(t.use_count()) == 1 + ops_->bindings(t);
}

// A monitored call keeps what it touched alive until it returns (addresses
// name values), so a weak reference to an object the program dropped would
// still hand it back. Before the program uses one (one made before the
// call: making one breaks the graph), a referent only the monitor holds
// is treated as eager would have treated it when the program dropped it:
// its weak references are cleared and their callbacks run. No record
// follows what that does to the state's weak references: a break.
void Monitor::settleWeakReference(PyObject* ref) {
  PyObject* referent = PyWeakref_GET_OBJECT(ref);
  if (referent == Py_None || !droppedByProgram(referent)) return;
  graphBreak("the program dropped the last reference to an object a weak reference names (" +
             typeName(Py_TYPE(referent)) + "): no record follows what freeing it does to the reference");
  clearWeakReferences(referent);
}

// A write through any tensor changes every tensor on its memory (a slice,
// p.detach(), a .grad that is another tensor's view): each keeps its
// contents from before the first such write, for the entry state of those
// that turn out to be part of it (marked external later, when first used).
// Memory an operator of the run allocated holds no entry state: an in-place
// activation (ReLU(inplace=True)) copies nothing.
void Monitor::keepEntryContents(const at::Tensor& written) {
  if (!written.has_storage() || ops_->allocatedInRun(written.storage().unsafeGetStorageImpl())) return;
  auto sharing = nodesByStorage_.find(written.storage().unsafeGetStorageImpl());
  if (sharing == nodesByStorage_.end()) return;
  for (NodeId id : sharing->second) {
    const at::Tensor& own = tensorOf(refs_.node(id).obj);
    if (!entryContent_.count(own.unsafeGetTensorImpl())) entryContent_.emplace(own.unsafeGetTensorImpl(), own.detach().clone());
  }
}

// `t` may be an alias the monitor tied to a node (p.data): the node is
// the one written.
void Monitor::beforeWrite(const at::Tensor& t) {
  keepEntryContents(t);
  auto it = tensorNodes_.find(t.unsafeGetTensorImpl());
  if (it != tensorNodes_.end()) refs_.changedInPlace(it->second);
}

// An object of a native class that was part of the entry state: native
// code that reads its contents reads something no guard covers. (Objects of
// Python classes are read through special methods, which are traced.)
bool Monitor::externalOpaque(NodeId id) const {
  if (id < 0) return false;
  const ShadowNode& n = refs_.node(id);
  return n.kind == NodeKind::Object && n.external && n.obj && !(Py_TYPE(n.obj)->tp_flags & Py_TPFLAGS_HEAPTYPE);
}

// ---------------------------------------------------------------------------
// Instructions

NodeId Monitor::slotNode(ShadowFrame& sf, int index) {
  if (index < 0 || size_t(index) >= sf.stack.size()) return kNoNode;
  return sf.stack[size_t(index)];
}

void Monitor::begin(ShadowFrame& sf, const Instruction& ins) {
  if (!takeInputs(sf, ins)) return;
  Pending& p = sf.pending;
  followAnalyses(p);
  if (locationCode_.get() != reinterpret_cast<PyObject*>(sf.view.code()))
    locationCode_ = PyRef::borrow(reinterpret_cast<PyObject*>(sf.view.code()));
  locationLine_ = p.line;
  p.active = true;
  switch (ins.op) {
    case Op::CALL:
    case Op::CALL_FUNCTION_EX:
      beginCall(sf, p);
      break;
    case Op::KW_NAMES:
      sf.kwnames = keywordNames(sf.view.code(), ins);
      break;
    default:
      breakOnUnsupported(ins.op);
      break;
  }
  // Numbers passed to a call that neither an annotation summarized nor the
  // monitor traces into (a native class such as functools.partial keeps
  // them where no graph sees them): the run depends on their values.
  bool call = ins.op == Op::CALL || ins.op == Op::CALL_FUNCTION_EX;
  if (numbers_.active() && call && !p.inlined && !p.annotation && !p.autogradForward)
    for (NodeId n : p.inputs) numbers_.fix(n, "a call that is neither traced nor annotated takes a number");
  if (!broken_) followListReads(p);
  if (!broken_ && testsTruth(ins.op)) checkTruthTest(p);
  if (!loopRuns_.empty()) watchLoops(sf, p);
  if (branchOpen_) watchBranch(sf, p);
  watchIdentity(sf, p);
  if (!broken_ && popsAndJumps(ins.op) && call_->contentChecks) branchJump(sf, p);
}

// Fills the frame's pending instruction with the shadows and objects of
// its inputs, once the shadow stack is seen to match the real one.
bool Monitor::takeInputs(ShadowFrame& sf, const Instruction& ins) {
  int depth = sf.view.stackDepth();
  if (int(sf.stack.size()) != depth) {
    graphBreak("internal: the shadow stack has " + std::to_string(sf.stack.size()) + " values, the frame " +
               std::to_string(depth) + " (before " + opName(ins.op) + ")");
    return false;
  }
  Pending& p = sf.pending;
  p.ins = ins;
  p.line = sf.view.line();
  p.base = depth - std::min(stackInputs(ins), depth);
  p.traceCallees = mayCallPython(ins.op);
  for (int i = p.base; i < depth; ++i) {
    p.inputs.push_back(sf.stack[size_t(i)]);
    PyObject* in = sf.view.stack(i);
    p.inputObjs.push_back(PyRef::borrow(in));
    if (!in) continue;
    // The instruction may look names up on its inputs' classes.
    if (p.traceCallees) readClassOf(in);
    if (PyWeakref_Check(in)) settleWeakReference(in);  // a ref (KeyedRef, WeakMethod) or a proxy
  }
  // A dict subclass's __missing__ (defaultdict's inserts) runs where the key is absent.
  if (ins.op == Op::BINARY_SUBSCR && p.inputObjs.size() == 2 && PyDict_Check(p.inputObjs[0].get()) &&
      !PyDict_CheckExact(p.inputObjs[0].get())) {
    p.keyAbsent = !dictHolds(p.inputObjs[0].get(), p.inputObjs[1].get());
  }
  return true;
}

void Monitor::breakOnUnsupported(Op op) {
  switch (op) {
    case Op::MATCH_MAPPING: case Op::MATCH_SEQUENCE: case Op::MATCH_KEYS: case Op::MATCH_CLASS:
      graphBreak("structural pattern matching (match/case) is not captured yet");
      break;
    case Op::PUSH_EXC_INFO: case Op::CHECK_EXC_MATCH: case Op::CHECK_EG_MATCH: case Op::WITH_EXCEPT_START:
    case Op::POP_EXCEPT: case Op::RERAISE: case Op::RAISE_VARARGS: case Op::PREP_RERAISE_STAR:
      graphBreak(std::string(opName(op)) + ": exception handling is not captured");
      break;
    case Op::GET_AITER: case Op::GET_ANEXT: case Op::BEFORE_ASYNC_WITH: case Op::END_ASYNC_FOR:
    case Op::GET_AWAITABLE: case Op::ASYNC_GEN_WRAP: case Op::SEND: case Op::GET_YIELD_FROM_ITER:
      graphBreak(std::string(opName(op)) + ": coroutines and 'yield from' are not captured yet");
      break;
    case Op::LOAD_NAME: case Op::STORE_NAME: case Op::DELETE_NAME: case Op::LOAD_BUILD_CLASS:
    case Op::LOAD_CLASSDEREF: case Op::IMPORT_STAR: case Op::SETUP_ANNOTATIONS: case Op::PRINT_EXPR:
      graphBreak(std::string(opName(op)) + ": class bodies and module-level code are not captured");
      break;
    case Op::UNKNOWN:
      graphBreak("an instruction this magpy does not know");
      break;
    default:
      break;
  }
}

void Monitor::finish(ShadowFrame& sf) {
  // A break while finishing is reported at the frame's current line with
  // no instruction: the pending one is no longer running.
  sf.pending.active = false;
  numbers_.fixUntaken();
  pushOutputs(sf, sf.pending);
  sf.pending.clear();
}

// Runs the instruction's handler for the shadows of what it left on the
// stack, then replaces its inputs on the shadow stack by them.
void Monitor::pushOutputs(ShadowFrame& sf, Pending& p) {
  int depth = sf.view.stackDepth();
  if (depth < p.base) {
    graphBreak(std::string("internal: the stack shrank below the inputs of ") + opName(p.ins.op));
    return;
  }
  p.outputs.assign(size_t(depth - p.base), kNoNode);
  Step step{sf, p, p.outputs};
  if (!finishInstruction(step) || broken_) {
    if (!broken_) graphBreak(std::string(opName(p.ins.op)) + " is not supported in this position");
    return;
  }
  if (branchOpen_) branchMade(step);
  sf.stack.resize(size_t(p.base));
  sf.stackObjs.resize(size_t(p.base));
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    NodeId out = p.outputs[k];
    if (out >= 0) refs_.use(out);
    if (out == kNoNode) {
      graphBreak(std::string("internal: ") + opName(p.ins.op) + " left a value magpy did not follow");
      return;
    }
    sf.stack.push_back(out);
    sf.stackObjs.push_back(sf.view.stack(p.base + int(k)));
  }
  // Values below the inputs must be untouched.
  for (int i = 0; i < p.base; ++i)
    if (sf.stackObjs[size_t(i)] != sf.view.stack(i)) {
      graphBreak(std::string("internal: ") + opName(p.ins.op) + " changed the stack below its inputs");
      return;
    }
}

// The handler of each instruction. One that returns false (or breaks) did
// something the shadow cannot follow.
bool Monitor::finishInstruction(Step& s) {
  const Op op = s.ins().op;
  // Jumps that pop their test value leave nothing to follow.
  if (popsAndJumps(op)) return true;
  switch (op) {
    case Op::NOP: case Op::RESUME: case Op::CACHE: case Op::EXTENDED_ARG: case Op::JUMP_FORWARD:
    case Op::JUMP_BACKWARD: case Op::JUMP_BACKWARD_NO_INTERRUPT: case Op::POP_TOP: case Op::KW_NAMES:
    case Op::RETURN_VALUE:
      return true;
    case Op::SET_ADD:
    case Op::SET_UPDATE:
      return true;  // sets are followed as opaque values built from followed inputs
    case Op::PUSH_NULL:
      s.out[0] = kNull;
      return true;
    // Locals, globals, cells, attributes, imports.
    case Op::LOAD_CONST: case Op::LOAD_ASSERTION_ERROR: return finishNewValue(s);
    case Op::LOAD_FAST: case Op::LOAD_CLOSURE: return finishLoadFast(s);
    case Op::STORE_FAST: return finishStoreFast(s);
    case Op::DELETE_FAST: return finishDeleteFast(s);
    case Op::COPY: return finishCopy(s);
    case Op::SWAP: return finishSwap(s);
    case Op::LOAD_GLOBAL: return finishLoadGlobal(s);
    case Op::STORE_GLOBAL: return finishStoreGlobal(s);
    case Op::DELETE_GLOBAL: return finishDeleteGlobal(s);
    case Op::LOAD_DEREF: return finishLoadDeref(s);
    case Op::STORE_DEREF: return finishStoreDeref(s);
    case Op::DELETE_DEREF: return finishDeleteDeref(s);
    case Op::LOAD_ATTR: return finishLoadAttr(s);
    case Op::LOAD_METHOD: return finishLoadMethod(s);
    case Op::STORE_ATTR: return finishStoreAttr(s);
    case Op::DELETE_ATTR: return finishDeleteAttr(s);
    case Op::IMPORT_NAME: return finishImportName(s);
    case Op::IMPORT_FROM: return finishImportFrom(s);
    case Op::MAKE_FUNCTION: return finishMakeFunction(s);
    // Containers.
    case Op::BINARY_SUBSCR: return finishBinarySubscr(s);
    case Op::STORE_SUBSCR: return finishStoreSubscr(s);
    case Op::DELETE_SUBSCR: return finishDeleteSubscr(s);
    case Op::UNPACK_SEQUENCE: return finishUnpackSequence(s);
    case Op::UNPACK_EX: return finishUnpackEx(s);
    case Op::BUILD_TUPLE: case Op::BUILD_LIST: return finishBuildSequence(s);
    case Op::LIST_TO_TUPLE: return finishListToTuple(s);
    case Op::BUILD_MAP: case Op::BUILD_CONST_KEY_MAP: return finishBuildMap(s);
    case Op::LIST_APPEND: return finishListAppend(s);
    case Op::LIST_EXTEND: return finishListExtend(s);
    case Op::DICT_UPDATE: case Op::DICT_MERGE: return finishDictUpdate(s);
    case Op::MAP_ADD: return finishMapAdd(s);
    // Operators, iteration, control flow.
    case Op::BINARY_OP: return finishBinaryOp(s);
    case Op::UNARY_POSITIVE: case Op::UNARY_NEGATIVE: case Op::UNARY_NOT: case Op::UNARY_INVERT:
    case Op::COMPARE_OP: case Op::CONTAINS_OP:
      return finishOperator(s);
    case Op::IS_OP: return finishIsOp(s);
    case Op::FORMAT_VALUE: return finishFormatValue(s);
    case Op::BUILD_SET: case Op::BUILD_STRING: case Op::BUILD_SLICE: return finishBuildValue(s);
    case Op::GET_LEN: return finishGetLen(s);
    case Op::GET_ITER: return finishGetIter(s);
    case Op::FOR_ITER: return finishForIter(s);
    case Op::JUMP_IF_FALSE_OR_POP: case Op::JUMP_IF_TRUE_OR_POP: return finishJumpOrPop(s);
    case Op::BEFORE_WITH: return finishBeforeWith(s);
    case Op::YIELD_VALUE: return finishYieldValue(s);
    // Calls.
    case Op::PRECALL: return finishPrecall(s);
    case Op::CALL: case Op::CALL_FUNCTION_EX: return finishCall(s);
    default:
      graphBreak(std::string(opName(op)) + " is not captured yet");
      return false;
  }
}

}  // namespace magpy::capture

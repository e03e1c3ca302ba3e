// DistributedDataParallel in a monitored call. Its forward runs Python and
// native bookkeeping (the reducer, a logger, buffer broadcasts, profiler
// ranges) around the call of its module, and its gradient reduction runs
// from C++ hooks on the parameters' gradient accumulators during backward.
// A record holds what that computes instead:
//
//   ddp(x)          where DDP syncs buffers, one bucket of them per dtype,
//                   c10d::broadcast_ from rank 0, copied back; then
//                   ddp.module(x), traced as any call
//   loss.backward() magpy.backward, then per dtype one bucket of every
//                   parameter's grad * (1 / world), c10d::allreduce_,
//                   copied back into each .grad
//
// which is DDP's arithmetic (it scales each gradient into its bucket, sums
// the buckets across ranks and copies them back), with one bucket where
// DDP makes them of 25 MB. The monitored call runs
// the real DDP; the collectives magpy adds there repeat what DDP did (a
// broadcast of buffers equal on every rank, an average of gradients equal
// on every rank), so they change nothing but run, and are recorded, as
// replay will run them. Configurations whose arithmetic differs
// (find_unused_parameters, static_graph, gradient_as_bucket_view, join,
// buffer hooks, device ids, other groups, communication hooks) are breaks.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/mul.h>

#include <algorithm>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>

#include "capture/monitor/monitor.h"
#include "capture/monitor/state.h"
#include "replay/collectives.h"

namespace magpy::capture {
namespace {

// The class, once the program imported it (kept: asked at every call).
PyObject* dataParallelClass() {
  static PyObject* cls = nullptr;
  if (cls) return cls;
  PyObject* module = PyDict_GetItemString(PyImport_GetModuleDict(), "torch.nn.parallel.distributed");
  cls = module ? PyDict_GetItemString(PyModule_GetDict(module), "DistributedDataParallel") : nullptr;
  Py_XINCREF(cls);
  return cls;
}

// Runs a c10d collective through the dispatcher, as torch.distributed
// does, and waits for it.
void runCollective(const char* name, std::vector<c10::IValue> stack) {
  auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
  op.callBoxed(&stack);
  replay::waitFor(stack[1]);
}

// One collective per dtype over the tensors flattened into a bucket (each
// scaled first, where scale is not 1), then each tensor copied back from
// it, as DDP's buckets do. `args` follow the bucket and the group.
void runBucketed(const char* name, const std::vector<at::Tensor>& tensors, double scale, std::vector<c10::IValue> args) {
  std::vector<c10::ScalarType> dtypes;
  for (const at::Tensor& t : tensors)
    if (std::find(dtypes.begin(), dtypes.end(), t.scalar_type()) == dtypes.end()) dtypes.push_back(t.scalar_type());
  for (c10::ScalarType dtype : dtypes) {
    std::vector<at::Tensor> parts, members;
    for (const at::Tensor& t : tensors) {
      if (t.scalar_type() != dtype) continue;
      parts.push_back((scale == 1 ? t : at::mul(t, scale)).reshape({-1}));
      members.push_back(t);
    }
    at::Tensor bucket = at::cat(parts);
    std::vector<c10::IValue> stack = {c10::List<at::Tensor>({bucket}), replay::currentGroup()};
    stack.insert(stack.end(), args.begin(), args.end());
    runCollective(name, std::move(stack));
    int64_t offset = 0;
    for (at::Tensor& t : members) {
      t.copy_(bucket.narrow(0, offset, t.numel()).view_as(t));
      offset += t.numel();
    }
  }
}

// One of DDP's logging maps ("ints_map", "strs_map": what it reports of
// its reducer), or null.
PyRef loggingMap(PyObject* ddp, const char* name) {
  PyRef logger = PyRef::steal(PyObject_GetAttrString(ddp, "logger"));
  PyRef logging = PyRef::steal(logger ? PyObject_CallMethod(logger.get(), "_get_ddp_logging_data", nullptr) : nullptr);
  PyRef map = PyRef::steal(logging ? PyObject_GetAttrString(logging.get(), name) : nullptr);
  PyErr_Clear();
  return map && PyDict_Check(map.get()) ? std::move(map) : PyRef();
}

int64_t loggedInt(PyObject* map, const char* key) {
  PyObject* v = PyDict_GetItemString(map, key);
  return v && PyLong_Check(v) ? PyLong_AsLongLong(v) : -1;
}

// Whether DDP's join context (uneven inputs) is enabled for it.
bool joins(PyObject* ddp) {
  PyRef config = PyRef::steal(PyObject_GetAttrString(ddp, "_join_config"));
  PyRef enable = PyRef::steal(config ? PyObject_GetAttrString(config.get(), "enable") : nullptr);
  PyErr_Clear();
  return !enable || PyObject_IsTrue(enable.get()) != 0;
}

}  // namespace

bool Monitor::isDataParallelForward(PyObject* function) const {
  static PyObject* forward = PyUnicode_InternFromString("forward");
  PyObject* cls = dataParallelClass();
  return cls && PyType_Check(cls) && function == classLookup(reinterpret_cast<PyTypeObject*>(cls), forward);
}

void Monitor::beginDataParallel(Pending& p) {
  PyObject* ddp = p.positionalObjs.empty() ? nullptr : p.positionalObjs[0];
  NodeId node = p.positional.empty() ? kNoNode : p.positional[0];
  if (!ddp || node == kNoNode || dataParallel_) {
    graphBreak("DistributedDataParallel.forward is called in a way magpy does not follow (nested, or unbound)");
    return;
  }
  for (NodeId n : p.positional)
    if (n >= 0) refs_.use(n);
  for (auto& kw : p.keywords)
    if (kw.second >= 0) refs_.use(kw.second);
  if (!dataParallelSupported(p, ddp, node)) return;
  auto read = [&](NodeId owner, PyObject* obj, const char* name, PyRef& value) {
    value = PyRef::steal(PyObject_GetAttrString(obj, name));
    PyErr_Clear();
    NodeId n = value ? loadAttr(owner, obj, PyRef::steal(PyUnicode_FromString(name)).get(), value.get(), p) : kNoNode;
    if (n != kNoNode) refs_.use(n);
    return n;
  };
  DataParallel dp;
  dp.ddp = ddp;
  dp.node = node;
  PyRef module, syncGrads, syncParams, broadcastBuffers, buffers;
  dp.moduleNode = read(node, ddp, "module", module);
  dp.module = module.get();
  read(node, ddp, "require_backward_grad_sync", syncGrads);
  read(node, ddp, "require_forward_param_sync", syncParams);
  read(node, ddp, "broadcast_buffers", broadcastBuffers);
  NodeId bufferList = read(node, ddp, "modules_buffers", buffers);
  if (dp.moduleNode == kNoNode || !module || bufferList == kNoNode || !PyList_Check(buffers.get())) {
    graphBreak("DistributedDataParallel.forward: magpy cannot name its module and buffers");
    return;
  }
  if (syncParams.get() == Py_True && broadcastBuffers.get() == Py_True) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(buffers.get()); ++i) {
      PyObject* b = PyList_GET_ITEM(buffers.get(), i);
      if (!isTensor(b)) {
        graphBreak("DistributedDataParallel.forward broadcasts a buffer that is not a tensor");
        return;
      }
      registerTensor(refs_.read(bufferList, Relation::at(i), b));
      dp.buffers.push_back(tensorOf(b));
    }
  }
  // DDP arms its reducer where grad mode is on and gradients sync (not
  // under no_sync()): the step's backward then reduces every parameter.
  readAutogradMode();
  if (at::GradMode::is_enabled() && syncGrads.get() == Py_True) {
    PyRef params = PyRef::steal(PyObject_CallMethod(module.get(), "parameters", nullptr));
    PyRef list = PyRef::steal(params ? PySequence_List(params.get()) : nullptr);
    PyErr_Clear();
    if (!list) {
      graphBreak("DistributedDataParallel.forward: magpy cannot list its module's parameters");
      return;
    }
    int64_t bytes = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list.get()); ++i) {
      PyObject* param = PyList_GET_ITEM(list.get(), i);
      if (!isTensor(param) || !tensorOf(param).requires_grad()) continue;
      reducedByDataParallel_.insert(tensorOf(param).unsafeGetTensorImpl());
      bytes += int64_t(tensorOf(param).nbytes());
    }
    // The reducer waits for the parameters that required grad when DDP was
    // built: with others now, DDP would not finish its reduction.
    PyRef ints = loggingMap(ddp, "ints_map");
    if (!ints || loggedInt(ints.get(), "num_parameter_tensors") != int64_t(reducedByDataParallel_.size()) ||
        loggedInt(ints.get(), "total_parameter_size_bytes") != bytes) {
      graphBreak("DistributedDataParallel's module has other parameters requiring grad than when DDP was built, "
                 "so DDP would not finish its reduction");
      return;
    }
  }
  p.dataParallel = true;
  p.traceCallees = true;
  p.suppressOps = true;  // DDP's own operators (profiler ranges, buffer copies): the record's stand for them
  dataParallel_ = std::move(dp);
}

// What DDP would do otherwise than the record says is a break. Its
// settings are read as the program's state (guarded).
bool Monitor::dataParallelSupported(Pending& p, PyObject* ddp, NodeId node) {
  auto setting = [&](const char* name) -> PyObject* {
    PyRef value = PyRef::steal(PyObject_GetAttrString(ddp, name));
    PyErr_Clear();
    if (!value) return nullptr;
    NodeId n = loadAttr(node, ddp, PyRef::steal(PyUnicode_FromString(name)).get(), value.get(), p);
    if (n != kNoNode) refs_.use(n);
    return value.get();  // the attribute holds it
  };
  auto isFalse = [](PyObject* v) { return v && PyObject_IsTrue(v) == 0; };
  std::string why;
  if (!isFalse(setting("find_unused_parameters"))) why = "find_unused_parameters=True";
  else if (!isFalse(setting("static_graph"))) why = "static_graph=True";
  else if (!isFalse(setting("gradient_as_bucket_view"))) why = "gradient_as_bucket_view=True";
  else if (!isFalse(setting("device_ids"))) why = "device_ids (a module on an accelerator)";
  else if (!isFalse(setting("_use_replicated_tensor_module"))) why = "a replicated tensor module";
  else if (!isFalse(setting("parameters_to_ignore"))) why = "parameters to ignore";
  else if (PyObject_HasAttrString(ddp, "buffer_hook")) why = "a buffer communication hook";
  else if (joins(ddp)) why = "join (uneven inputs)";
  if (why.empty()) {
    PyObject* group = setting("process_group");
    PyRef strs = loggingMap(ddp, "strs_map");
    if (!group || !replay::isCurrentGroup(processGroupValue(group))) why = "a process group other than the default one";
    else if (!strs) why = "a logger magpy cannot read";
    else if (PyDict_GetItemString(strs.get(), "comm_hook")) why = "a communication hook";
  }
  PyErr_Clear();
  if (why.empty()) return true;
  graphBreak("DistributedDataParallel with " + why + " reduces otherwise than records do (they hold its default: "
             "every parameter's gradient averaged over the default group, buffers broadcast from rank 0)");
  return false;
}

// A frame DDP's forward runs: its module's call is bound as the call of
// ddp.module with DDP's arguments (after the buffers' broadcast); DDP's
// own code runs untraced. Returns the call to bind, or null.
Monitor::Pending* Monitor::dataParallelBinding(Frame& view) {
  DataParallel& dp = *dataParallel_;
  static PyObject* name = PyUnicode_InternFromString("__call__");
  PyObject* call = classLookup(Py_TYPE(dp.module), name);
  if (dp.moduleEntered || view.function() != call || codeArgCount(view.code()) < 1 || view.local(0) != dp.module)
    return nullptr;
  dp.moduleEntered = true;
  const Pending& ddpCall = frames_.back()->pending;
  dataParallelCall_ = std::make_unique<Pending>();
  Pending& p = *dataParallelCall_;
  p.inlined = true;
  NodeId cls = refs_.read(dp.moduleNode, Relation::attr("__class__"), reinterpret_cast<PyObject*>(Py_TYPE(dp.module)));
  p.calleeFunction = refs_.read(cls, Relation::attr("__call__"), call);
  p.positional = ddpCall.positional;
  p.positionalObjs = ddpCall.positionalObjs;
  p.positional[0] = dp.moduleNode;
  p.positionalObjs[0] = dp.module;
  p.keywords = ddpCall.keywords;
  p.keywordObjs = ddpCall.keywordObjs;
  if (!dp.buffers.empty()) {
    ops_->setEnabled(true);
    runBucketed("c10d::broadcast_", dp.buffers, 1, {int64_t(0), int64_t(0), int64_t(-1)});
    ops_->setEnabled(false);
  }
  return &p;
}

bool Monitor::finishDataParallel(Step& s) {
  bool entered = dataParallel_ && dataParallel_->moduleEntered;
  dataParallel_.reset();
  dataParallelCall_.reset();
  NodeId returned = entered ? s.p.calleeReturned(s.outObj(0)) : kNoNode;
  if (returned == kNoNode) {
    graphBreak("DistributedDataParallel.forward returned other than its module's result");
    return false;
  }
  s.out[0] = returned;
  return true;
}

bool Monitor::reducedByDataParallel(const torch::autograd::Node& accumulator, const at::Tensor& leaf) const {
  return accumulator.pre_hooks().empty() && accumulator.post_hooks().size() == 1 &&
         reducedByDataParallel_.count(leaf.unsafeGetTensorImpl()) > 0;
}

// After backward's accumulation: DDP's average of each parameter's
// gradient over the group, in the leaves' order (every rank's record has
// the same), recorded as it runs.
void Monitor::reduceDataParallelGradients() {
  c10::IValue group = replay::currentGroup();
  auto world = replay::groupState("dist_world_size");
  if (group.isNone() || !world || world->i < 1) {
    graphBreak("DistributedDataParallel's gradients: no default process group");
    return;
  }
  std::vector<at::Tensor> grads;
  for (auto& l : backward_.leaves)
    if (reducedByDataParallel_.count(l.variable.unsafeGetTensorImpl())) grads.push_back(l.variable.grad());
  ops_->setEnabled(true);
  runBucketed("c10d::allreduce_", grads, 1.0 / double(world->i), {replay::reduceOpFor(0), int64_t(-1)});
  ops_->setEnabled(false);
  reducedByDataParallel_.clear();
}

}  // namespace magpy::capture

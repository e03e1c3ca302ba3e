#include "capture/monitor.h"
#include "capture/monitor_frames.h"

#include <frameobject.h>

#include <algorithm>

#include "magpy/replay/state.h"
#include "magpy/replay/tensors.h"
#include "magpy/support/error.h"

namespace magpy::capture {
namespace {

thread_local Monitor* tMonitor = nullptr;

int traceTrampoline(PyObject*, PyFrameObject* frame, int what, PyObject* arg) {
  return tMonitor ? tMonitor->onEvent(frame, what, arg) : 0;
}

// Instructions during which Python code may legitimately run (special
// methods, properties, iterators, callees). Frames that start during other
// instructions are finalizers or weakref callbacks: not part of the program.
bool mayCallPython(Op op) {
  switch (op) {
    case Op::LOAD_FAST: case Op::STORE_FAST: case Op::DELETE_FAST: case Op::LOAD_CONST: case Op::POP_TOP:
    case Op::PUSH_NULL: case Op::NOP: case Op::COPY: case Op::SWAP: case Op::KW_NAMES: case Op::LOAD_CLOSURE:
    case Op::LOAD_DEREF: case Op::STORE_DEREF: case Op::JUMP_FORWARD: case Op::JUMP_BACKWARD:
    case Op::JUMP_BACKWARD_NO_INTERRUPT: case Op::RETURN_VALUE: case Op::YIELD_VALUE: case Op::LOAD_GLOBAL:
    case Op::IS_OP: case Op::BUILD_TUPLE: case Op::BUILD_LIST: case Op::BUILD_SLICE: case Op::BUILD_STRING:
    case Op::LIST_TO_TUPLE: case Op::LIST_APPEND: case Op::MAKE_FUNCTION: case Op::PRECALL:
    case Op::POP_JUMP_FORWARD_IF_NONE: case Op::POP_JUMP_FORWARD_IF_NOT_NONE:
    case Op::POP_JUMP_BACKWARD_IF_NONE: case Op::POP_JUMP_BACKWARD_IF_NOT_NONE:
      return false;
    default:
      return true;
  }
}

bool isTruthTest(Op op) {
  switch (op) {
    case Op::POP_JUMP_FORWARD_IF_FALSE: case Op::POP_JUMP_FORWARD_IF_TRUE: case Op::POP_JUMP_BACKWARD_IF_FALSE:
    case Op::POP_JUMP_BACKWARD_IF_TRUE: case Op::JUMP_IF_FALSE_OR_POP: case Op::JUMP_IF_TRUE_OR_POP:
    case Op::UNARY_NOT:
      return true;
    default:
      return false;
  }
}

// Tensor attributes that are metadata: a function of the tensor's guarded
// (or shape-inferred) metadata, never of its contents.
bool isTensorMetadata(const std::string& name) {
  static const char* kNames[] = {"shape", "dtype", "device", "ndim", "is_cuda", "is_sparse", "layout",
                                 "is_quantized", "is_meta", "is_mkldnn",
                                 "is_complex", "is_floating_point", "names", "is_nested"};
  return std::any_of(std::begin(kNames), std::end(kNames), [&](const char* n) { return name == n; });
}

}  // namespace

Monitor::Monitor(const record::AnnotationSet& annotations) : annotations_(annotations) {
  ops_ = std::make_unique<OpRecorder>(*this);
  refs_.onTensor([this](NodeId id) { registerTensor(id); });
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
  callerFrame_ = PyEval_GetFrame();
  readRuntimeState("default_dtype");

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
  PyEval_SetTrace(traceTrampoline, nullptr);
  ops_->setEnabled(true);
  // Calling self binds it as Python would (a module's __call__, a bound method).
  PyObject* result = call.invoke ? call.invoke() : PyObject_Call(call.self, call.args, call.kwargs);
  ops_->setEnabled(false);
  PyEval_SetTrace(nullptr, nullptr);
  tMonitor = previous;

  if (!result) return nullptr;
  if (!done_ && !broken_) graphBreak("the monitored call returned without its frame being traced");
  return result;
}

int Monitor::onEvent(PyFrameObject* frame, int what, PyObject* arg) {
  ops_->setEnabled(false);
  try {
    if (!done_ && !broken_) {
      switch (what) {
        case PyTrace_CALL:
          enterFrame(frame);
          break;
        case PyTrace_OPCODE:
          if (!frames_.empty() && frames_.back()->frame == frame) {
            ShadowFrame& sf = *frames_.back();
            if (sf.pending) finish(sf);
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
  } catch (const std::exception& e) {
    graphBreak(std::string("internal error while monitoring: ") + e.what());
  }
  if (PyErr_Occurred()) PyErr_Clear();  // our own lookups must not leak errors into the program
  bool suppress = !frames_.empty() && frames_.back()->pending && frames_.back()->pending->suppressOps;
  ops_->setEnabled(!done_ && !broken_ && !suppress);
  return 0;
}

void Monitor::graphBreak(const std::string& reason, const std::string& callee) {
  if (broken_) return;
  broken_ = true;
  record::GraphBreak b;
  b.reason = reason;
  b.callee = callee;
  if (!frames_.empty()) {
    const ShadowFrame& sf = *frames_.back();
    b.where = where(sf);
    b.function = sf.name;
    b.opcode = sf.pending ? opName(sf.pending->ins.op) : "";
  }
  breaks_.push_back(std::move(b));
  for (auto& f : frames_) f->view.traceOpcodes(false);
}

void Monitor::dynamic(const std::string& reason) { graphBreak(reason); }

std::string Monitor::where(const ShadowFrame& sf) const {
  int line = sf.pending ? sf.pending->line : sf.view.line();
  return sf.file + ":" + std::to_string(line);
}

// ---------------------------------------------------------------------------
// Nodes and tensors

void Monitor::registerTensor(NodeId id) {
  ShadowNode& n = refs_.node(id);
  if (n.kind != NodeKind::Tensor) return;
  const at::Tensor& t = tensorOf(n.obj);
  tensorNodes_.emplace(t.unsafeGetTensorImpl(), id);
  if (!entryMeta_.count(id)) entryMeta_.emplace(id, replay::metaOf(t));
}

void Monitor::readRuntimeState(const std::string& name) {
  if (runtimeReads_.count(name)) return;
  if (auto value = replay::runtimeState(name)) runtimeReads_.emplace(name, *value);
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

void Monitor::beforeWrite(const at::Tensor& t) {
  auto impl = t.unsafeGetTensorImpl();
  if (!entryContent_.count(impl) && tensorNodes_.count(impl)) entryContent_.emplace(impl, t.detach().clone());
  auto it = tensorNodes_.find(impl);
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

// Iterating or unpacking a tensor takes as many steps as its first
// dimension; when that length came from tensor contents (boxes[scores > t])
// a graph with a fixed count would be wrong on the next call.
bool Monitor::breaksOnContentLength(PyObject* iterated, const char* doing) {
  if (!iterated || !isTensor(iterated) || !ops_->hasDataDependentShape(tensorOf(iterated))) return false;
  graphBreak(std::string(doing) + " a tensor whose length depends on tensor contents");
  return true;
}

// `a is b` on two distinct objects from outside: guards can say two paths
// are one object (alias guards), not that they stay two. Scalars compare
// by value, and modules, functions and enum members are guarded by
// identity, so only other objects are a concern.
bool Monitor::breaksOnDistinctIdentity(NodeId a, NodeId b, PyObject* result) {
  if (result != Py_False && result != Py_True) return false;
  auto identityGuarded = [&](NodeId id) {
    const ShadowNode& n = refs_.node(id);
    return n.kind == NodeKind::Atom || n.kind == NodeKind::Module || n.kind == NodeKind::Function ||
           !enumMemberName(n.obj).empty();
  };
  if (a < 0 || b < 0 || a == b || !refs_.node(a).external || !refs_.node(b).external) return false;
  if (identityGuarded(a) || identityGuarded(b)) return false;
  bool sameObject = refs_.node(a).obj == refs_.node(b).obj;
  if (sameObject) return false;  // one object reached twice: an alias guard holds it
  graphBreak("an identity test (is) between two distinct objects from outside the call");
  return true;
}

// ---------------------------------------------------------------------------
// Frames

NodeId Monitor::moduleNode(PyObject* globals) {
  PyObject* name = PyDict_GetItemString(globals, "__name__");
  if (!name) return kNoNode;
  PyObject* module = PyImport_GetModule(name);
  if (!module) {
    PyErr_Clear();
    return kNoNode;
  }
  NodeId id = refs_.read(kExternal, Relation::module(utf8(name)), module);
  Py_DECREF(module);
  return id;
}

void Monitor::enterFrame(PyFrameObject* frame) {
  Frame view(frame);
  PyFrameObject* back = frameBack(frame);
  bool root = frames_.empty();
  if (root ? back != callerFrame_ : (back != frames_.back()->frame || !frames_.back()->pending ||
                                     !frames_.back()->pending->traceCallees)) {
    if (!root && back && back != frames_.back()->frame && !broken_) guardUntracedCallee(view, Frame(back));
    view.traceOpcodes(false);
    return;
  }
  Pending* caller = root ? nullptr : frames_.back()->pending.get();
  if (caller && !caller->inlined) {
    // An implicit call (a special method, a property, __getattr__) or a
    // callback from native code: an annotated callee is summarized by the
    // instruction's own semantics or its caller's annotation.
    if (PyObject* f = view.function()) {
      const record::FunctionAnnotation* a = annotations_.find(qualifiedName(f));
      if (a) {
        view.traceOpcodes(false);
        if (!a->pure && !a->op) graphBreak(qualifiedName(f) + " is dynamic (annotated pure: false at " + a->origin + ")");
        return;
      }
    }
  }
  PyRef generator = PyRef::steal(frameGenerator(frame));
  if (generator) {
    auto it = suspended_.find(generator.get());
    if (it != suspended_.end()) {  // a generator resumes where it yielded
      it->second->frame = frame;
      it->second->view = view;
      frames_.push_back(std::move(it->second));
      suspended_.erase(it);
      view.traceOpcodes(true);
      return;
    }
  }

  auto sf = std::make_unique<ShadowFrame>();
  sf->frame = frame;
  sf->view = view;
  sf->generator = generator;
  PyCodeObject* code = view.code();
  sf->file = utf8(code->co_filename);
  size_t slash = sf->file.rfind('/');
  if (slash != std::string::npos) sf->file = sf->file.substr(slash + 1);
  sf->name = utf8(codeQualname(code));
  sf->locals.assign(size_t(view.numLocals()), kNoNode);
  sf->globals = moduleNode(view.globals());
  if (sf->globals == kNoNode) {
    frames_.push_back(std::move(sf));
    graphBreak("code without a module (exec or eval) is not captured");
    return;
  }

  bool ok;
  if (root) {
    ok = bindRootFrame(*sf);
  } else if (generator && unstarted_.count(generator.get())) {
    auto call = std::move(unstarted_[generator.get()]);
    unstarted_.erase(generator.get());
    ok = bindFrame(*sf, *call);
  } else {
    ok = bindFrame(*sf, *frames_.back()->pending);
  }
  frames_.push_back(std::move(sf));
  if (!ok) return;
  view.traceOpcodes(true);
}

// Code that runs untraced under a summarized call (a standard layer's
// forward, an annotated Python function) calls Python functions found by
// name: the record holds only while the same names find the same
// functions (F.relu not replaced, no Conv2d._conv_forward patched on the
// class or the instance). Each callee gets an identity guard on the path
// its caller finds it by; one that cannot be named is a graph break.
void Monitor::guardUntracedCallee(const Frame& callee, const Frame& caller) {
  PyObject* f = callee.function();
  if (!f || !PyFunction_Check(f) || guardedCallees_.count({caller.globals(), f})) return;
  if (fixedByCaller(caller, f, callee.code())) return;
  if (refs_.find(f) != kNoNode) return;  // traced code read it (a callback it passed): guarded there
  // A method of the first argument's class, found through the instance
  // (the first of *args for a wrapper such as functools.wraps makes).
  PyCodeObject* code = callee.code();
  PyObject* self = codeArgCount(code) > 0 ? callee.local(0) : nullptr;
  if (!self && codeHasVarArgs(code)) {
    PyObject* rest = callee.local(codeKwOnlyCount(code));
    self = rest && PyTuple_Check(rest) && PyTuple_GET_SIZE(rest) > 0 ? PyTuple_GET_ITEM(rest, 0) : nullptr;
  }
  NodeId selfNode = self ? refs_.find(self) : kNoNode;
  PyObject* name = reinterpret_cast<PyFunctionObject*>(f)->func_name;
  bool method = self && _PyType_Lookup(Py_TYPE(self), name) == f;
  // A tensor's class is torch.Tensor (its guard rules out subclasses).
  if (method && isTensor(self) && readQualifiedPathTo(f)) return;
  if (selfNode != kNoNode && !isTensor(self) && readClassPathTo(f, selfNode)) return;
  // A special method of a class of torch or of Python's standard library,
  // run by the interpreter (torch._VF's __getattr__, a backend flag's
  // __get__, typing.List's __getitem__): part of the platform, not found
  // by name.
  if (method && utf8(name).compare(0, 2, "__") == 0 && platformClass(Py_TYPE(self))) return;
  if (!readCallerGlobalTo(f, caller.globals())) {
    PyObject* outer = caller.function();
    graphBreak((outer ? qualifiedName(outer) : std::string("untraced code")) + " (summarized, not traced) calls " +
               qualifiedName(f) + ", which magpy cannot name to guard that it stays the same function");
    return;
  }
  guardedCallees_.emplace(std::make_pair(caller.globals(), f), PyRef::borrow(f));
}

// Whether the caller's own code fixes f: a nested def or comprehension it
// makes, or a function its closure holds (a decorator's wrapped function).
bool Monitor::fixedByCaller(const Frame& caller, PyObject* f, PyCodeObject* code) {
  if (codeDefines(caller.code(), code)) return true;
  PyObject* outer = caller.function();
  PyObject* closure = outer && PyFunction_Check(outer) ? PyFunction_GET_CLOSURE(outer) : nullptr;
  for (Py_ssize_t i = 0; closure && i < PyTuple_GET_SIZE(closure); ++i)
    if (PyCell_GET(PyTuple_GET_ITEM(closure, i)) == f) return true;
  return false;
}

// Reads f as a method of the object's class (under any name the class
// finds it by); the instance's __dict__ must not shadow it.
bool Monitor::readClassPathTo(PyObject* f, NodeId object) {
  PyObject* obj = refs_.node(object).obj;
  PyTypeObject* type = Py_TYPE(obj);
  auto found = [&](PyObject* name) {
    std::string n = utf8(name);
    NodeId cls = refs_.read(object, Relation::attr("__class__"), reinterpret_cast<PyObject*>(type));
    refs_.read(cls, Relation::attr(n), f);
    if (n.compare(0, 2, "__") != 0) classMethods_.insert({object, n});
    return true;
  };
  PyObject* ownName = reinterpret_cast<PyFunctionObject*>(f)->func_name;
  if (_PyType_Lookup(type, ownName) == f) return found(ownName);
  // Stored under another name (a lambda patched onto the class).
  PyObject* mro = type->tp_mro;
  for (Py_ssize_t i = 0; mro && i < PyTuple_GET_SIZE(mro); ++i) {
    PyObject* dict = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i))->tp_dict;
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (dict && PyDict_Next(dict, &pos, &k, &v))
      if (v == f && PyUnicode_Check(k) && _PyType_Lookup(type, k) == f) return found(k);
  }
  return false;
}

NodeId Monitor::moduleObjectNode(PyObject* module) {
  const char* name = PyModule_GetName(module);
  if (!name || !*name) {
    PyErr_Clear();
    return kNoNode;
  }
  return refs_.read(kExternal, Relation::module(name), module);
}

// Reads f by its qualified name from its own module (torch.Tensor.split as
// torch._tensor.Tensor.split).
bool Monitor::readQualifiedPathTo(PyObject* f) {
  PyRef moduleName = PyRef::steal(PyObject_GetAttrString(f, "__module__"));
  PyRef mod = PyRef::steal(moduleName && PyUnicode_Check(moduleName.get()) ? PyImport_GetModule(moduleName.get()) : nullptr);
  PyErr_Clear();
  std::string qual = attrString(f, "__qualname__");
  if (!mod || !PyModule_Check(mod.get()) || qual.find('<') != std::string::npos) return false;
  std::vector<std::pair<std::string, PyRef>> chain;
  PyObject* cur = mod.get();
  for (size_t start = 0; cur;) {
    size_t dot = qual.find('.', start);
    chain.emplace_back(qual.substr(start, dot == std::string::npos ? std::string::npos : dot - start), PyRef{});
    chain.back().second = PyRef::steal(PyObject_GetAttrString(cur, chain.back().first.c_str()));
    cur = chain.back().second.get();
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  PyErr_Clear();
  NodeId node = cur == f ? moduleObjectNode(mod.get()) : kNoNode;
  if (node == kNoNode) return false;
  for (auto& [part, obj] : chain) node = refs_.read(node, Relation::attr(part), obj.get());
  return true;
}

// Reads f the way code with these globals finds a function by name: a
// global of its own (`_verify_batch_size`), else an attribute of a module
// it imported (`F.relu`, also when F.relu was replaced) or of one of that
// module's submodules (`torch.jit.annotate`).
bool Monitor::readCallerGlobalTo(PyObject* f, PyObject* callerGlobals) {
  PyObject *k, *v;
  Py_ssize_t pos = 0;
  while (PyDict_Next(callerGlobals, &pos, &k, &v)) {
    NodeId home = v == f ? moduleNode(callerGlobals) : kNoNode;
    if (home == kNoNode) continue;
    refs_.read(home, Relation::attr(utf8(k)), f);
    return true;
  }
  // A module global (F) holds it, or one of that module's own submodules
  // (torch.jit for torch.jit.annotate).
  std::vector<PyObject*> modules;
  pos = 0;
  while (PyDict_Next(callerGlobals, &pos, &k, &v))
    if (PyModule_Check(v)) modules.push_back(v);
  for (size_t m = 0, direct = modules.size(); m < modules.size(); ++m) {
    PyObject *name, *item;
    Py_ssize_t at = 0;
    const char* own = m < direct ? PyModule_GetName(modules[m]) : nullptr;
    if (!own) PyErr_Clear();
    std::string prefix = own ? own + std::string(".") : "";
    while (PyDict_Next(PyModule_GetDict(modules[m]), &at, &name, &item)) {
      if (!prefix.empty() && PyModule_Check(item)) {
        const char* sub = PyModule_GetName(item);
        if (sub && std::string(sub).compare(0, prefix.size(), prefix) == 0) modules.push_back(item);
        PyErr_Clear();
      }
      NodeId owner = item == f ? moduleObjectNode(modules[m]) : kNoNode;
      if (owner == kNoNode) continue;
      refs_.read(owner, Relation::attr(utf8(name)), f);
      return true;
    }
  }
  return false;
}

bool Monitor::bindFrame(ShadowFrame& sf, Pending& caller) {
  if (caller.inlined) {
    bindParameters(sf, caller.calleeFunction, caller.positional, caller.keywords);
  } else {
    // An implicit call (a special method, a property, a callback from
    // native code): the callee's arguments are the instruction's inputs,
    // matched by identity; anything else is a constant of the callee.
    if (PyObject* f = sf.view.function()) {
      sf.function = refs_.find(f);
      if (sf.function == kNoNode) sf.function = newNode(f);
    }
    for (int i = 0; i < sf.view.numLocals(); ++i) {
      PyObject* v = sf.view.local(i);
      if (!v || sf.view.localKind(i) != LocalKind::Plain) continue;
      NodeId match = kNoNode;
      for (size_t k = 0; k < caller.inputObjs.size(); ++k)
        if (caller.inputObjs[k].get() == v) match = caller.inputs[k];
      for (size_t k = 0; k < caller.positionalObjs.size(); ++k)
        if (caller.positionalObjs[k] == v) match = caller.positional[k];
      sf.locals[size_t(i)] = match != kNoNode ? match : newNode(v);
    }
  }
  bindCells(sf);
  return verifyLocals(sf);
}

bool Monitor::bindRootFrame(ShadowFrame& sf) {
  NodeId self = rootSelf_;
  // The function the root frame runs, as reached from self.
  NodeId function = self;
  if (call_->function != call_->self) {
    if (PyMethod_Check(call_->self)) {
      function = refs_.read(self, Relation::attr("__func__"), PyMethod_GET_FUNCTION(call_->self));
    } else {
      PyObject* cls = reinterpret_cast<PyObject*>(Py_TYPE(call_->self));
      NodeId clsNode = refs_.read(self, Relation::attr("__class__"), cls);
      function = refs_.read(clsNode, Relation::attr("__call__"), call_->function);
    }
  }
  std::vector<NodeId> positional;
  if (call_->selfIsFirstArg)
    positional.push_back(PyMethod_Check(call_->self)
                             ? refs_.read(self, Relation::attr("__self__"), PyMethod_GET_SELF(call_->self))
                             : self);
  positional.insert(positional.end(), rootArgs_.begin(), rootArgs_.end());
  bindParameters(sf, function, positional, rootKwargs_);
  bindCells(sf);
  return verifyLocals(sf);
}

// Binds a frame's parameters from its call's arguments as CPython does:
// positional, keywords, *args, **kwargs, then defaults.
void Monitor::bindParameters(ShadowFrame& sf, NodeId function, const std::vector<NodeId>& positional,
                             const std::vector<std::pair<std::string, NodeId>>& keywords) {
  Frame& v = sf.view;
  PyCodeObject* code = v.code();
  sf.function = function;
  int argc = codeArgCount(code), kwonly = codeKwOnlyCount(code);
  int varargs = codeHasVarArgs(code) ? argc + kwonly : -1;
  int varkw = codeHasVarKeywords(code) ? argc + kwonly + (varargs >= 0) : -1;
  std::vector<NodeId> extra;
  for (size_t i = 0; i < positional.size(); ++i) {
    if (int(i) < argc) sf.locals[i] = positional[i];
    else extra.push_back(positional[i]);
  }
  std::vector<std::pair<std::string, NodeId>> extraKw;
  for (auto& [name, node] : keywords) {
    int slot = -1;
    for (int i = 0; i < argc + kwonly; ++i)
      if (utf8(codeLocalName(code, i)) == name) slot = i;
    if (slot >= 0) sf.locals[size_t(slot)] = node;
    else extraKw.push_back({name, node});
  }
  if (varargs >= 0 && v.local(varargs)) {
    NodeId tuple = refs_.nodeFor(v.local(varargs));
    auto& refs = refs_.node(tuple).versions.back().refs;
    for (size_t i = 0; i < refs.size() && i < extra.size(); ++i) refs[i].target = extra[i];
    sf.locals[size_t(varargs)] = tuple;
  }
  if (varkw >= 0 && v.local(varkw)) {
    NodeId dict = refs_.nodeFor(v.local(varkw));
    for (auto& e : refs_.node(dict).versions.back().refs)
      for (auto& [name, node] : extraKw)
        if (e.rel.key == record::Atom::string(name)) e.target = node;
    sf.locals[size_t(varkw)] = dict;
  }
  // Parameters left unbound take their defaults from the function.
  PyObject* f = function != kNoNode ? refs_.node(function).obj : nullptr;
  if (!f || !PyFunction_Check(f)) return;
  for (int i = 0; i < argc + kwonly; ++i) {
    if (sf.locals[size_t(i)] != kNoNode || !v.local(i)) continue;
    if (i < argc) {
      PyObject* defaults = PyFunction_GET_DEFAULTS(f);
      if (!defaults) continue;
      int index = i - (argc - int(PyTuple_GET_SIZE(defaults)));
      if (index < 0) continue;
      NodeId d = refs_.read(function, Relation::attr("__defaults__"), defaults);
      sf.locals[size_t(i)] = refs_.read(d, Relation::at(index), PyTuple_GET_ITEM(defaults, index));
    } else {
      PyObject* kwdefaults = PyFunction_GET_KW_DEFAULTS(f);
      std::string name = utf8(codeLocalName(code, i));
      PyObject* value = kwdefaults ? PyDict_GetItemString(kwdefaults, name.c_str()) : nullptr;
      if (!value) continue;
      NodeId d = refs_.read(function, Relation::attr("__kwdefaults__"), kwdefaults);
      sf.locals[size_t(i)] = refs_.read(d, Relation::keyed(name), value);
    }
  }
}

// Cells of the frame hold their initial value; free variables are the
// function's closure cells.
void Monitor::bindCells(ShadowFrame& sf) {
  Frame& v = sf.view;
  int n = v.numLocals();
  PyObject* f = sf.function != kNoNode ? refs_.node(sf.function).obj : nullptr;
  PyObject* closure = f && PyFunction_Check(f) ? PyFunction_GET_CLOSURE(f) : nullptr;
  int firstFree = n - int(PyCode_GetNumFree(v.code()));
  for (int i = 0; i < n; ++i) {
    PyObject* obj = v.local(i);
    if (!obj) continue;
    switch (v.localKind(i)) {
      case LocalKind::Cell: {
        NodeId c = newNode(obj);
        NodeId content = sf.locals[size_t(i)];
        if (content != kNoNode && content != c) refs_.write(c, Relation::attr("cell_contents"), content);
        sf.locals[size_t(i)] = c;
        break;
      }
      case LocalKind::Free:
        if (closure) {
          NodeId t = refs_.read(sf.function, Relation::attr("__closure__"), closure);
          sf.locals[size_t(i)] = refs_.read(t, Relation::at(i - firstFree), obj);
        } else {
          sf.locals[size_t(i)] = newNode(obj);
        }
        break;
      case LocalKind::Plain:
        if (sf.locals[size_t(i)] == kNoNode) sf.locals[size_t(i)] = newNode(obj);
        break;
    }
  }
}

// The shadow must describe the real frame: a mismatch is a modelling error,
// and guessing would risk a stale record.
bool Monitor::verifyLocals(ShadowFrame& sf) {
  for (int i = 0; i < sf.view.numLocals(); ++i) {
    PyObject* real = sf.view.local(i);
    NodeId s = sf.locals[size_t(i)];
    if (!real || s == kNoNode) continue;
    const ShadowNode& node = refs_.node(s);
    bool same = node.kind == NodeKind::Atom ? (atomOf(real) && *atomOf(real) == node.atom && isAtom(real)) : node.obj == real;
    if (!same) {
      graphBreak("internal: the arguments of " + sf.name + " could not be matched (" +
                 utf8(codeLocalName(sf.view.code(), i)) + ")");
      return false;
    }
  }
  return true;
}

void Monitor::leaveFrame(ShadowFrame& sf, PyObject* result) {
  if (!result) {
    graphBreak("an exception left " + sf.name + "; control flow through exceptions is not captured");
    return;
  }
  if (!sf.pending || (sf.pending->ins.op != Op::RETURN_VALUE && sf.pending->ins.op != Op::YIELD_VALUE) ||
      sf.pending->inputObjs.empty() || sf.pending->inputObjs[0].get() != result) {
    graphBreak("internal: " + sf.name + " returned without a traced RETURN_VALUE");
    return;
  }
  NodeId value = sf.pending->inputs[0];
  bool yielded = sf.pending->ins.op == Op::YIELD_VALUE;
  std::unique_ptr<ShadowFrame> owned = std::move(frames_.back());
  frames_.pop_back();
  if (yielded) {
    // Keep the frame's shadow for when the generator resumes; YIELD_VALUE
    // finishes then (its output is the value sent in).
    PyObject* gen = owned->generator.get();
    if (!gen) {
      graphBreak("internal: a frame yielded without a generator");
      return;
    }
    suspended_[gen] = std::move(owned);
  }
  if (frames_.empty()) {
    result_ = value;
    done_ = true;
    return;
  }
  Pending* p = frames_.back()->pending.get();
  if (p) {
    p->calleeResult = value;
    p->calleeResultObj = result;
  }
}

// ---------------------------------------------------------------------------
// Instructions

NodeId Monitor::slotNode(ShadowFrame& sf, int index) {
  if (index < 0 || size_t(index) >= sf.stack.size()) return kNoNode;
  return sf.stack[size_t(index)];
}

void Monitor::begin(ShadowFrame& sf, const Instruction& ins) {
  auto p = std::make_unique<Pending>();
  p->ins = ins;
  p->line = sf.view.line();
  int depth = sf.view.stackDepth();
  if (int(sf.stack.size()) != depth) {
    graphBreak("internal: the shadow stack has " + std::to_string(sf.stack.size()) + " values, the frame " +
               std::to_string(depth) + " (before " + opName(ins.op) + ")");
    return;
  }
  int n = std::min(stackInputs(ins), depth);
  p->base = depth - n;
  for (int i = p->base; i < depth; ++i) {
    p->inputs.push_back(sf.stack[size_t(i)]);
    p->inputObjs.push_back(PyRef::borrow(sf.view.stack(i)));
  }
  p->traceCallees = mayCallPython(ins.op);
  ops_->setLocation(sf.file + ":" + std::to_string(p->line));
  sf.pending = std::move(p);
  Pending& pend = *sf.pending;

  switch (ins.op) {
    case Op::CALL:
    case Op::CALL_FUNCTION_EX:
      beginCall(sf, pend);
      break;
    case Op::KW_NAMES:
      sf.kwnames = codeConst(sf.view.code(), ins.arg);
      break;
    case Op::MATCH_MAPPING: case Op::MATCH_SEQUENCE: case Op::MATCH_KEYS: case Op::MATCH_CLASS:
      graphBreak("structural pattern matching (match/case) is not captured yet");
      break;
    case Op::PUSH_EXC_INFO: case Op::CHECK_EXC_MATCH: case Op::CHECK_EG_MATCH: case Op::WITH_EXCEPT_START:
    case Op::POP_EXCEPT: case Op::RERAISE: case Op::RAISE_VARARGS: case Op::PREP_RERAISE_STAR:
      graphBreak(std::string(opName(ins.op)) + ": exception handling is not captured");
      break;
    case Op::GET_AITER: case Op::GET_ANEXT: case Op::BEFORE_ASYNC_WITH: case Op::END_ASYNC_FOR:
    case Op::GET_AWAITABLE: case Op::ASYNC_GEN_WRAP: case Op::SEND: case Op::GET_YIELD_FROM_ITER:
      graphBreak(std::string(opName(ins.op)) + ": coroutines and 'yield from' are not captured yet");
      break;
    case Op::LOAD_NAME: case Op::STORE_NAME: case Op::DELETE_NAME: case Op::LOAD_BUILD_CLASS:
    case Op::LOAD_CLASSDEREF: case Op::IMPORT_STAR: case Op::SETUP_ANNOTATIONS: case Op::PRINT_EXPR:
      graphBreak(std::string(opName(ins.op)) + ": class bodies and module-level code are not captured");
      break;
    case Op::UNKNOWN:
      graphBreak("an instruction this magpy does not know");
      break;
    default:
      break;
  }
  if (broken_) return;

  // Reading a value computed from tensor contents to decide control flow.
  if (isTruthTest(ins.op) && !pend.inputs.empty() && pend.inputs[0] >= 0 && refs_.node(pend.inputs[0]).dataDependent)
    graphBreak("a branch depends on a value computed from tensor contents");
  if (isTruthTest(ins.op) && !pend.inputs.empty() && externalOpaque(pend.inputs[0])) {
    PyTypeObject* t = Py_TYPE(pend.inputObjs[0].get());
    bool nativeTruth = (t->tp_as_number && t->tp_as_number->nb_bool) ||
                       (t->tp_as_sequence && t->tp_as_sequence->sq_length) ||
                       (t->tp_as_mapping && t->tp_as_mapping->mp_length);
    if (nativeTruth)
      graphBreak(std::string("the truth of a ") + t->tp_name + " object is computed by native code from contents magpy cannot guard");
  }
}

void Monitor::finish(ShadowFrame& sf) {
  std::unique_ptr<Pending> owned = std::move(sf.pending);
  Pending& p = *owned;
  int depth = sf.view.stackDepth();
  if (depth < p.base) {
    graphBreak(std::string("internal: the stack shrank below the inputs of ") + opName(p.ins.op));
    return;
  }
  std::vector<NodeId> out(size_t(depth - p.base), kNoNode);
  if (!finishInstruction(sf, p, out) || broken_) {
    if (!broken_) graphBreak(std::string(opName(p.ins.op)) + " is not supported in this position");
    return;
  }
  sf.stack.resize(size_t(p.base));
  sf.stackObjs.resize(size_t(p.base));
  for (size_t k = 0; k < out.size(); ++k) {
    if (out[k] >= 0) refs_.use(out[k]);
    PyObject* real = sf.view.stack(p.base + int(k));
    if (out[k] == kNoNode) {
      graphBreak(std::string("internal: ") + opName(p.ins.op) + " left a value magpy did not follow");
      return;
    }
    sf.stack.push_back(out[k]);
    sf.stackObjs.push_back(real);
  }
  // Values below the inputs must be untouched.
  for (int i = 0; i < p.base; ++i)
    if (sf.stackObjs[size_t(i)] != sf.view.stack(i)) {
      graphBreak(std::string("internal: ") + opName(p.ins.op) + " changed the stack below its inputs");
      return;
    }
}

NodeId Monitor::iterationValue(Pending& p, NodeId iterator, PyObject* value) {
  if (p.calleeResult != kNoNode && p.calleeResultObj == value) return p.calleeResult;  // a generator yielded it
  auto it = sequenceIterators_.find(iterator);
  if (it != sequenceIterators_.end()) {
    auto& [sequence, next] = it->second;
    return refs_.read(sequence, Relation::at(next++), value);
  }
  return newNode(value);
}

NodeId Monitor::loadAttr(NodeId owner, PyObject* ownerObj, PyObject* name, PyObject* value, Pending& p) {
  if (p.calleeResult != kNoNode && p.calleeResultObj == value) return p.calleeResult;  // a property computed it
  std::string attr = utf8(name);
  if (PyMethod_Check(value) && PyMethod_GET_SELF(value) == ownerObj) {
    // obj.method: a new bound method of a function found on obj's class.
    // Its parts are what the program depends on, not the bound object.
    PyObject* cls = reinterpret_cast<PyObject*>(Py_TYPE(ownerObj));
    PyObject* dict = PyObject_GenericGetDict(ownerObj, nullptr);
    bool hasDict = dict && PyDict_Check(dict);
    bool onInstance = hasDict && PyDict_GetItem(dict, name);
    Py_XDECREF(dict);
    PyErr_Clear();
    if (!onInstance) {
      if (hasDict) classMethods_.insert({owner, attr});
      NodeId c = refs_.read(owner, Relation::attr("__class__"), cls);
      NodeId f = refs_.read(c, Relation::attr(attr), PyMethod_GET_FUNCTION(value));
      NodeId m = newNode(value);
      refs_.write(m, Relation::attr("__func__"), f);
      refs_.write(m, Relation::attr("__self__"), owner);
      return m;
    }
  }
  const ShadowNode& o = refs_.node(owner);
  switch (o.kind) {
    case NodeKind::Tensor:
      if (attr == "requires_grad" || attr == "is_leaf" || attr == "grad_fn") {
        readAutogradState(owner, attr);
        return newNode(value);
      }
      if (isTensorMetadata(attr)) {
        if ((attr == "shape") && ops_->hasDataDependentShape(tensorOf(ownerObj)))
          graphBreak("the shape of a tensor whose size depends on tensor contents is read");
        return newNode(value);
      }
      if (isTensor(value) && ops_->valueOf(tensorOf(value)) >= 0) return newNode(value);  // made by an op (x.T)
      if (!isTensor(value) && PyCallable_Check(value)) return newNode(value);  // a method: fixed by the class
      break;
    case NodeKind::Atom:
    case NodeKind::Tuple:
    case NodeKind::List:
    case NodeKind::Dict:
      return newNode(value);  // methods and attributes of builtin values are fixed
    default:
      break;
  }
  NodeId id = refs_.read(owner, Relation::attr(attr), value);
  registerTensor(id);
  return id;
}

// A tensor's autograd state. For a tensor the run made or wrote it follows
// from the grad mode (guarded once read) and the inputs' requires_grad
// (guarded with their metadata); for one from outside, requires_grad is
// guarded, but whether one that requires grad is a leaf is not.
void Monitor::readAutogradState(NodeId tensor, const std::string& attr) {
  const ShadowNode& n = refs_.node(tensor);
  if (!n.external || n.versions.size() > 1) {  // made or written in place by the run
    readRuntimeState("grad_enabled");
  } else if (attr != "requires_grad" && tensorOf(n.obj).requires_grad()) {
    graphBreak("the program reads " + attr + " of a tensor from outside the call that requires grad; " +
               "whether it is a leaf is not guarded");
  }
}

bool Monitor::finishInstruction(ShadowFrame& sf, Pending& p, std::vector<NodeId>& out) {
  const Instruction& ins = p.ins;
  PyCodeObject* code = sf.view.code();
  auto outObj = [&](size_t k) { return sf.view.stack(p.base + int(k)); };
  auto in = [&](size_t k) { return p.inputs[k]; };
  auto inObj = [&](size_t k) { return p.inputObjs[k].get(); };
  auto derived = [&](PyObject* v) {
    NodeId id = newNode(v);
    for (NodeId i : p.inputs)
      if (i >= 0 && refs_.node(i).dataDependent && refs_.node(id).kind == NodeKind::Atom) refs_.node(id).dataDependent = true;
    return id;
  };
  // An operator-like instruction: the result of a traced special method, an
  // operator on plain values or tensors, or something we cannot follow.
  auto operatorResult = [&](PyObject* v) -> NodeId {
    if (p.calleeResult != kNoNode && p.calleeResultObj == v) return p.calleeResult;
    for (size_t k = 0; k < p.inputObjs.size(); ++k)
      if (p.inputObjs[k] && externalOpaque(in(k))) {  // a set, or a dict keyed by objects, included
        graphBreak(std::string(opName(ins.op)) + " on a " + Py_TYPE(inObj(k))->tp_name +
                   " object runs native code on contents magpy cannot guard");
        return kNoNode;
      }
    // Operators of user classes run in Python (traced); those of plain
    // values and followed containers depend only on guarded inputs.
    return derived(v);
  };

  switch (ins.op) {
    case Op::NOP: case Op::RESUME: case Op::CACHE: case Op::EXTENDED_ARG: case Op::JUMP_FORWARD:
    case Op::JUMP_BACKWARD: case Op::JUMP_BACKWARD_NO_INTERRUPT: case Op::POP_TOP: case Op::KW_NAMES:
    case Op::RETURN_VALUE:
      return true;
    case Op::PUSH_NULL:
      out[0] = kNull;
      return true;
    case Op::LOAD_CONST:
      out[0] = newNode(outObj(0));
      return true;
    case Op::LOAD_FAST:
    case Op::LOAD_CLOSURE: {
      NodeId s = sf.locals[size_t(ins.arg)];
      if (s == kNoNode) s = newNode(outObj(0));
      out[0] = s;
      return true;
    }
    case Op::STORE_FAST:
      sf.locals[size_t(ins.arg)] = in(0);
      return true;
    case Op::DELETE_FAST:
      sf.locals[size_t(ins.arg)] = kNoNode;
      return true;
    case Op::COPY:
      out[0] = slotNode(sf, int(sf.stack.size()) - ins.arg);
      return true;
    case Op::SWAP: {
      for (size_t k = 0; k < out.size(); ++k) out[k] = in(k);
      std::swap(out.front(), out.back());
      return true;
    }
    case Op::LOAD_GLOBAL: {
      PyObject* name = instructionName(code, ins);
      PyObject* value = outObj(out.size() - 1);
      if (loadGlobalPushesNull(ins)) out[0] = kNull;
      if (PyDict_GetItem(sf.view.globals(), name)) {
        out.back() = refs_.read(sf.globals, Relation::attr(utf8(name)), value);
      } else {
        // A builtin, found because the module has no global of that name.
        absent_.push_back({sf.globals, Relation::attr(utf8(name))});
        NodeId builtins = refs_.read(kExternal, Relation::module("builtins"),
                                     PyImport_AddModule("builtins"));
        out.back() = refs_.read(builtins, Relation::attr(utf8(name)), value);
      }
      registerTensor(out.back());
      return true;
    }
    case Op::STORE_GLOBAL:
      refs_.write(sf.globals, Relation::attr(utf8(instructionName(code, ins))), in(0));
      return true;
    case Op::DELETE_GLOBAL:
      refs_.remove(sf.globals, Relation::attr(utf8(instructionName(code, ins))));
      return true;
    case Op::LOAD_DEREF: {
      NodeId cell = sf.locals[size_t(ins.arg)];
      out[0] = cell == kNoNode ? newNode(outObj(0)) : refs_.read(cell, Relation::attr("cell_contents"), outObj(0));
      registerTensor(out[0]);
      return true;
    }
    case Op::STORE_DEREF: {
      NodeId cell = sf.locals[size_t(ins.arg)];
      if (cell == kNoNode) return false;
      refs_.write(cell, Relation::attr("cell_contents"), in(0));
      return true;
    }
    case Op::DELETE_DEREF: {
      NodeId cell = sf.locals[size_t(ins.arg)];
      if (cell != kNoNode) refs_.remove(cell, Relation::attr("cell_contents"));
      return true;
    }
    case Op::LOAD_ATTR:
      out[0] = loadAttr(in(0), inObj(0), instructionName(code, ins), outObj(0), p);
      return true;
    case Op::LOAD_METHOD: {
      PyObject* name = instructionName(code, ins);
      if (outObj(0)) {
        // The method came from the object's class: out = [function, self].
        PyObject* cls = reinterpret_cast<PyObject*>(Py_TYPE(inObj(0)));
        const ShadowNode& o = refs_.node(in(0));
        if (o.kind == NodeKind::Object || o.kind == NodeKind::Module || o.kind == NodeKind::Function) {
          NodeId c = refs_.read(in(0), Relation::attr("__class__"), cls);
          out[0] = refs_.read(c, Relation::attr(utf8(name)), outObj(0));
        } else {
          out[0] = newNode(outObj(0));  // a method of a builtin type: fixed
        }
        out[1] = in(0);
      } else {
        out[0] = kNull;
        out[1] = loadAttr(in(0), inObj(0), name, outObj(1), p);
      }
      return true;
    }
    case Op::STORE_ATTR: {
      // value is below the owner on the stack
      if (refs_.node(in(1)).kind == NodeKind::Tensor) {
        graphBreak("writing an attribute of a tensor (" + utf8(instructionName(code, ins)) + ") is not captured");
        return false;
      }
      if (p.calleeResult != kNoNode) return true;  // a traced __setattr__ did the write
      refs_.write(in(1), Relation::attr(utf8(instructionName(code, ins))), in(0));
      return true;
    }
    case Op::DELETE_ATTR:
      if (p.calleeResult == kNoNode) refs_.remove(in(0), Relation::attr(utf8(instructionName(code, ins))));
      return true;
    case Op::BINARY_SUBSCR: {
      PyObject *container = inObj(0), *key = inObj(1), *value = outObj(0);
      NodeKind kind = refs_.node(in(0)).kind;
      if (p.calleeResult != kNoNode && p.calleeResultObj == value) {
        out[0] = p.calleeResult;
      } else if ((kind == NodeKind::List || kind == NodeKind::Tuple) && PyLong_CheckExact(key)) {
        Py_ssize_t i = PyLong_AsSsize_t(key);
        if (i < 0) i += PySequence_Size(container);
        out[0] = refs_.read(in(0), Relation::at(i), value);
      } else if (auto k = kind == NodeKind::Dict ? dictKey(key) : std::nullopt) {
        out[0] = refs_.read(in(0), Relation::keyed(*k), value);
      } else {
        out[0] = operatorResult(value);
        if (out[0] == kNoNode) return false;
      }
      registerTensor(out[0]);
      return true;
    }
    case Op::STORE_SUBSCR: {
      // inputs: value, container, key
      PyObject* key = inObj(2);
      NodeKind kind = refs_.node(in(1)).kind;
      if (p.calleeResult != kNoNode) return true;
      if (kind == NodeKind::Tensor) return true;  // the ATen ops recorded the write
      if (kind == NodeKind::List && PyLong_CheckExact(key)) {
        Py_ssize_t i = PyLong_AsSsize_t(key);
        if (i < 0) i += PyList_GET_SIZE(inObj(1));
        refs_.write(in(1), Relation::at(i), in(0));
        return true;
      }
      if (auto k = kind == NodeKind::Dict ? dictKey(key) : std::nullopt) {
        refs_.write(in(1), Relation::keyed(*k), in(0));
        return true;
      }
      if (kind == NodeKind::List || kind == NodeKind::Dict) {
        refs_.changedInPlace(in(1));
        return true;
      }
      graphBreak(std::string("item assignment on a ") + Py_TYPE(inObj(1))->tp_name + " object is not captured");
      return false;
    }
    case Op::DELETE_SUBSCR: {
      NodeKind kind = refs_.node(in(0)).kind;
      if (p.calleeResult != kNoNode) return true;
      if (kind == NodeKind::List || kind == NodeKind::Dict) {
        refs_.changedInPlace(in(0));
        return true;
      }
      graphBreak(std::string("item deletion on a ") + Py_TYPE(inObj(0))->tp_name + " object is not captured");
      return false;
    }
    case Op::BINARY_OP: {
      PyObject* v = outObj(0);
      if (binaryOpIsInPlace(ins.arg) && v == inObj(0) && !isAtom(v)) {
        // a += b on a mutable object: the object changed (lists) or the ATen
        // op recorded the write (tensors).
        if (refs_.node(in(0)).kind == NodeKind::List) refs_.changedInPlace(in(0));
        out[0] = in(0);
        return true;
      }
      out[0] = operatorResult(v);
      return out[0] != kNoNode;
    }
    case Op::UNARY_POSITIVE: case Op::UNARY_NEGATIVE: case Op::UNARY_NOT: case Op::UNARY_INVERT:
    case Op::COMPARE_OP: case Op::CONTAINS_OP:
      out[0] = operatorResult(outObj(0));
      return out[0] != kNoNode;
    case Op::IS_OP:
      if (breaksOnDistinctIdentity(in(0), in(1), outObj(0))) return false;
      out[0] = newNode(outObj(0));
      return true;
    case Op::GET_ITER: {
      if (breaksOnContentLength(inObj(0), "iterating over")) return false;
      PyObject* v = outObj(0);
      if (v == inObj(0)) {
        out[0] = in(0);
        return true;
      }
      if (externalOpaque(in(0)) && p.calleeResult == kNoNode) {
        graphBreak(std::string("iterating over a ") + Py_TYPE(inObj(0))->tp_name + " object whose contents magpy cannot guard");
        return false;
      }
      out[0] = p.calleeResult != kNoNode && p.calleeResultObj == v ? p.calleeResult : newNode(v);
      NodeKind kind = refs_.node(in(0)).kind;
      if ((kind == NodeKind::Tuple && Py_IS_TYPE(v, &PyTupleIter_Type)) || (kind == NodeKind::List && Py_IS_TYPE(v, &PyListIter_Type)))
        sequenceIterators_[out[0]] = {in(0), 0};
      return true;
    }
    case Op::FOR_ITER:
      if (out.empty()) return true;  // exhausted: the iterator was popped
      out[0] = in(0);
      out[1] = iterationValue(p, in(0), outObj(1));
      return true;
    case Op::UNPACK_SEQUENCE: {
      if (breaksOnContentLength(inObj(0), "unpacking")) return false;
      NodeKind kind = refs_.node(in(0)).kind;
      size_t n = out.size();
      for (size_t k = 0; k < n; ++k) {
        size_t element = n - 1 - k;  // the first element ends on top
        PyObject* v = outObj(k);
        if (kind == NodeKind::Tuple || kind == NodeKind::List) out[k] = refs_.read(in(0), Relation::at(Py_ssize_t(element)), v);
        else out[k] = newNode(v);
        registerTensor(out[k]);
      }
      if (kind != NodeKind::Tuple && kind != NodeKind::List && externalOpaque(in(0))) {
        graphBreak(std::string("unpacking a ") + Py_TYPE(inObj(0))->tp_name + " object whose contents magpy cannot guard");
        return false;
      }
      return true;
    }
    case Op::UNPACK_EX: {
      if (breaksOnContentLength(inObj(0), "unpacking")) return false;
      for (size_t k = 0; k < out.size(); ++k) out[k] = newNode(outObj(k));
      if (refs_.node(in(0)).kind == NodeKind::Object && externalOpaque(in(0))) {
        graphBreak(std::string("unpacking a ") + Py_TYPE(inObj(0))->tp_name + " object whose contents magpy cannot guard");
        return false;
      }
      return true;
    }
    case Op::BUILD_TUPLE:
    case Op::BUILD_LIST: {
      NodeId c = refs_.nodeFor(outObj(0));
      auto& refs = refs_.node(c).versions.back().refs;
      for (size_t k = 0; k < refs.size() && k < p.inputs.size(); ++k) refs[k].target = in(k);
      out[0] = c;
      return true;
    }
    case Op::LIST_TO_TUPLE: {
      NodeId c = refs_.nodeFor(outObj(0));
      auto& refs = refs_.node(c).versions.back().refs;
      const auto& from = refs_.node(in(0)).last().refs;
      for (size_t k = 0; k < refs.size() && k < from.size(); ++k) refs[k].target = from[k].target;
      out[0] = c;
      return true;
    }
    case Op::BUILD_MAP:
    case Op::BUILD_CONST_KEY_MAP: {
      NodeId d = refs_.nodeFor(outObj(0));
      // BUILD_MAP: key0, value0, key1, ...; BUILD_CONST_KEY_MAP: values..., keys
      if (refs_.node(d).kind == NodeKind::Dict) {
        auto& refs = refs_.node(d).versions.back().refs;
        size_t n = ins.op == Op::BUILD_MAP ? p.inputs.size() / 2 : p.inputs.size() - 1;
        for (size_t k = 0; k < n && k < refs.size(); ++k) refs[k].target = ins.op == Op::BUILD_MAP ? in(2 * k + 1) : in(k);
      }
      out[0] = d;
      return true;
    }
    case Op::BUILD_SET:
    case Op::BUILD_STRING:
    case Op::BUILD_SLICE:
      out[0] = derived(outObj(0));
      return true;
    case Op::FORMAT_VALUE:
      if (refs_.node(in(0)).kind == NodeKind::Tensor) {
        graphBreak("formatting a tensor reads its contents");
        return false;
      }
      out[0] = operatorResult(outObj(0));
      return out[0] != kNoNode;
    case Op::LIST_APPEND: {
      NodeId list = slotNode(sf, p.base - ins.arg);
      Py_ssize_t n = PyList_GET_SIZE(sf.view.stack(p.base - ins.arg));
      refs_.write(list, Relation::at(n - 1), in(0));
      return true;
    }
    case Op::LIST_EXTEND: {
      NodeId list = slotNode(sf, p.base - ins.arg);
      NodeKind from = refs_.node(in(0)).kind;
      if (from == NodeKind::Tuple || from == NodeKind::List) {
        Py_ssize_t n = PyList_GET_SIZE(sf.view.stack(p.base - ins.arg));
        const auto items = refs_.node(in(0)).last().refs;
        Py_ssize_t start = n - Py_ssize_t(items.size());
        for (size_t k = 0; k < items.size(); ++k) refs_.write(list, Relation::at(start + Py_ssize_t(k)), items[k].target);
      } else {
        if (externalOpaque(in(0))) {
          graphBreak(std::string("extending a list from a ") + Py_TYPE(inObj(0))->tp_name + " object magpy cannot guard");
          return false;
        }
        refs_.changedInPlace(list);
      }
      return true;
    }
    case Op::DICT_UPDATE:
    case Op::DICT_MERGE: {
      NodeId dict = slotNode(sf, p.base - ins.arg);
      if (refs_.node(in(0)).kind == NodeKind::Dict && refs_.node(dict).kind == NodeKind::Dict) {
        for (auto& e : std::vector<Edge>(refs_.node(in(0)).last().refs)) refs_.write(dict, e.rel, e.target);
      } else {
        refs_.changedInPlace(dict);
      }
      return true;
    }
    case Op::MAP_ADD: {
      NodeId dict = slotNode(sf, p.base - ins.arg);
      PyObject* key = inObj(0);
      if (auto k = refs_.node(dict).kind == NodeKind::Dict ? dictKey(key) : std::nullopt)
        refs_.write(dict, Relation::keyed(*k), in(1));
      else
        refs_.changedInPlace(dict);
      return true;
    }
    case Op::SET_ADD:
    case Op::SET_UPDATE:
      return true;  // sets are followed as opaque values built from followed inputs
    case Op::POP_JUMP_FORWARD_IF_FALSE: case Op::POP_JUMP_FORWARD_IF_TRUE: case Op::POP_JUMP_BACKWARD_IF_FALSE:
    case Op::POP_JUMP_BACKWARD_IF_TRUE: case Op::POP_JUMP_FORWARD_IF_NONE: case Op::POP_JUMP_FORWARD_IF_NOT_NONE:
    case Op::POP_JUMP_BACKWARD_IF_NONE: case Op::POP_JUMP_BACKWARD_IF_NOT_NONE:
      return true;
    case Op::JUMP_IF_FALSE_OR_POP:
    case Op::JUMP_IF_TRUE_OR_POP:
      if (!out.empty()) out[0] = in(0);
      return true;
    case Op::GET_LEN:
      out[0] = in(0);
      out[1] = derived(outObj(1));
      return true;
    case Op::MAKE_FUNCTION: {
      NodeId f = newNode(outObj(0));
      // inputs (bottom first): [defaults] [kwdefaults] [annotations] [closure] code
      size_t k = 0;
      if (ins.arg & 1) refs_.write(f, Relation::attr("__defaults__"), in(k++));
      if (ins.arg & 2) refs_.write(f, Relation::attr("__kwdefaults__"), in(k++));
      if (ins.arg & 4) k++;
      if (ins.arg & 8) refs_.write(f, Relation::attr("__closure__"), in(k++));
      out[0] = f;
      return true;
    }
    case Op::BEFORE_WITH: {
      out[0] = newNode(outObj(0));  // the bound __exit__
      PyObject* entered = outObj(1);
      out[1] = p.calleeResult != kNoNode && p.calleeResultObj == entered ? p.calleeResult : newNode(entered);
      return true;
    }
    case Op::LOAD_ASSERTION_ERROR:
      out[0] = newNode(outObj(0));
      return true;
    case Op::IMPORT_NAME: {
      PyObject* module = outObj(0);
      out[0] = PyModule_Check(module) ? refs_.read(kExternal, Relation::module(utf8(PyModule_GetNameObject(module))), module)
                                      : newNode(module);
      if (PyErr_Occurred()) PyErr_Clear();
      return true;
    }
    case Op::IMPORT_FROM:
      out[0] = in(0);
      out[1] = refs_.read(in(0), Relation::attr(utf8(instructionName(code, ins))), outObj(1));
      registerTensor(out[1]);
      return true;
    case Op::PRECALL: {
      // A bound method in the callable slot is split into [function, self].
      for (size_t k = 0; k < out.size(); ++k) out[k] = in(k);
      if (in(0) == kNull && outObj(0) != nullptr) {
        NodeId method = in(1);
        out[0] = refs_.read(method, Relation::attr("__func__"), outObj(0));
        out[1] = refs_.read(method, Relation::attr("__self__"), outObj(1));
      }
      return true;
    }
    case Op::CALL:
    case Op::CALL_FUNCTION_EX:
      return finishCall(sf, p, out);
    case Op::YIELD_VALUE:
      // Resumed: the value sent in (None for next()) is on the stack.
      if (!out.empty()) out[0] = newNode(outObj(0));
      return true;
    default:
      graphBreak(std::string(opName(ins.op)) + " is not captured yet");
      return false;
  }
}

}  // namespace magpy::capture

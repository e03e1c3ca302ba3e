// Frames of a monitored run: entering one (a traced callee, a generator
// resuming, untraced code to guard), binding its parameters and cells from
// the caller's shadows, and leaving it with its return value.
#include "capture/monitor/monitor.h"
#include "capture/monitor/state.h"

namespace magpy::capture {
namespace {

// Code of importlib's bootstrap, frozen into the interpreter.
bool isImportSystem(PyCodeObject* code) {
  return utf8(codeFileName(code)).rfind("<frozen importlib._bootstrap", 0) == 0;
}

// The __name__ of a module namespace; empty when it has none.
std::string moduleNameOf(PyObject* globals) {
  PyObject* name = PyDict_GetItemString(globals, "__name__");
  return name && PyUnicode_Check(name) ? utf8(name) : "";
}

// The __new__ that collections.namedtuple makes: a lambda compiled from a
// string in a namespace named "namedtuple_<typename>".
bool isNamedTupleNew(Frame& frame) {
  return moduleNameOf(frame.globals()).rfind("namedtuple_", 0) == 0 &&
         utf8(codeFileName(frame.code())) == "<string>";
}

}  // namespace

// A module as a root of the run's paths: sys.modules[name], by default
// under its own __name__. kNoNode without a name.
NodeId Monitor::moduleNode(PyObject* module, const char* name) {
  if (!name) name = PyModule_GetName(module);
  if (!name || !*name) {
    PyErr_Clear();
    return kNoNode;
  }
  PyRef registered = PyRef::steal(PyImport_GetModule(PyRef::steal(PyUnicode_FromString(name)).get()));
  PyErr_Clear();
  if (registered.get() != module) return kNoNode;  // not found by that name (types.ModuleType)
  return refs_.read(kExternal, Relation::module(name), module);
}

// The module whose namespace `globals` is (a frame's, a caller's), under
// the name the namespace gives.
NodeId Monitor::globalsModuleNode(PyObject* globals) {
  PyObject* name = PyDict_GetItemString(globals, "__name__");
  PyRef module = PyRef::steal(name ? PyImport_GetModule(name) : nullptr);
  if (!module) {
    PyErr_Clear();
    return kNoNode;
  }
  return moduleNode(module.get(), utf8(name).c_str());
}

void Monitor::enterFrame(PyFrameObject* frame) {
  Frame view(frame);
  PyFrameObject* back = frameBack(frame);
  bool root = frames_.empty();
  Pending* binding = root ? nullptr : &frames_.back()->pending;
  if (binding && binding->active && binding->dataParallel) {
    binding = dataParallelBinding(view);  // DDP's own code runs untraced
    if (!binding) {
      view.traceOpcodes(false);
      return;
    }
  } else if (root ? back != callerFrame_ : (back != frames_.back()->frame || !frames_.back()->pending.active ||
                                            !frames_.back()->pending.traceCallees)) {
    if (!root && back && back != frames_.back()->frame && !broken_) guardUntracedCallee(view, Frame(back));
    if (!root && !broken_) guardBuiltinsNamedBy(view);
    view.traceOpcodes(false);
    return;
  }
  Pending* caller = root ? nullptr : &frames_.back()->pending;
  if (caller && !caller->inlined && !caller->autogradForward) {
    // An implicit call (a special method, a property, __getattr__) or a
    // callback from native code: an annotated callee is summarized by the
    // instruction's own semantics or its caller's annotation.
    if (PyObject* f = view.function()) {
      const record::FunctionAnnotation* a = annotations_.find(qualifiedName(f));
      if (a) {
        view.traceOpcodes(false);
        if (!a->pure && !a->op) graphBreak(a->whyDynamic(qualifiedName(f)));
        else if (!a->op) breakOnImplicitContentRead(view, *a, caller->calleeName);
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
  sf->name = utf8(codeQualname(view.code()));
  sf->locals.assign(size_t(view.numLocals()), kNoNode);
  sf->globals = globalsModuleNode(view.globals());
  // collections.namedtuple compiles __new__ with exec, in a namespace of
  // its own that nothing else reaches: a constant of the class.
  if (sf->globals == kNoNode && isNamedTupleNew(view)) sf->globals = newNode(view.globals());
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
    ok = bindFrame(*sf, *binding);
  }
  frames_.push_back(std::move(sf));
  if (!ok) return;
  if (PyObject* f = view.function(); f && PyFunction_Check(f) && functionSeen_.insert(f).second)
    functionsRun_.push_back(PyRef::borrow(f));
  view.traceOpcodes(true);
}

// Native code that turns a tensor into Python data (numpy.array([t]) runs
// t.__array__, format runs t.__format__) reads its contents where no
// instruction of the program shows it: a graph break.
void Monitor::breakOnImplicitContentRead(Frame& callee, const record::FunctionAnnotation& a, const std::string& by) {
  for (int i = 0; i < codeArgCount(callee.code()); ++i) {
    PyObject* v = callee.local(i);
    if (!v || !isTensor(v) || !a.input(size_t(i)).value_read || a.input(size_t(i)).metadata_only) continue;
    if (ops_->contentsFixedByGuards(tensorOf(v)) || checksContents(tensorOf(v))) continue;
    graphBreak(qualifiedName(callee.function()) + ", run by " + (by.empty() ? std::string("native code") : by) +
               ", reads the contents of a tensor into Python data: data-dependent values are not captured");
    return;
  }
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
  PyObject* name = functionName(f);
  bool method = self && classLookup(Py_TYPE(self), name) == f;
  // A tensor's class is torch.Tensor (its guard rules out subclasses).
  if (method && isTensor(self) && readQualifiedPathTo(f)) return;
  if (selfNode != kNoNode && !isTensor(self) && readClassPathTo(f, selfNode)) return;
  // A special method of a class of torch or of Python's standard library,
  // run by the interpreter (torch._VF's __getattr__, a backend flag's
  // __get__, typing.List's __getitem__): part of the platform, not found
  // by name.
  if (method && utf8(name).compare(0, 2, "__") == 0 && platformClass(Py_TYPE(self))) return;
  // The import system, run by an import statement in summarized code
  // (torch._assert imports from torch.overrides): it finds modules in
  // sys.modules and binds their attributes, which the summary covers.
  if (isImportSystem(callee.code())) return;
  // A library calling itself under a summary of one of its functions (re
  // compiling a pattern makes a RegexFlag, an enum; numpy.finfo runs its
  // _init): the summary covers it. Not torch's: a program may patch
  // torch's functions (F.relu, Conv2d._conv_forward) that its summarized
  // layers call.
  std::string calleeModule = attrString(f, "__module__"), callerModule = moduleNameOf(caller.globals());
  if (standardLibrary(calleeModule) && standardLibrary(callerModule)) return;
  std::string package = calleeModule.substr(0, calleeModule.find('.'));
  if (!package.empty() && package != "torch" && package != "__main__" &&
      callerModule.substr(0, callerModule.find('.')) == package)
    return;
  if (!readCallerGlobalTo(f, caller.globals())) {
    PyObject* outer = caller.function();
    graphBreak((outer ? qualifiedName(outer) : std::string("untraced code")) + " (summarized, not traced) calls " +
               qualifiedName(f) + ", which magpy cannot name to guard that it stays the same function");
    return;
  }
  guardedCallees_.emplace(std::make_pair(caller.globals(), f), PyRef::borrow(f));
}

// Untraced code calls native functions without a frame the monitor sees
// (nn.GELU's forward calls F.gelu, a builtin): each builtin its code names
// through its globals (gelu, or F.gelu for a module F) is guarded by
// identity there, as guardUntracedCallee guards Python callees. A name it
// may not call (an attribute that happens to name a builtin of F) only
// adds a guard.
void Monitor::guardBuiltinsNamedBy(const Frame& untraced) {
  PyCodeObject* code = untraced.code();
  PyObject* globals = untraced.globals();
  if (!code || !globals || !PyDict_Check(globals) ||
      !builtinsGuardedFor_.emplace(code, PyRef::borrow(reinterpret_cast<PyObject*>(code))).second)
    return;
  PyObject* names = codeNames(code);
  NodeId home = kNoNode;
  for (Py_ssize_t i = 0; names && i < PyTuple_GET_SIZE(names); ++i) {
    PyObject* global = PyDict_GetItem(globals, PyTuple_GET_ITEM(names, i));
    if (global && PyCFunction_Check(global)) {
      if (home == kNoNode) home = globalsModuleNode(globals);
      if (home != kNoNode) refs_.read(home, Relation::attr(utf8(PyTuple_GET_ITEM(names, i))), global);
    }
    if (!global || !PyModule_CheckExact(global)) continue;
    NodeId module = kNoNode;
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(names); ++j) {
      PyObject* f = PyDict_GetItem(PyModule_GetDict(global), PyTuple_GET_ITEM(names, j));
      if (!f || !PyCFunction_Check(f)) continue;
      if (module == kNoNode) module = moduleNode(global);
      if (module != kNoNode) refs_.read(module, Relation::attr(utf8(PyTuple_GET_ITEM(names, j))), f);
    }
  }
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
  PyObject* ownName = functionName(f);
  if (classLookup(type, ownName) == f) return found(ownName);
  // Stored under another name (a lambda patched onto the class).
  PyObject* otherName = classNameOf(type, f);
  return otherName ? found(otherName) : false;
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
  NodeId node = cur == f ? moduleNode(mod.get()) : kNoNode;
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
    NodeId home = v == f ? globalsModuleNode(callerGlobals) : kNoNode;
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
      NodeId owner = item == f ? moduleNode(modules[m]) : kNoNode;
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
  } else if (caller.autogradForward) {
    // apply calls forward(ctx, *args) with a context of its own making.
    caller.autogradForward = false;
    PyObject* ctx = sf.view.local(0);
    if (sf.view.function() != refs_.node(caller.calleeFunction).obj || codeArgCount(sf.view.code()) < 1 || !ctx) {
      graphBreak(caller.calleeName + " ran other code than its class's forward(ctx, ...)");
      return false;
    }
    std::vector<NodeId> positional{newNode(ctx)};
    positional.insert(positional.end(), caller.positional.begin(), caller.positional.end());
    bindParameters(sf, caller.calleeFunction, positional, caller.keywords);
  } else {
    // An implicit call (a special method, a property, a callback from
    // native code): the callee's arguments are the instruction's inputs,
    // matched by identity; a default value is the function's; anything
    // else is a constant of the callee.
    bool rooted = false;
    if (PyObject* f = sf.view.function()) {
      sf.function = refs_.find(f);
      if (sf.function == kNoNode) sf.function = constructorOf(caller, f);
      rooted = sf.function != kNoNode;
      if (!rooted) {
        if (!closureGuarded(f)) return false;
        sf.function = newNode(f);
      }
      if (PyFunction_Check(f) && !descriptorStateGuarded(sf, f, caller)) return false;
    }
    for (int i = 0; i < sf.view.numLocals(); ++i) {
      PyObject* v = sf.view.local(i);
      if (!v || sf.view.localKind(i) != LocalKind::Plain) continue;
      readClassOf(v);  // native code called the callee through one of these classes
      NodeId match = kNoNode;
      for (size_t k = 0; k < caller.inputObjs.size(); ++k)
        if (caller.inputObjs[k].get() == v) match = caller.inputs[k];
      for (size_t k = 0; k < caller.positionalObjs.size(); ++k)
        if (caller.positionalObjs[k] == v) match = caller.positional[k];
      if (match == kNoNode && !defaultOf(sf, rooted, v, match)) return false;
      sf.locals[size_t(i)] = match != kNoNode ? match : newNode(v);
    }
  }
  bindCells(sf);
  return verifyLocals(sf);
}

// Calling a Python class runs its __new__ and __init__: read as the
// class's attributes, their closure cells and defaults have paths.
NodeId Monitor::constructorOf(const Pending& caller, PyObject* function) {
  static PyObject* kNames[] = {PyUnicode_InternFromString("__init__"), PyUnicode_InternFromString("__new__")};
  PyObject* cls = caller.callable.get();
  if (!cls || !PyType_Check(cls) || caller.callableNode == kNoNode) return kNoNode;
  for (PyObject* name : kNames)
    if (classLookup(reinterpret_cast<PyTypeObject*>(cls), name) == function)
      return refs_.read(caller.callableNode, Relation::attr(utf8(name)), function);
  return kNoNode;
}

// A function native code runs that no path names (a property's getter, a
// special method): a closure cell holding state no guard would cover
// breaks the graph. Cells holding a function, class or module stay: a
// decorator's wrapper (Tensor.__pow__'s) holds what it wraps, fixed once
// made, and super()'s __class__ cell names the class.
bool Monitor::closureGuarded(PyObject* function) {
  if (!PyFunction_Check(function)) return true;
  PyObject* cells = PyFunction_GET_CLOSURE(function);
  PyObject* names = PyCode_GetFreevars(reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(function)));
  if (!names) PyErr_Clear();
  std::string cell;
  for (Py_ssize_t i = 0; cells && names && i < PyTuple_GET_SIZE(cells) && i < PyTuple_GET_SIZE(names); ++i) {
    PyObject* held = PyCell_GET(PyTuple_GET_ITEM(cells, i));
    if (held && !fixedByIdentity(held) && cell.empty()) cell = utf8(PyTuple_GET_ITEM(names, i));
  }
  Py_XDECREF(names);
  if (cell.empty()) return true;
  graphBreak(qualifiedName(function) + " runs from native code and reads its closure cell " + cell +
             ", which magpy cannot name to guard (no path leads to the function)");
  return false;
}

// Whether v, bound to a parameter of an implicit call's function, is one
// of the function's default values that can change (def __init__(self,
// log=[])): read through the function where a path names it (node set),
// else a graph break (false). Immutable defaults stay constants.
bool Monitor::defaultOf(const ShadowFrame& sf, bool rooted, PyObject* v, NodeId& node) {
  PyObject* f = sf.view.function();
  if (!f || !PyFunction_Check(f) || immutableValue(v)) return true;
  PyObject* defaults = PyFunction_GET_DEFAULTS(f);
  PyObject* kwdefaults = PyFunction_GET_KW_DEFAULTS(f);
  Py_ssize_t k = 0;
  while (defaults && k < PyTuple_GET_SIZE(defaults) && PyTuple_GET_ITEM(defaults, k) != v) ++k;
  bool positional = defaults && k < PyTuple_GET_SIZE(defaults);
  bool keyword = false;
  PyObject *key, *value;
  for (Py_ssize_t pos = 0; kwdefaults && PyDict_Check(kwdefaults) && PyDict_Next(kwdefaults, &pos, &key, &value);)
    keyword = keyword || value == v;
  if (!positional && !keyword) return true;
  if (rooted && positional) {
    NodeId all = refs_.read(sf.function, Relation::attr("__defaults__"), defaults);
    node = refs_.read(all, Relation::at(k), v);
    return true;
  }
  graphBreak(qualifiedName(f) + " runs from native code with a default argument value that can change (a " +
             typeName(Py_TYPE(v)) + "), which magpy cannot name to guard");
  return false;
}

// A descriptor's __get__/__set__/__delete__ written in Python, run by the
// interpreter for an attribute access: the descriptor object it reads was
// found on a class, where no path names it, so its own state (self.k in
// __get__) could change unguarded. Fine when it holds no state of its own.
bool Monitor::descriptorStateGuarded(ShadowFrame& sf, PyObject* function, const Pending& caller) {
  static PyObject* kSlots[] = {PyUnicode_InternFromString("__get__"), PyUnicode_InternFromString("__set__"),
                               PyUnicode_InternFromString("__delete__")};
  PyObject* descriptor = codeArgCount(sf.view.code()) > 0 ? sf.view.local(0) : nullptr;
  if (!descriptor || PyType_Check(descriptor)) return true;
  PyObject* slot = nullptr;  // the descriptor method the class finds this function as (a lambda patched in too)
  for (PyObject* name : kSlots)
    if (classLookup(Py_TYPE(descriptor), name) == function) slot = name;
  if (!slot) return true;
  std::string name = utf8(slot);
  for (auto& in : caller.inputObjs)
    if (in.get() == descriptor) return true;  // the instruction's own input: reached by its path
  PyObject* dict = instanceDict(descriptor);
  bool stateless = !dict || (PyDict_Check(dict) && PyDict_GET_SIZE(dict) == 0);
  if (stateless) return true;
  graphBreak("the descriptor " + typeName(Py_TYPE(descriptor)) + "." + name +
             " reads state of its own, which magpy cannot name to guard (it was found on a class)");
  return false;
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
  const Pending& returning = sf.pending;
  if (!returning.active || (returning.ins.op != Op::RETURN_VALUE && returning.ins.op != Op::YIELD_VALUE) ||
      returning.inputObjs.empty() || returning.inputObjs[0].get() != result) {
    graphBreak("internal: " + sf.name + " returned without a traced RETURN_VALUE");
    return;
  }
  NodeId value = returning.inputs[0];
  bool yielded = returning.ins.op == Op::YIELD_VALUE;
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
  Pending& caller = frames_.back()->pending;
  if (caller.active) {
    caller.calleeResult = value;
    caller.calleeResultObj = result;
    if (!caller.inlined && !caller.autogradForward && consumedNatively(caller, sf)) {
      if (numbers_.active())
        numbers_.fix(value, "a number returned to native code (" + sf.name + ") is used where no graph sees it");
      refs_.readContents(value);  // sorted(keys, key=lambda k: logs[k]) compares the lists
    }
  }
}

// Whether native code uses what a callee it called implicitly returned,
// rather than handing it to the program: a callback of a native function
// (a sorted or max key, map, reduce), or a special method whose result the
// interpreter consumes (__index__ for an index, __len__, __bool__, __hash__).
bool Monitor::consumedNatively(const Pending& caller, ShadowFrame& callee) {
  if (caller.ins.op == Op::CALL || caller.ins.op == Op::CALL_FUNCTION_EX) return true;
  PyObject* f = callee.view.function();
  if (!f || !PyFunction_Check(f)) return true;
  // The name its class finds it by (a lambda patched in as __index__).
  PyObject* self = codeArgCount(callee.view.code()) > 0 ? callee.view.local(0) : nullptr;
  PyObject* found = self ? classNameOf(Py_TYPE(self), f) : nullptr;
  static const char* kConsumed[] = {"__index__", "__len__", "__bool__", "__hash__", "__int__", "__float__",
                                    "__complex__", "__length_hint__", "__eq__", "__ne__", "__lt__", "__le__",
                                    "__gt__", "__ge__", "__contains__", "__iter__", "__next__"};
  std::string name = utf8(found ? found : functionName(f));
  for (const char* n : kConsumed)
    if (name == n) return true;
  return false;
}

}  // namespace magpy::capture

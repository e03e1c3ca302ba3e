// Calls in a monitored run (MagPy paper, section 5.3.1): a callee with an
// annotation is applied by its annotation (its ATen operators recorded, its
// reference edges drawn); an unannotated Python function is inlined (its
// frame is traced); unannotated native code is dynamic (a graph break).
#include <ATen/core/grad_mode.h>

#include <algorithm>

#include "capture/compiled_function.h"
#include "capture/live.h"
#include "capture/monitor/monitor.h"
#include "capture/monitor/state.h"


namespace magpy::capture {
namespace {

// Whether a list or tuple holds a tensor (at any depth a constant factory
// would read): torch.tensor([x.max(), x.min()]) reads tensor contents.
bool holdsTensor(PyObject* o, int depth) {
  if (isTensor(o)) return true;
  if (depth > 32 || !(PyList_Check(o) || PyTuple_Check(o))) return false;
  PyObject* items = PySequence_Fast(o, "");
  if (!items) {
    PyErr_Clear();
    return false;
  }
  bool found = false;
  for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(items) && !found; ++k)
    found = holdsTensor(PySequence_Fast_GET_ITEM(items, k), depth + 1);
  Py_DECREF(items);
  return found;
}

// Whether o holds, at any depth of lists, tuples and dicts, an object
// whose attributes or identity native code would read (not an atom, a
// tensor, a container of them, or a function, class or module, which
// copies share); too deep to tell counts as holding one.
bool holdsObjectState(PyObject* o, int depth = 0) {
  if (depth > 32) return true;
  if (isAtom(o) || isTensor(o) || PyFunction_Check(o) || PyCFunction_Check(o) || PyType_Check(o) || PyModule_Check(o))
    return false;
  if (PyTuple_CheckExact(o) || PyList_CheckExact(o)) {
    for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(o); ++k)
      if (holdsObjectState(PySequence_Fast_GET_ITEM(o, k), depth + 1)) return true;
    return false;
  }
  if (PyDict_CheckExact(o)) {
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(o, &pos, &k, &v))
      if (holdsObjectState(k, depth + 1) || holdsObjectState(v, depth + 1)) return true;
    return false;
  }
  return true;
}

// The element an annotated relation names, from the call's arguments.
bool relationFor(const record::RelationAnnotation& r, PyObject* container, const std::vector<PyObject*>& args,
                 Relation& out) {
  PyObject* name = r.name_from >= 0 && size_t(r.name_from) < args.size() ? args[size_t(r.name_from)] : nullptr;
  if (r.kind == record::RelationAnnotation::Kind::Attr) {
    if (name && !PyUnicode_Check(name)) return false;
    out = Relation::attr(name ? utf8(name) : r.name);
    return true;
  }
  if (!name) {
    out = Relation::keyed(r.name);
    return true;
  }
  if (PyLong_CheckExact(name) && (PyList_Check(container) || PyTuple_Check(container))) {
    long long i = PyLong_AsLongLong(name);
    if (i < 0) i += PySequence_Size(container);
    out = Relation::at(i);
    return true;
  }
  auto key = dictKey(name);
  if (!key) return false;
  out = Relation::keyed(*key);
  return true;
}

// The element `rel` names in `container` now, read as access paths read
// it (a relation's positions count from the start), or null.
PyRef elementOf(PyObject* container, const Relation& rel) {
  switch (rel.kind) {
    case Relation::Kind::Attr: return liveElement(container, record::PathStep::attr(rel.name));
    case Relation::Kind::Index: return rel.index < 0 ? PyRef() : liveElement(container, record::PathStep::at(rel.index));
    case Relation::Kind::Key: return liveElement(container, record::PathStep::keyed(rel.key));
    default: return PyRef();
  }
}

}  // namespace

// CPython 3.11's PRECALL: a bound method in the callable slot is split
// into [function, self].
bool Monitor::finishPrecall(Step& s) {
  for (size_t k = 0; k < s.out.size(); ++k) s.out[k] = s.in(k);
  if (s.in(0) == kNull && s.outObj(0) != nullptr) {
    NodeId method = s.in(1);
    s.out[0] = refs_.read(method, Relation::attr("__func__"), s.outObj(0));
    s.out[1] = refs_.read(method, Relation::attr("__self__"), s.outObj(1));
  }
  return true;
}

void Monitor::beginCall(ShadowFrame& sf, Pending& p) {
  if (!takeCallArguments(sf, p)) return;
  PyObject* callable = resolveCallee(p);
  p.calleeName = qualifiedName(callable);
  if (isBackwardCall(p.calleeName)) {
    beginBackward(p);
    return;
  }
  if (PyWeakref_CheckRefExact(callable) && p.positional.empty() && p.keywords.empty()) {
    p.dereferences = true;  // ref(): what it refers to, read as state (finishCall)
    p.traceCallees = false;
    return;
  }
  if (p.calleeName == "torch.Tensor.requires_grad_" && keepsRequiresGrad(p)) {
    p.returnsSelf = true;
    p.traceCallees = false;
    p.suppressOps = true;
    return;
  }
  p.annotation = p.calleeName.empty() ? nullptr : annotations_.find(p.calleeName);
  // A standard layer's forward is summarized only for torch's own classes:
  // a subclass may override what forward calls (_conv_forward) or read
  // attributes of its own, so its forward is traced.
  if (p.annotation && p.annotation->module &&
      (p.positionalObjs.empty() || !definedIn(Py_TYPE(p.positionalObjs[0]), "torch.nn.modules")))
    p.annotation = nullptr;
  if (p.annotation) {
    beginAnnotatedCall(p, callable);
    return;
  }
  if (PyObject* function = autogradFunctionOfApply(callable)) {
    beginAutogradFunction(p, function);
    return;
  }
  if (isDataParallelForward(callable)) {
    beginDataParallel(p);
    return;
  }
  if (PyFunction_Check(callable)) {
    p.inlined = true;
    p.calleeFunction = p.callableNode;
    return;
  }
  if (PyType_Check(callable) && (reinterpret_cast<PyTypeObject*>(callable)->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
    return;  // a user class: its __init__ and __new__ run traced
  }
  // An object with a Python __call__ (an nn.Module): call its class's __call__.
  PyObject* call = PyType_Check(callable) ? nullptr : PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(callable)), "__call__");
  if (!call) PyErr_Clear();
  PyRef callRef = PyRef::steal(call);
  if (call && PyFunction_Check(call)) {
    NodeId cls = refs_.read(p.callableNode, Relation::attr("__class__"), reinterpret_cast<PyObject*>(Py_TYPE(callable)));
    p.calleeFunction = refs_.read(cls, Relation::attr("__call__"), call);
    p.positional.insert(p.positional.begin(), p.callableNode);
    p.positionalObjs.insert(p.positionalObjs.begin(), callable);
    p.inlined = true;
    return;
  }
  std::string callee = p.calleeName.empty() ? std::string(Py_TYPE(callable)->tp_name) : p.calleeName;
  graphBreak(callee + " is native code without an annotation; add one (magpy-capture --annotations) if it is pure", callee);
}

// The callable and its arguments, from the stack as CPython 3.11 lays them out.
// CALL: [method_or_NULL, callable_or_self, args...]; keywords named by KW_NAMES.
// CALL_FUNCTION_EX: [NULL, callable, args_tuple, kwargs_dict?].
bool Monitor::takeCallArguments(ShadowFrame& sf, Pending& p) {
  if (p.ins.op == Op::CALL) {
    bool method = p.inputs[0] != kNull;
    p.callable = method ? p.inputObjs[0] : p.inputObjs[1];
    p.callableNode = method ? p.inputs[0] : p.inputs[1];
    size_t first = method ? 1 : 2;
    size_t nkw = sf.kwnames ? size_t(PyTuple_GET_SIZE(sf.kwnames)) : 0;
    size_t npos = p.inputs.size() - first - nkw;
    for (size_t k = 0; k < npos; ++k) {
      p.positional.push_back(p.inputs[first + k]);
      p.positionalObjs.push_back(p.inputObjs[first + k].get());
    }
    for (size_t k = 0; k < nkw; ++k) {
      p.keywords.push_back({utf8(PyTuple_GET_ITEM(sf.kwnames, Py_ssize_t(k))), p.inputs[first + npos + k]});
      p.keywordObjs.push_back(p.inputObjs[first + npos + k].get());
    }
    sf.kwnames = nullptr;
    return true;
  }
  p.callable = p.inputObjs[1];
  p.callableNode = p.inputs[1];
  const ShadowNode& args = refs_.node(p.inputs[2]);
  if (args.kind != NodeKind::Tuple && args.kind != NodeKind::List) {
    graphBreak("a call with *args from a " + std::string(Py_TYPE(p.inputObjs[2].get())->tp_name) + " is not captured");
    return false;
  }
  for (auto& e : args.last().refs) {
    p.positional.push_back(e.target);
    p.positionalObjs.push_back(refs_.node(e.target).obj);
  }
  if (p.inputs.size() <= 3) return true;
  const ShadowNode& kw = refs_.node(p.inputs[3]);
  if (kw.kind != NodeKind::Dict) {
    graphBreak("a call with **kwargs from a " + std::string(Py_TYPE(p.inputObjs[3].get())->tp_name) + " is not captured");
    return false;
  }
  for (auto& e : kw.last().refs) {
    p.keywords.push_back({e.rel.key.s, e.target});  // Python requires str keys in **kwargs
    p.keywordObjs.push_back(refs_.node(e.target).obj);
  }
  return true;
}

// functools.partial(f, *a, **k)(*args, **kw) calls f(*a, *args, **k, **kw)
// (the call's keywords win): the call becomes that call of f, with f, a
// and k read from the partial object (guarded when it is state).
PyObject* Monitor::unwrapPartial(Pending& p, PyObject* partial) {
  PyRef func = PyRef::steal(PyObject_GetAttrString(partial, "func"));
  PyRef args = PyRef::steal(PyObject_GetAttrString(partial, "args"));
  PyRef keywords = PyRef::steal(PyObject_GetAttrString(partial, "keywords"));
  NodeId argsNode = refs_.read(p.callableNode, Relation::attr("args"), args.get());
  for (Py_ssize_t i = PyTuple_GET_SIZE(args.get()); i-- > 0;) {
    PyObject* item = PyTuple_GET_ITEM(args.get(), i);
    p.positional.insert(p.positional.begin(), refs_.read(argsNode, Relation::at(i), item));
    p.positionalObjs.insert(p.positionalObjs.begin(), item);
  }
  NodeId keywordsNode = refs_.read(p.callableNode, Relation::attr("keywords"), keywords.get());
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  for (size_t at = 0; PyDict_Next(keywords.get(), &pos, &key, &value);) {
    std::string name = utf8(key);
    bool overridden = std::any_of(p.keywords.begin(), p.keywords.end(), [&](auto& kw) { return kw.first == name; });
    if (overridden) continue;
    p.keywords.insert(p.keywords.begin() + long(at), {name, refs_.read(keywordsNode, Relation::keyed(name), value)});
    p.keywordObjs.insert(p.keywordObjs.begin() + long(at), value);
    ++at;
  }
  p.callableNode = refs_.read(p.callableNode, Relation::attr("func"), func.get());
  p.callable = func;
  return func.get();
}

// What the call runs (borrowed): a compiled function's target, a bound
// method's function (its object becomes the first argument), or the
// callable itself.
PyObject* Monitor::resolveCallee(Pending& p) {
  PyObject* callable = p.callable.get();
  // A compiled function called inside a monitored run runs as plain code.
  if (isCompiled(callable)) {
    PyObject* target = compiledTarget(callable);
    if (target != callable) {
      p.callableNode = refs_.read(p.callableNode, Relation::attr("__wrapped__"), target);
      p.callable = PyRef::borrow(target);
      callable = target;
    }
  }
  while (isPartial(callable)) callable = unwrapPartial(p, callable);
  // A method bound to its object: the object is the first argument.
  if (PyMethod_Check(callable)) {
    NodeId self = refs_.read(p.callableNode, Relation::attr("__self__"), PyMethod_GET_SELF(callable));
    p.positional.insert(p.positional.begin(), self);
    p.positionalObjs.insert(p.positionalObjs.begin(), PyMethod_GET_SELF(callable));
    p.callableNode = refs_.read(p.callableNode, Relation::attr("__func__"), PyMethod_GET_FUNCTION(callable));
    return PyMethod_GET_FUNCTION(callable);
  }
  // A native method or slot wrapper bound to its object (x.append,
  // super().__setattr__): the object is the first argument, read through
  // the method (push = log.append held in a global). It is the program's,
  // what the method does to it is a write the record replays, and where
  // the run also met it by another path the record guards that both
  // still name one object.
  if (PyObject* self = boundObject(callable)) {
    NodeId s = p.callableNode != kNoNode ? refs_.read(p.callableNode, Relation::attr("__self__"), self) : refs_.find(self);
    if (s == kNoNode) s = newNode(self);
    p.positional.insert(p.positional.begin(), s);
    p.positionalObjs.insert(p.positionalObjs.begin(), self);
  }
  return callable;
}

// Whether a constant factory's data (its first input read by value: x of
// torch.as_tensor(x), data of t.new_tensor(data)) is a tensor, which it
// converts with operators.
bool Monitor::convertsTensor(const Pending& p) const {
  const record::FunctionAnnotation& a = *p.annotation;
  for (size_t i = 0; i < p.positionalObjs.size(); ++i)
    if (a.input(i).value_read) return isTensor(p.positionalObjs[i]);
  return false;
}

// A call its annotation summarizes: the callee is not traced, and it must
// not read what the graph cannot hold.
// torch.distributed's all_reduce and broadcast hand their ReduceOp and
// group to native code, which reads them where no guard sees: a record
// holds only the defaults (SUM, the default group) and plain ints (src).
bool Monitor::collectiveArgumentsGuarded(const Pending& p) {
  if (p.calleeName != "torch.distributed.distributed_c10d.all_reduce" &&
      p.calleeName != "torch.distributed.distributed_c10d.broadcast")
    return true;
  std::vector<PyObject*> passed(p.positionalObjs.begin() + std::min<size_t>(1, p.positionalObjs.size()), p.positionalObjs.end());
  passed.insert(passed.end(), p.keywordObjs.begin(), p.keywordObjs.end());
  for (PyObject* v : passed)
    if (v && v != Py_None && !PyBool_Check(v) && !PyLong_CheckExact(v)) {
      graphBreak(p.calleeName + " is given a " + Py_TYPE(v)->tp_name + " (a reduce op or a group), whose value native "
                 "code reads unguarded: records hold the default op (SUM) and group only");
      return false;
    }
  return true;
}

// list.append(v): the list's new last element is v itself.
bool Monitor::appendsArgument(const Pending& p) {
  return p.calleeName == "builtins.list.append" && p.positional.size() == 2 && p.positional[0] >= 0 &&
         p.positional[1] >= 0;
}

void Monitor::beginAnnotatedCall(Pending& p, PyObject* callable) {
  const record::FunctionAnnotation& a = *p.annotation;
  if (!collectiveArgumentsGuarded(p)) return;
  // The callee gets every argument: each counts as used (an argument
  // that reached it inside a *args tuple was not loaded on its own).
  for (size_t i = 0; i < p.positional.size(); ++i) {
    NodeId n = p.positional[i];
    if (n < 0) continue;
    refs_.use(n);
    // sum(args), sorted(scales): the callee reads the elements too.
    NodeKind kind = refs_.node(n).kind;
    if (kind == NodeKind::Dict && a.input(i).value_read && !a.input(i).metadata_only && refs_.keyedByObjects(n)) {
      graphBreak(p.calleeName + " reads a dict keyed by tensors: only d[k], `k in d` and len(d) are followed on one");
      return;
    }
    if (a.input(i).value_read && (kind == NodeKind::Tuple || kind == NodeKind::List || kind == NodeKind::Dict))
      for (auto& e : refs_.node(n).last().refs)
        if (e.target >= 0) refs_.use(e.target);
    if (a.input(i).value_read && !a.input(i).identity_only) refs_.readContents(n);  // len(log), sorted(log)
  }
  for (auto& kw : p.keywords)
    if (kw.second >= 0) {
      refs_.use(kw.second);
      refs_.readContents(kw.second);
    }
  if (numbers_.active()) p.numberCall = numberCall(p);  // finishCall lifts it
  p.loopTrip = loopTrip(p);  // range(n) over a size: the loop may roll, deciding nothing on n
  if ((sizes_.active() || numbers_.active()) && !p.numberCall && p.loopTrip < 0) {
    std::vector<NodeId> passed = p.positional;
    for (auto& kw : p.keywords) passed.push_back(kw.second);
    bool sizes = false, numbers = false;
    for (NodeId n : passed) {
      sizes = sizes || (sizes_.active() && sizes_.holds(n));
      numbers = numbers || (numbers_.active() && numbers_.holds(n));
    }
    // Its operators take them. Numbers only where native code (torch's
    // bindings) passes them on as they are: a Python function under an
    // annotation may compute with them unseen.
    if (numbers && (!a.op || PyFunction_Check(callable)))
      for (NodeId n : passed)
        if (!(appendsArgument(p) && n == p.positional[1]))  // it stays the number it was (finishAnnotatedCall)
          numbers_.fix(n, p.calleeName + " takes a number");
    if ((sizes || numbers) && a.op) hintOperators(passed);
    else if (sizes) sizes_.use(p.calleeName + " takes a size");
  }
  // Python code under an annotation is summarized by it, not traced.
  // (A native callee's callbacks, sorted's key or map's function, are traced.)
  bool pythonClass =
      PyType_Check(callable) && (reinterpret_cast<PyTypeObject*>(callable)->tp_flags & Py_TPFLAGS_HEAPTYPE);
  p.traceCallees = !PyFunction_Check(callable) && !pythonClass;
  if (p.traceCallees && passesNativeCallback(p)) return;
  // A constant factory fills its tensor from Python data without operators:
  // record none. Given a tensor (torch.as_tensor(t, dtype)) it converts it
  // with operators, recorded as any.
  p.suppressOps = a.constant && !convertsTensor(p);
  if (a.module && !p.positional.empty() && p.positional[0] >= 0) readLayer(p.positional[0]);
  if (!a.pure && !a.op) {
    graphBreak(a.whyDynamic(p.calleeName) + "; it runs eagerly");
    return;
  }
  if (p.calleeName == "torch.Tensor.item" && p.positional.size() == 1 && p.positional[0] >= 0 &&
      refs_.node(p.positional[0]).kind == NodeKind::Tensor &&
      (p.itemOf = itemSource(tensorOf(p.positionalObjs[0]))) >= 0) {
    p.suppressOps = true;  // the graph's aten::item node (liftItem) stands for its operators
    return;
  }
  for (size_t i = 0; i < p.positional.size(); ++i)
    if (p.positional[i] >= 0 && breaksOnAnnotatedArgument(p, i)) return;
}

// F.apply(*args) of a custom torch.autograd.Function F runs F.forward(ctx,
// *args) with grad mode off and, with grad mode on, attaches F.backward to
// the results of a call whose tensor arguments require grad. The call is
// its forward, traced as a call of F.forward (a fresh ctx, then the
// arguments as passed), a no_grad region when grad mode is on; the record
// guards grad mode and F.forward where the program found F. Where autograd
// would attach the backward, which needs Python, the record is forward
// only: native replay (no autograd) serves it, the JIT runs its calls as
// Python, so gradients stay eager's.
void Monitor::beginAutogradFunction(Pending& p, PyObject* function) {
  readAutogradMode();
  std::string name = qualifiedName(function);
  if (at::GradMode::is_enabled()) {
    ops_->allowGradRegions();  // apply switches grad mode off around forward, whose mode at entry is guarded
    for (PyObject* arg : p.positionalObjs)
      if (arg && isTensor(arg) && tensorOf(arg).requires_grad() && forwardOnly_.empty())
        forwardOnly_ = "custom autograd Function " + name + " has arguments that require grad, and its backward needs Python";
  }
  // The program found apply on the class: guard forward where it finds it.
  PyRef forward = PyRef::steal(PyObject_GetAttrString(function, "forward"));
  NodeId cls = refs_.find(function);
  if (!forward || cls == kNoNode) {
    PyErr_Clear();
    graphBreak("custom autograd Function " + name + ": magpy cannot name the class whose forward it runs",
               name + ".apply");
    return;
  }
  p.calleeFunction = refs_.read(cls, Relation::attr("forward"), forward.get());
  p.autogradForward = true;
  p.traceCallees = true;
}

// A native callee that calls an argument (map's function, max's key) runs
// Python callbacks in frames the monitor traces, but a native one unseen:
// what log.append writes or d.get reads would be neither replayed nor
// guarded. A method that only reads its object (max(d, key=d.get)) reads
// all of it, as far as the record knows; any other native callable
// breaks the graph (functools.partial only keeps it: the partial's call
// is resolved as any).
bool Monitor::passesNativeCallback(const Pending& p) {
  if (p.calleeName == "functools.partial") return false;
  std::vector<std::pair<PyObject*, NodeId>> passed;
  for (size_t i = 0; i < p.positionalObjs.size(); ++i) passed.push_back({p.positionalObjs[i], p.positional[i]});
  for (size_t i = 0; i < p.keywordObjs.size(); ++i) passed.push_back({p.keywordObjs[i], p.keywords[i].second});
  for (auto [v, node] : passed) {
    Callback kind = v ? callbackKind(v) : Callback::Traced;
    if (kind == Callback::Traced) continue;
    if (kind == Callback::ReadsItsObject && node >= 0) {
      NodeId object = refs_.read(node, Relation::attr("__self__"), boundObject(v));
      std::string how = p.calleeName + " calls " + qualifiedName(v) + " on it";
      refs_.use(object);
      refs_.readContents(object);
      for (auto& e : refs_.node(object).last().refs) {
        if (e.target < 0) continue;
        refs_.use(e.target);
        // What native code computes with the elements is unseen: their values are the record's.
        if (numbers_.active() && numbers_.holds(e.target)) numbers_.fix(e.target, how);
        if (sizes_.active() && sizes_.holds(e.target)) sizes_.use(how);
      }
      continue;
    }
    std::string name = qualifiedName(v);
    if (name.empty()) name = "a " + typeName(Py_TYPE(v)) + " object";
    graphBreak(p.calleeName + " is given " + name +
                   ", a native callable it calls where the monitor cannot see what the call reads or writes: "
                   "call it from Python code (a for loop, a lambda)",
               p.calleeName);
    return true;
  }
  return false;
}

// What calling `callback` from native code runs. Python functions,
// methods and classes run traced. A native function of a module or type
// is Traced too where its annotation says it reads only its arguments'
// values and writes nothing (len, int, operator.add, torch.relu, whose
// operators the recorder sees); a native method bound to an object whose
// annotation says it only reads that object (d.get, lst.count) is
// ReadsItsObject; anything else is Unseen.
Monitor::Callback Monitor::callbackKind(PyObject* callback) const {
  if (!PyCallable_Check(callback) || PyType_Check(callback) || PyFunction_Check(callback)) return Callback::Traced;
  if (PyMethod_Check(callback))
    return PyFunction_Check(PyMethod_GET_FUNCTION(callback)) ? Callback::Traced : Callback::Unseen;
  if (isPartial(callback)) {
    PyRef func = PyRef::steal(PyObject_GetAttrString(callback, "func"));
    if (!func) PyErr_Clear();
    return func && callbackKind(func.get()) == Callback::Traced ? Callback::Traced : Callback::Unseen;
  }
  if (Py_TYPE(callback)->tp_flags & Py_TPFLAGS_HEAPTYPE) return Callback::Traced;  // a Python class's __call__
  const record::FunctionAnnotation* a = annotations_.find(qualifiedName(callback));
  if (!a || !(a->pure || a->op) || a->module || a->output_in_place || !a->runtime_read.empty() ||
      !a->runtime_write.empty())
    return Callback::Unseen;
  auto touches = [](const record::InputAnnotation& in) { return in.in_place || in.object_state; };
  if (touches(a->rest) || std::any_of(a->inputs.begin(), a->inputs.end(), touches)) return Callback::Unseen;
  bool bound = boundObject(callback) != nullptr;
  bool readsObject = true;
  for (const auto& r : a->relations)
    readsObject = readsObject && r.from == 0 && r.mode == record::RelationAnnotation::Mode::Read;
  if (!bound) return a->relations.empty() ? Callback::Traced : Callback::Unseen;
  return readsObject && !a->op ? Callback::ReadsItsObject : Callback::Unseen;
}

// Whether the annotated callee reads argument i in a way the graph cannot
// hold (and breaks if so).
bool Monitor::breaksOnAnnotatedArgument(const Pending& p, size_t i) {
  const record::FunctionAnnotation& a = *p.annotation;
  NodeId n = p.positional[i];
  // sum(it), next(it): native code advances an iterator the call was given.
  if (a.input(i).value_read && !a.input(i).identity_only && iteratesOutsideIterator(n)) return true;
  const ShadowNode& node = refs_.node(n);
  if (node.kind == NodeKind::Tensor) {
    if (a.input(i).metadata_only && !isSizeCall(p)) sizes_.use(p.calleeName + " reads a size");  // size() is followed
    bool readsContents = a.input(i).value_read && !a.input(i).metadata_only && !a.input(i).identity_only;
    bool converts = a.constant && !p.suppressOps;  // torch.as_tensor(t): operators (beginAnnotatedCall)
    const at::Tensor& t = tensorOf(node.obj);
    if (readsContents && !a.op && !converts && !ops_->contentsFixedByGuards(t) && !checksContents(t)) {
      graphBreak(p.calleeName + " reads the contents of a tensor (argument " + std::to_string(i) +
                 ") into a Python value, and the program's Python code depends on it: data-dependent control "
                 "flow is not captured. To remove this break, keep the value in tensor operations (torch.where, "
                 "masks, clamp) or pass it to the compiled function as an argument" +
                 (call_->contentChecks ? "" : " (its records check such reads where they can, and " +
                                                  std::to_string(kMaxCheckedRecords) + " records did not serve this call)"));
      return true;
    }
    if (!readsContents && ops_->hasDataDependentShape(t) && !checksSizes(t)) {
      graphBreak(p.calleeName + " reads the shape of a tensor whose size depends on tensor contents");
      return true;
    }
  } else if (a.input(i).object_state && holdsObjectState(p.positionalObjs[i])) {
    graphBreak(p.calleeName + " reads the attributes or identity of an object in argument " + std::to_string(i) +
               " natively, where magpy neither traces nor guards them");
    return true;
  } else if (a.constant && holdsTensor(p.positionalObjs[i], 0)) {
    graphBreak(p.calleeName + " reads the contents of tensors inside a list or tuple (argument " + std::to_string(i) +
               "); its result cannot be a graph constant");
    return true;
  } else if (a.input(i).value_read && externalOpaque(n)) {
    graphBreak(p.calleeName + " reads a " + Py_TYPE(node.obj)->tp_name + " object whose contents magpy cannot guard");
    return true;
  }
  return false;
}

// A standard layer's forward, summarized: what it reads of the layer is its
// parameters, buffers and plain attributes (hyperparameters, `training`).
void Monitor::readLayer(NodeId layer) {
  PyObject* obj = refs_.node(layer).obj;
  PyObject* dict = obj ? instanceDict(obj) : nullptr;
  if (!dict || !PyDict_Check(dict)) return;
  auto readAll = [&](PyObject* d, bool plainOnly) {
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    std::vector<std::pair<std::string, PyObject*>> items;
    while (PyDict_Next(d, &pos, &k, &v)) {
      std::string name = utf8(k);
      if (plainOnly && (name.empty() || name[0] == '_')) continue;
      items.push_back({name, v});
    }
    for (auto& [name, value] : items) {
      NodeId n = refs_.read(layer, Relation::attr(name), value);
      registerTensor(n);
      // The layer's forward is not traced: it uses its numbers as they are.
      if (numbers_.active()) numbers_.fix(n, "a " + typeName(Py_TYPE(obj)) + " layer reads its ." + name);
    }
  };
  readAll(dict, true);
  for (const char* holder : {record::kModuleParameters, record::kModuleBuffers})
    if (PyObject* d = moduleHolder(dict, holder)) readAll(d, false);
}

// CALL, CALL_FUNCTION_EX: the result, from the traced callee's return, the
// annotation, or as a new value.
bool Monitor::finishCall(Step& s) {
  Pending& p = s.p;
  PyObject* result = s.outObj(0);
  if (p.dataParallel) return finishDataParallel(s);
  if (NodeId returned = p.calleeReturned(result); returned != kNoNode) {
    s.out[0] = returned;
    return true;
  }
  if (p.backward) return finishBackward(s);
  if (p.returnsSelf) {
    s.out[0] = p.positional[0];
    return true;
  }
  if (p.dereferences) {
    s.out[0] = refs_.read(p.callableNode, Relation::attr(record::kWeakReferent), result);
    registerTensor(s.out[0]);
    return true;
  }
  if (p.inlined) {
    PyObject* f = refs_.node(p.calleeFunction).obj;
    if (f && PyFunction_Check(f) && codeIsGenerator(reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(f)))) {
      // Calling a generator function makes a generator without running it;
      // its frame is bound when it first runs.
      auto saved = std::make_unique<Pending>();
      saved->inlined = true;
      saved->calleeFunction = p.calleeFunction;
      saved->positional = p.positional;
      saved->positionalObjs = p.positionalObjs;
      saved->keywords = p.keywords;
      saved->keywordObjs = p.keywordObjs;
      s.out[0] = newNode(result);
      unstarted_[result] = std::move(saved);
      return true;
    }
    graphBreak("internal: " + p.calleeName + " returned without a traced return");
    return false;
  }
  if (p.annotation && makesLeafRequiringGrad(result)) return false;
  s.out[0] = p.annotation ? applyAnnotation(p, result) : newNode(result);
  if (p.itemOf >= 0 && s.out[0] >= 0) liftItem(p, s.out[0]);
  if (p.numberCall && s.out[0] >= 0) numbers_.liftArithmetic(p.numberCall, p.positional, s.out[0]);
  if (p.loopTrip >= 0 && s.out[0] >= 0) rangeMade(s.out[0], p.loopTrip);
  if (s.out[0] >= 0 && isSizeCall(p)) {
    if (PyTuple_Check(result)) {
      sizes_.tagAll(s.out[0], p.positional[0]);
    } else if (p.calleeName == "builtins.len") {
      sizes_.tag(s.out[0], p.positional[0], 0);
    } else if (p.positionalObjs.size() > 1 && PyLong_CheckExact(p.positionalObjs[1])) {
      int64_t dim = PyLong_AsLongLong(p.positionalObjs[1]);
      if (dim < 0) dim += tensorOf(p.positionalObjs[0]).dim();
      sizes_.tag(s.out[0], p.positional[0], dim);
    } else {
      sizes_.use("size() with a keyword");  // not followed
    }
  }
  return s.out[0] != kNoNode;
}

// t.requires_grad_(flag) where t's flag already is `flag` (the optimizers'
// zero_grad on a gradient): nothing changes. For a tensor of the state its
// guard holds the flag; for one the run made, the grad mode decides it.
bool Monitor::keepsRequiresGrad(const Pending& p) {
  if (p.positional.empty() || p.positional[0] < 0 || !isTensor(p.positionalObjs[0]) || p.positionalObjs.size() > 2)
    return false;
  PyObject* flag = p.positionalObjs.size() == 2 ? p.positionalObjs[1] : Py_True;
  for (size_t k = 0; k < p.keywords.size(); ++k)
    flag = p.keywords[k].first == "requires_grad" && p.positionalObjs.size() == 1 ? p.keywordObjs[k] : nullptr;
  if (!flag || !PyBool_Check(flag) || tensorOf(p.positionalObjs[0]).requires_grad() != (flag == Py_True)) return false;
  for (NodeId n : p.positional) refs_.use(n);
  for (auto& kw : p.keywords) refs_.use(kw.second);
  const ShadowNode& t = refs_.node(p.positional[0]);
  if (!t.external || t.versions.size() > 1) readAutogradMode();
  return true;
}

// torch.ones(..., requires_grad=True), torch.tensor(data, requires_grad=True):
// Python sets the flag after the operator made the tensor, so the graph's
// value would not require grad. A leaf that requires grad is a break.
bool Monitor::makesLeafRequiringGrad(PyObject* result) {
  if (!result || !isTensor(result)) return false;
  const at::Tensor& t = tensorOf(result);
  if (!t.requires_grad() || !t.is_leaf()) return false;
  int value = ops_->valueOf(t);
  if (value < 0) return false;
  const record::Node& node = ops_->graph().nodes[size_t(value)];
  if (ops_->readsState(value) || (node.outputs.size() == 1 && node.outputs[0].requires_grad)) return false;
  graphBreak("the call makes a tensor that requires grad (requires_grad=True), a leaf no operator of the graph makes");
  return true;
}

NodeId Monitor::applyAnnotation(Pending& p, PyObject* result) {
  const record::FunctionAnnotation& a = *p.annotation;
  if (!a.runtime_read.empty()) readRuntimeState(a.runtime_read);
  if (!a.runtime_write.empty() && !writeRuntimeState(p, a.runtime_write)) return kNoNode;

  NodeId out = kNoNode;
  auto args = p.positionalObjs;
  for (auto& r : a.relations) {
    if (size_t(r.from) >= p.positional.size()) continue;
    NodeId from = p.positional[size_t(r.from)];
    PyObject* container = args[size_t(r.from)];
    Relation rel;
    if (!relationFor(r, container, args, rel)) {
      graphBreak(p.calleeName + ": the name or key of its " + (r.kind == record::RelationAnnotation::Kind::Attr ? "attribute" : "item") +
                 " is not a str or int");
      return kNoNode;
    }
    switch (r.mode) {
      case record::RelationAnnotation::Mode::Read:
      case record::RelationAnnotation::Mode::Exists: {
        if (rel.kind == Relation::Kind::Attr) {
          PyRef name = PyRef::steal(PyUnicode_FromString(rel.name.c_str()));
          if (name && attributeRunsPython(container, name.get())) {
            graphBreak(p.calleeName + " reads ." + rel.name + " through Python code (a property or __getattr__) "
                       "that magpy does not trace from here, and a guard must not run");
            return kNoNode;
          }
          PyErr_Clear();
        }
        PyRef element = elementOf(container, rel);
        if (!element) {
          absent_.push_back({from, rel});  // the call relied on it being absent (a default)
          break;
        }
        NodeId e = refs_.read(from, rel, element.get());
        registerTensor(e);
        if (r.mode == record::RelationAnnotation::Mode::Read && r.to < 0 && element.get() == result) out = e;
        break;
      }
      case record::RelationAnnotation::Mode::Write: {
        NodeId value = r.to < 0 ? newNode(result) : (size_t(r.to) < p.positional.size() ? p.positional[size_t(r.to)] : kNoNode);
        if (value == kNoNode) break;
        refs_.write(from, rel, value);
        break;
      }
      case record::RelationAnnotation::Mode::Delete:
        refs_.remove(from, rel);
        break;
    }
  }
  for (size_t i = 0; i < p.positional.size(); ++i) {
    NodeId n = p.positional[i];
    if (n >= 0 && a.input(i).in_place && refs_.node(n).kind != NodeKind::Tensor) refs_.changedInPlace(n);
  }
  if (appendsArgument(p)) refs_.appended(p.positional[0], p.positional[1], p.positionalObjs[1]);
  if (out != kNoNode) return out;
  // The result: an argument returned as is (x.add_(y) returns x), or a new value.
  if (!isAtom(result))
    for (size_t i = 0; i < p.positionalObjs.size(); ++i)
      if (p.positionalObjs[i] == result && p.positional[i] >= 0) {
        if (a.output_in_place && refs_.node(p.positional[i]).kind != NodeKind::Tensor) refs_.changedInPlace(p.positional[i]);
        return p.positional[i];
      }
  out = newNode(result);
  ShadowNode& r = refs_.node(out);
  if (r.kind == NodeKind::Atom)
    for (NodeId i : p.positional)
      if (i >= 0 && refs_.node(i).dataDependent) r.dataDependent = true;
  if (a.constant && r.kind == NodeKind::Tensor && ops_->valueOf(tensorOf(result)) < 0) {
    // A tensor made from Python data (torch.tensor([...])): a constant of
    // the graph, since the data it was made from is guarded or constant.
    const at::Tensor& t = tensorOf(result);
    constants_.push_back({ops_->addConstant(t, -1), t.detach().clone()});
  }
  return out;
}

}  // namespace magpy::capture

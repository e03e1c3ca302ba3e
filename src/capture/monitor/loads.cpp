// Loads and stores: locals and the stack, globals and builtins, cells,
// attributes, imports and function objects. A value read from outside the
// call is read along its path (a global, an attribute of a module or
// object); values the run makes are new nodes.
#include "capture/monitor/monitor.h"
#include "capture/monitor/state.h"

#include <algorithm>

namespace magpy::capture {
namespace {

// Tensor attributes that are metadata: a function of the tensor's guarded
// (or shape-inferred) metadata, never of its contents.
bool isTensorMetadata(const std::string& name) {
  static const char* kNames[] = {"shape", "dtype", "device", "ndim", "is_cuda", "is_sparse", "layout",
                                 "is_quantized", "is_meta", "is_mkldnn",
                                 "is_complex", "is_floating_point", "names", "is_nested"};
  return std::any_of(std::begin(kNames), std::end(kNames), [&](const char* n) { return name == n; });
}

}  // namespace

// A constant, or a value fixed by the interpreter (AssertionError).
bool Monitor::finishNewValue(Step& s) {
  s.out[0] = newNode(s.outObj(0));
  return true;
}

bool Monitor::finishLoadFast(Step& s) {
  NodeId local = s.frame.locals[size_t(s.ins().arg)];
  s.out[0] = local != kNoNode ? local : newNode(s.outObj(0));
  return true;
}

bool Monitor::finishStoreFast(Step& s) {
  s.frame.locals[size_t(s.ins().arg)] = s.in(0);
  return true;
}

bool Monitor::finishDeleteFast(Step& s) {
  s.frame.locals[size_t(s.ins().arg)] = kNoNode;
  return true;
}

bool Monitor::finishCopy(Step& s) {
  s.out[0] = slotNode(s.frame, int(s.frame.stack.size()) - s.ins().arg);
  return true;
}

bool Monitor::finishSwap(Step& s) {
  for (size_t k = 0; k < s.out.size(); ++k) s.out[k] = s.in(k);
  std::swap(s.out.front(), s.out.back());
  return true;
}

bool Monitor::finishLoadGlobal(Step& s) {
  PyObject* name = s.name();
  PyObject* value = s.outObj(s.out.size() - 1);
  if (loadGlobalPushesNull(s.ins())) s.out[0] = kNull;
  if (PyDict_GetItem(s.frame.view.globals(), name)) {
    s.out.back() = refs_.read(s.frame.globals, Relation::attr(utf8(name)), value);
  } else {
    // A builtin, found because the module has no global of that name.
    absent_.push_back({s.frame.globals, Relation::attr(utf8(name))});
    NodeId builtins = refs_.read(kExternal, Relation::module("builtins"), PyImport_AddModule("builtins"));
    s.out.back() = refs_.read(builtins, Relation::attr(utf8(name)), value);
  }
  registerTensor(s.out.back());
  return true;
}

bool Monitor::finishStoreGlobal(Step& s) {
  refs_.write(s.frame.globals, Relation::attr(utf8(s.name())), s.in(0));
  return true;
}

bool Monitor::finishDeleteGlobal(Step& s) {
  refs_.remove(s.frame.globals, Relation::attr(utf8(s.name())));
  return true;
}

bool Monitor::finishLoadDeref(Step& s) {
  NodeId cell = s.frame.locals[size_t(s.ins().arg)];
  PyObject* value = s.outObj(0);
  s.out[0] = cell == kNoNode ? newNode(value) : refs_.read(cell, Relation::attr("cell_contents"), value);
  registerTensor(s.out[0]);
  return true;
}

bool Monitor::finishStoreDeref(Step& s) {
  NodeId cell = s.frame.locals[size_t(s.ins().arg)];
  if (cell == kNoNode) return false;
  refs_.write(cell, Relation::attr("cell_contents"), s.in(0));
  return true;
}

bool Monitor::finishDeleteDeref(Step& s) {
  NodeId cell = s.frame.locals[size_t(s.ins().arg)];
  if (cell != kNoNode) refs_.remove(cell, Relation::attr("cell_contents"));
  return true;
}

bool Monitor::finishLoadAttr(Step& s) {
  s.out[0] = loadAttr(s.in(0), s.inObj(0), s.name(), s.outObj(0), s.p);
  return true;
}

// CPython 3.11's LOAD_METHOD: [function, self] when the method came from
// the object's class, else [NULL, attribute].
bool Monitor::finishLoadMethod(Step& s) {
  PyObject* function = s.outObj(0);
  if (!function) {
    s.out[0] = kNull;
    s.out[1] = loadAttr(s.in(0), s.inObj(0), s.name(), s.outObj(1), s.p);
    return true;
  }
  const ShadowNode& owner = refs_.node(s.in(0));
  if (owner.kind == NodeKind::Object || owner.kind == NodeKind::Module || owner.kind == NodeKind::Function) {
    NodeId cls = refs_.read(s.in(0), Relation::attr("__class__"), reinterpret_cast<PyObject*>(Py_TYPE(s.inObj(0))));
    s.out[0] = refs_.read(cls, Relation::attr(utf8(s.name())), function);
    // The instance's __dict__ must not shadow it (a method patched on one instance).
    if (owner.kind == NodeKind::Object && instanceDict(s.inObj(0))) classMethods_.insert({s.in(0), utf8(s.name())});
  } else {
    s.out[0] = newNode(function);  // a method of a builtin type: fixed
  }
  s.out[1] = s.in(0);
  return true;
}

// Whether `t.requires_grad = flag` changed nothing: t is a value the graph
// computes or a constant it made (not state), and its flag was and is
// `flag`. Real code sets it on fresh tensors (a zero initial state) to say
// they need no grad.
bool Monitor::storesItsOwnRequiresGrad(const Step& s) {
  if (utf8(s.name()) != "requires_grad" || !PyBool_Check(s.inObj(0))) return false;
  const at::Tensor& t = tensorOf(s.inObj(1));
  int value = ops_->valueOf(t);
  if (value < 0) return false;
  const record::Node& node = ops_->graph().nodes[size_t(value)];
  bool flag = s.inObj(0) == Py_True;
  if (ops_->readsState(value) || node.outputs.size() != 1 || node.outputs[0].requires_grad != flag || t.requires_grad() != flag)
    return false;
  readAutogradMode();  // the flag the graph gives t follows from it (and from guarded inputs)
  return true;
}

// inputs: value, owner
bool Monitor::finishStoreAttr(Step& s) {
  if (refs_.node(s.in(1)).kind == NodeKind::Tensor) {
    if (storesItsOwnRequiresGrad(s)) return true;
    if (utf8(s.name()) == "grad") {  // a tensor's gradient slot is state like an attribute (torch checked the value)
      refs_.write(s.in(1), Relation::attr("grad"), s.in(0));
      return true;
    }
    graphBreak("writing an attribute of a tensor (" + utf8(s.name()) + ") is not captured" +
               (utf8(s.name()) == "requires_grad" ? " (except requires_grad set to what a tensor the call made has)" : ""));
    return false;
  }
  if (s.p.calleeResult != kNoNode) return true;  // a traced __setattr__ did the write
  refs_.write(s.in(1), Relation::attr(utf8(s.name())), s.in(0));
  return true;
}

bool Monitor::finishDeleteAttr(Step& s) {
  if (s.p.calleeResult == kNoNode) refs_.remove(s.in(0), Relation::attr(utf8(s.name())));
  return true;
}

bool Monitor::finishImportName(Step& s) {
  PyObject* module = s.outObj(0);
  s.out[0] = PyModule_Check(module) ? moduleNode(module) : newNode(module);
  return true;
}

// inputs: module; outputs: module, the name imported from it
bool Monitor::finishImportFrom(Step& s) {
  s.out[0] = s.in(0);
  s.out[1] = refs_.read(s.in(0), Relation::attr(utf8(s.name())), s.outObj(1));
  registerTensor(s.out[1]);
  return true;
}

bool Monitor::finishMakeFunction(Step& s) {
  NodeId f = newNode(s.outObj(0));
  // inputs (bottom first): [defaults] [kwdefaults] [annotations] [closure] code
  const int flags = s.ins().arg;
  size_t k = 0;
  if (flags & 1) refs_.write(f, Relation::attr("__defaults__"), s.in(k++));
  if (flags & 2) refs_.write(f, Relation::attr("__kwdefaults__"), s.in(k++));
  if (flags & 4) k++;
  if (flags & 8) refs_.write(f, Relation::attr("__closure__"), s.in(k++));
  s.out[0] = f;
  return true;
}

NodeId Monitor::loadAttr(NodeId owner, PyObject* ownerObj, PyObject* name, PyObject* value, Pending& p) {
  // Guards name a module's globals (G(m)[...]), which are what a plain
  // module answers with; a ModuleType subclass may answer otherwise.
  if (refs_.node(owner).kind == NodeKind::Module && !globalsAnswerLookups(ownerObj)) {
    const char* module = PyModule_GetName(ownerObj);  // null for a module whose __name__ was deleted
    if (!module) PyErr_Clear();
    graphBreak("the program reads ." + utf8(name) + " of module " + (module ? module : "?") + ", whose class " +
               Py_TYPE(ownerObj)->tp_name + " is a subclass of ModuleType: its lookup may run code no guard holds");
  }
  if (NodeId computed = p.calleeReturned(value); computed != kNoNode) {  // a property or descriptor computed it
    // A descriptor without __set__ yields to the instance's __dict__: it must not gain the name.
    PyObject* d = classLookup(Py_TYPE(ownerObj), name);
    if (d && !Py_TYPE(d)->tp_descr_set && instanceDict(ownerObj) && refs_.node(owner).kind == NodeKind::Object)
      classMethods_.insert({owner, utf8(name)});
    // A module's __getattr__ (PEP 562) answers only for names its globals lack.
    if (!d && refs_.node(owner).kind == NodeKind::Module) absent_.push_back({owner, Relation::attr(utf8(name))});
    return computed;
  }
  if (PyMethod_Check(value) && PyMethod_GET_SELF(value) == ownerObj)
    if (NodeId method = boundMethod(owner, ownerObj, name, value); method != kNoNode) return method;
  std::string attr = utf8(name);
  const ShadowNode& o = refs_.node(owner);
  switch (o.kind) {
    case NodeKind::Tensor:
      if (attr == "grad") {  // state like an attribute: autograd and the program store into it
        NodeId id = refs_.read(owner, Relation::attr(attr), value);
        registerTensor(id);
        return id;
      }
      if (attr == "data" && isTensor(value)) {  // the same memory without autograd (p.data.add_(...))
        const at::Tensor& t = tensorOf(ownerObj);
        if (t.requires_grad() && !t.is_leaf()) {
          graphBreak("reading .data of a tensor autograd computed (not a leaf) is not captured: writes through it "
                     "bypass autograd, which replay's operators cannot");
          return newNode(value);
        }
        int source = ops_->valueOf(t);
        if (source < 0) source = externalTensor(t);
        if (source >= 0 && t.requires_grad()) {
          NodeId id = newNode(value);
          ops_->addDetached(tensorOf(value), source, currentLocation());
          tensorNodes_[tensorOf(value).unsafeGetTensorImpl()] = owner;  // its writes are the owner's
          return id;
        }
      }
      if (attr == "requires_grad" || attr == "is_leaf" || attr == "grad_fn") {
        readAutogradState(owner, attr);
        return newNode(value);
      }
      if (isTensorMetadata(attr)) {
        if (attr == "shape" && ops_->hasDataDependentShape(tensorOf(ownerObj)) && !checksSizes(tensorOf(ownerObj)))
          graphBreak("the shape of a tensor whose size depends on tensor contents is read");
        NodeId n = newNode(value);
        if (attr == "shape") sizes_.tagAll(n, owner);
        return n;
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

// obj.method: a new bound method of a function found on obj's class. Its
// parts are what the program depends on, not the bound object. kNoNode
// when the instance's __dict__ holds the method itself.
NodeId Monitor::boundMethod(NodeId owner, PyObject* ownerObj, PyObject* name, PyObject* method) {
  PyObject* cls = reinterpret_cast<PyObject*>(Py_TYPE(ownerObj));
  PyObject* dict = PyObject_GenericGetDict(ownerObj, nullptr);
  bool hasDict = dict && PyDict_Check(dict);
  bool onInstance = hasDict && PyDict_GetItem(dict, name);
  Py_XDECREF(dict);
  PyErr_Clear();
  if (onInstance) return kNoNode;
  std::string attr = utf8(name);
  if (hasDict) classMethods_.insert({owner, attr});
  NodeId c = refs_.read(owner, Relation::attr("__class__"), cls);
  // A native class (pybind11's) keeps a builtin function as an
  // instancemethod wrapping it: that entry is what the class holds, and
  // what its guard finds there.
  PyObject* function = PyMethod_GET_FUNCTION(method);
  PyObject* entry = classLookup(Py_TYPE(ownerObj), name);
  if (entry && PyInstanceMethod_Check(entry) && PyInstanceMethod_GET_FUNCTION(entry) == function) function = entry;
  NodeId f = refs_.read(c, Relation::attr(attr), function);
  NodeId m = newNode(method);
  refs_.write(m, Relation::attr("__func__"), f);
  refs_.write(m, Relation::attr("__self__"), owner);
  return m;
}

// A tensor's autograd state. For a tensor the run made or wrote it follows
// from the grad mode (guarded once read) and the inputs' requires_grad
// (guarded with their metadata); for one from outside, requires_grad is
// guarded, but whether one that requires grad is a leaf is not.
void Monitor::readAutogradState(NodeId tensor, const std::string& attr) {
  const ShadowNode& n = refs_.node(tensor);
  if (!n.external || n.versions.size() > 1) {  // made or written in place by the run
    readAutogradMode();
  } else if (attr != "requires_grad" && tensorOf(n.obj).requires_grad()) {
    graphBreak("the program reads " + attr + " of a tensor from outside the call that requires grad; " +
               "whether it is a leaf is not guarded");
  }
}

}  // namespace magpy::capture

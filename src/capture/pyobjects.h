// Reading and making Python objects: scalars as record atoms, qualified
// names of callables and types, tensors. The torch parts live in
// pyobjects_torch.cpp, the only file that includes libtorch_python headers.
#pragma once

#include <Python.h>

#include <optional>
#include <string>
#include <string_view>

#include "magpy/record/value.h"
#include "magpy/support/error.h"

namespace at { class Tensor; }
namespace c10 { struct IValue; }

namespace magpy::capture {

// Holds the GIL for a scope. The operator observer runs inside ATen
// calls, some of which torch's bindings make with the GIL released (a
// tensor's truth under `if t:`): the monitor's callbacks from there take it
// before they touch Python objects. Cheap when the thread holds it.
class GilScope {
 public:
  GilScope() : state_(PyGILState_Ensure()) {}
  ~GilScope() { PyGILState_Release(state_); }
  GilScope(const GilScope&) = delete;
  GilScope& operator=(const GilScope&) = delete;

 private:
  PyGILState_STATE state_;
};

// A Python object that owns one reference; for locals that must not leak.
class PyRef {
 public:
  PyRef() = default;
  static PyRef steal(PyObject* o) { PyRef r; r.o_ = o; return r; }
  static PyRef borrow(PyObject* o) { Py_XINCREF(o); return steal(o); }
  PyRef(const PyRef& other) : o_(other.o_) { Py_XINCREF(o_); }
  PyRef(PyRef&& other) noexcept : o_(other.o_) { other.o_ = nullptr; }
  PyRef& operator=(PyRef other) noexcept { std::swap(o_, other.o_); return *this; }
  ~PyRef() { Py_XDECREF(o_); }
  PyObject* get() const { return o_; }
  PyObject* release() { PyObject* o = o_; o_ = nullptr; return o; }
  explicit operator bool() const { return o_ != nullptr; }

 private:
  PyObject* o_ = nullptr;
};

// Immutable scalars that records hold by value: None, bool, int, float,
// str, Ellipsis and the torch enums (dtype, device, layout, memory_format).
bool isAtom(PyObject* o);
// An object whose behaviour its identity fixes: a type, a function, a
// module, a native function or method descriptor not bound to an object.
bool fixedByIdentity(PyObject* o);
// A value that cannot change: an atom, a tuple of such values, or an
// object fixed by its identity.
bool immutableValue(PyObject* o);
std::optional<record::Atom> atomOf(PyObject* o);

// The int, float or str value of an instance of a class derived from one
// of them (an IntEnum member, a str subclass); nullopt for anything else.
std::optional<record::Atom> baseValueOf(PyObject* o);

// An enum.Enum member's qualified name ("__main__.Mode.A"), or "" when `o`
// is not one. Members are singletons: a guard compares identity.
std::string enumMemberName(PyObject* o);
PyRef atomObject(const record::Atom& a);  // throws Error for unknown enums
// A dict key as records hold it: a scalar atomOf takes, or a tuple of such
// keys; nothing for other keys (objects, frozensets).
std::optional<record::Atom> dictKey(PyObject* key);

// The str attribute `name` of o; "" when it is missing or not a str.
std::string attrString(PyObject* o, const char* name);

// The interned str for an attribute name, made once per process and kept
// (borrowed): lookups with it use CPython's type attribute cache, and
// making and interning a str per lookup cost more than the lookup.
PyObject* internedName(std::string_view name);

// Whether t is defined in `package` or one of its submodules
// (definedIn(Conv2d, "torch.nn.modules")).
bool definedIn(PyTypeObject* t, std::string_view package);
// Whether a module ("re", "enum", "importlib.util") is part of Python's
// standard library (sys.stdlib_module_names).
bool standardLibrary(const std::string& module);

// Whether t is defined by torch or by Python's standard library (its
// module's top-level package is torch or in sys.stdlib_module_names).
bool platformClass(PyTypeObject* t);
// Whether lookups of a module's attributes answer with its globals, as
// guards name them (G(m)[...]): a plain module, or one of a class of the
// platform (torch._VF's lazy __getattr__). A ModuleType subclass of the
// program's may put a property or a __getattribute__ first.
bool globalsAnswerLookups(PyObject* module);

// nn.Module's layout: Module.__setattr__ files an instance's parameters,
// buffers and submodules into dicts of its __dict__ (record::kModuleDicts),
// not into the __dict__ itself. That dict of a module instance's __dict__
// (borrowed), or null; `holder` is one of record::kModuleDicts.
PyObject* moduleHolder(PyObject* instanceDict, const char* holder);
// Whether instances of t find attributes as nn.Module's do: object's
// __getattribute__, then Module.__getattr__, which looks in those dicts (in
// Python). For such a class the same lookup is done natively by moduleAttr.
bool plainModule(PyTypeObject* t);
// A module instance's attribute that its class does not define: in the
// instance's __dict__ or one of Module's dicts (borrowed into the PyRef);
// empty when none holds it.
PyRef moduleAttr(PyObject* obj, PyObject* name);

// "builtins.list", "__main__.MLP", "torch.nn.modules.linear.Linear"
std::string typeName(PyTypeObject* t);
// The name annotations and identity guards use for a callable:
// "builtins.len", "builtins.list.append", "torch.relu", "torch.Tensor.view",
// "torch.nn.functional.relu", "__main__.helper". Empty when it has none.
std::string qualifiedName(PyObject* callable);

// A stable hash of a Python function's bytecode and constants, so a guard
// notices a function redefined under the same name. Code objects are
// immutable: each is hashed once per process.
int64_t codeHash(PyObject* function);

// The text of a str object; "" for null or anything else.
std::string utf8(PyObject* s);

// str(o) without raising; "<unprintable>" on failure.
std::string safeRepr(PyObject* o);

// Formats and clears the pending Python exception: "ValueError: bad".
std::string takePythonError();

// module.name, imported on first use and kept for the process (borrowed;
// null when missing). For the library classes magpy compares types with:
// `static PyObject* partial = processAttr("functools", "partial");`
PyObject* processAttr(const char* module, const char* name);

// Whether o is a functools.partial object (exactly: a subclass may call
// differently).
bool isPartial(PyObject* o);

// The object a slot wrapper is bound to (super().__setattr__, x.__add__:
// a method-wrapper), borrowed from it; null for anything else.
PyObject* slotWrapperSelf(PyObject* o);

// The object a native method or slot wrapper is bound to (log.append,
// super().__setattr__), borrowed; null for anything else, and for the
// module, type or pybind11 function record a native function carries as
// its __self__, which is no object of the program's.
PyObject* boundObject(PyObject* callable);

// The keys of a dict in the order Python iterates them (borrowed).
template <class Visit>
void forEachDictKey(PyObject* dict, Visit visit) {
  if (!PyODict_Check(dict) || PyDict_GET_SIZE(dict) == 0) {
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(dict, &pos, &k, &v)) visit(k);
    return;
  }
  PyObject* keys = PyODict_Type.tp_iter(dict);
  while (PyObject* k = keys ? PyIter_Next(keys) : nullptr) {
    visit(k);
    Py_DECREF(k);
  }
  Py_XDECREF(keys);
  PyErr_Clear();
}

// The items of a dict in the order Python iterates them: an OrderedDict
// keeps its own order beside the dict's storage (move_to_end changes only
// the former). `visit(key, value)` gets borrowed references; it must not
// change the dict.
template <class Visit>
void forEachDictItem(PyObject* dict, Visit visit) {
  if (!PyODict_Check(dict)) {
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(dict, &pos, &k, &v)) visit(k, v);
    return;
  }
  forEachDictKey(dict, [&](PyObject* k) {  // OrderedDict's own iterator (native), whatever a subclass overrides
    PyObject* v = PyDict_GetItemWithError(dict, k);
    if (v) visit(k, v);
  });
  PyErr_Clear();
}

// Where CPython calls into magpy. A C++ exception must never unwind
// through the interpreter from any of them.
enum class PythonEntry : uint8_t {
  CompiledCall,  // a compiled object's call
  FrameHook,     // the frame evaluation hook (segments of a record with graph breaks)
  Trace,         // the per-instruction trace function of a monitored run
};
// magpy._fail_next_entry(name) arms one failure of an entry, for tests of
// that promise; failIfArmed throws it (std::logic_error) once.
bool armEntryFailure(const std::string& name);
void failIfArmed(PythonEntry entry);

// Runs `body` for the compiled call or the frame hook; `body` returns a
// new reference or null with the Python error set. Any C++ exception
// becomes a Python RuntimeError.
template <class Body>
PyObject* enteredFromPython(PythonEntry entry, Body body) noexcept {
  try {
    failIfArmed(entry);
    return body();
  } catch (const std::exception& e) {
    if (!PyErr_Occurred()) PyErr_Format(PyExc_RuntimeError, "magpy: %s", magpy::messageOf(e).c_str());
  } catch (...) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "magpy: an internal error of unknown kind");
  }
  return nullptr;
}

// Whether a and b are one object, or one function bound to one object: each
// access to a bound method makes a new method object (F.apply, obj.run),
// and what it calls is its function and receiver.
bool sameBinding(PyObject* a, PyObject* b);

// Whether some weak reference to o exists.
bool hasWeakReferences(PyObject* o);
// Clears every weak reference and proxy to o, as freeing o does, then
// calls their callbacks as CPython would. For an object only magpy keeps
// alive: o itself stays.
void clearWeakReferences(PyObject* o);

// Tensors (implemented in pyobjects_torch.cpp).
bool isTensor(PyObject* o);
// A dict key found by identity: a torch.Tensor or nn.Parameter, whose hash
// is its id (torch.optim keys its state by parameter). Access paths name
// it by the path of the object ("[@path]").
bool identityKey(PyObject* key);
// Whether dict d holds key; an identityKey is found by identity, without
// running its Python __hash__. False on errors (none left pending).
bool dictHolds(PyObject* d, PyObject* key);
// torch.Tensor or nn.Parameter, not a subclass with behaviour of its own.
bool plainTensorType(PyTypeObject* t);
const at::Tensor& tensorOf(PyObject* o);    // o must be a tensor
// The Python object that holds tensor t (borrowed), or null: t has none,
// or t holds it (torch keeps the object of a tensor C++ still holds after
// Python dropped it, for when Python sees the tensor again).
PyObject* pythonObjectHolding(const at::Tensor& t);
PyRef wrapTensor(const at::Tensor& t);       // the existing Python object when there is one
bool torchImported();
// torch.distributed's default process group (an IValue of c10d's class),
// or None before the script formed one: collectives' group in the JIT.
c10::IValue scriptProcessGroup();
// A torch.distributed ProcessGroup object as such an IValue (None for others).
c10::IValue processGroupValue(PyObject* group);
// The class C when f is C.apply of a custom torch.autograd.Function
// subclass C (a builtin method bound to the class), else null.
PyObject* autogradFunctionOfApply(PyObject* f);

}  // namespace magpy::capture

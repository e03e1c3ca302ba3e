#include "capture/compiled_function.h"

#include <structmember.h>

#include "capture/jit.h"
#include "capture/units.h"
#include "magpy/support/error.h"

namespace magpy::capture {
namespace {

// The Python object magpy.compile returns.
struct CompiledObject {
  PyObject_HEAD
  size_t function;
  PyObject* target;
  PyObject* weakrefs;
};

void compiledDealloc(PyObject* self) {
  auto* c = reinterpret_cast<CompiledObject*>(self);
  if (c->weakrefs) PyObject_ClearWeakRefs(self);
  Py_XDECREF(c->target);
  Py_TYPE(self)->tp_free(self);
}

PyObject* compiledCall(PyObject* self, PyObject* args, PyObject* kwargs) {
  auto* c = reinterpret_cast<CompiledObject*>(self);
  // Inside a monitored run, a compiled function is plain code being traced.
  Session* session = Session::current();
  if (monitoringDepth() > 0 || !session) return PyObject_Call(c->target, args, kwargs);
  // A libtorch error on an input magpy did not expect stays on this side.
  return enteredFromPython(PythonEntry::CompiledCall, [&] { return session->call(c->function, args, kwargs); });
}

// Attributes not of the wrapper are the target's: model.eval() keeps working.
PyObject* compiledGetattr(PyObject* self, PyObject* name) {
  PyObject* v = PyObject_GenericGetAttr(self, name);
  if (v || !PyErr_ExceptionMatches(PyExc_AttributeError)) return v;
  PyErr_Clear();
  return PyObject_GetAttr(reinterpret_cast<CompiledObject*>(self)->target, name);
}

PyObject* compiledStats(PyObject* self, PyObject*) {
  Session* session = Session::current();
  if (!session) Py_RETURN_NONE;
  return session->stats(reinterpret_cast<CompiledObject*>(self)->function);
}

PyObject* compiledRepr(PyObject* self) {
  return PyUnicode_FromFormat("<magpy compiled %R>", reinterpret_cast<CompiledObject*>(self)->target);
}

PyMethodDef kCompiledMethods[] = {
    {"_magpy_stats", compiledStats, METH_NOARGS,
     "Counts of this function's calls: records, graphs, breaks, calls, hits, monitored runs, eager runs, and those "
     "of the segments compiled inside its graph breaks."},
    {nullptr, nullptr, 0, nullptr}};

PyMemberDef kCompiledMembers[] = {
    {"__wrapped__", T_OBJECT, offsetof(CompiledObject, target), READONLY, "The function or module magpy compiled."},
    {nullptr, 0, 0, 0, nullptr}};

PyTypeObject CompiledType = [] {
  PyTypeObject t{};
  t.ob_base.ob_base.ob_refcnt = 1;
  t.tp_name = "magpy.CompiledFunction";
  t.tp_basicsize = sizeof(CompiledObject);
  t.tp_dealloc = compiledDealloc;
  t.tp_call = compiledCall;
  t.tp_getattro = compiledGetattr;
  t.tp_repr = compiledRepr;
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc = "A function compiled by magpy: calls run a captured record when its guards hold.";
  t.tp_weaklistoffset = offsetof(CompiledObject, weakrefs);
  t.tp_methods = kCompiledMethods;
  t.tp_members = kCompiledMembers;
  return t;
}();

PyObject* magpyCompile(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kKeywords[] = {"fn", "dynamic", "backend", "freeze_state", nullptr};
  PyObject* target = nullptr;
  PyObject* dynamic = Py_None;
  PyObject* freeze = Py_None;
  const char* backend = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$OzO:compile", const_cast<char**>(kKeywords), &target, &dynamic,
                                   &backend, &freeze))
    return nullptr;
  for (auto [name, flag] : {std::pair{"dynamic", dynamic}, std::pair{"freeze_state", freeze}})
    if (flag != Py_None && !PyBool_Check(flag)) {
      PyErr_Format(PyExc_TypeError, "magpy.compile: %s must be True, False or None, not %s", name, Py_TYPE(flag)->tp_name);
      return nullptr;
    }
  Session* session = Session::current();
  if (!session) {
    PyErr_SetString(PyExc_RuntimeError, "magpy.compile works only in scripts run by magpy-capture");
    return nullptr;
  }
  auto flag = [](PyObject* v) { return v == Py_None ? std::nullopt : std::optional<bool>(v == Py_True); };
  return session->compile(target, flag(dynamic), backend ? std::optional<std::string>(backend) : std::nullopt,
                          flag(freeze));
}

PyObject* magpyFailNextEntry(PyObject*, PyObject* name) {
  if (!PyUnicode_Check(name) || !armEntryFailure(PyUnicode_AsUTF8(name))) {
    PyErr_SetString(PyExc_ValueError, "magpy._fail_next_entry: 'compiled_call', 'frame_hook' or 'trace'");
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyMethodDef kModuleMethods[] = {
    {"compile", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(magpyCompile)), METH_VARARGS | METH_KEYWORDS,
     "compile(fn_or_module, *, dynamic=None, backend=None, freeze_state=None) -> callable\n\nReturns a callable "
     "that behaves like fn_or_module; magpy-capture monitors its calls, captures them as operator graphs and writes "
     "them to the record file. dynamic=False keeps every record's sizes fixed; True or None (magpy-capture --dynamic "
     "auto, the default) lets records that differ only in argument sizes become one dynamic record. backend "
     "('aten', 'compiled', 'auto'; None: magpy-capture --backend) says how calls with grad mode off run once a "
     "record served two: compiled graphs, checked against operator by operator on their first call. "
     "freeze_state=True (None: --freeze-state) lets compiled graphs freeze the state tensors they only read: "
     "the script then writes them only through torch operations, never through .data or numpy views."},
    {"_fail_next_entry", magpyFailNextEntry, METH_O,
     "_fail_next_entry(name): for magpy's own tests: the next entry from Python into magpy of this kind "
     "('compiled_call', 'frame_hook', 'trace') fails inside magpy with a C++ exception."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "magpy",
                       "Capture eager PyTorch functions as operator graphs (run scripts with magpy-capture).", -1,
                       kModuleMethods, nullptr, nullptr, nullptr, nullptr};

}  // namespace

bool isCompiled(PyObject* o) { return Py_TYPE(o) == &CompiledType; }
PyObject* compiledTarget(PyObject* o) { return reinterpret_cast<CompiledObject*>(o)->target; }

PyObject* newCompiledFunction(size_t index, PyObject* target) {
  auto* obj = PyObject_New(CompiledObject, &CompiledType);
  if (!obj) return nullptr;
  obj->function = index;
  obj->target = target;
  obj->weakrefs = nullptr;
  Py_INCREF(target);
  return reinterpret_cast<PyObject*>(obj);
}

PyObject* initMagpyModule() {
  if (PyType_Ready(&CompiledType) < 0) return nullptr;
  PyObject* m = PyModule_Create(&kModule);
  if (!m) return nullptr;
  Py_INCREF(&CompiledType);
  PyModule_AddObject(m, "CompiledFunction", reinterpret_cast<PyObject*>(&CompiledType));
  return m;
}

}  // namespace magpy::capture

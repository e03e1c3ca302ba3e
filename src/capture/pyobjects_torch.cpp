// The one place that includes libtorch_python's headers (slow to compile).
#include <torch/csrc/autograd/python_function.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/utils/pybind.h>

#include "capture/pyobjects.h"
#include "capture/python_frame.h"

namespace magpy::capture {

bool torchImported() { return THPVariableClass != nullptr; }

// By the object's type, not isinstance: isinstance also believes an object
// whose __class__ claims Tensor (a mock with spec=Tensor), which holds no
// tensor to unpack; and asking for __class__ was most of classifying each
// object a monitored call meets.
bool isTensor(PyObject* o) {
  return THPVariableClass && PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(THPVariableClass));
}

bool identityKey(PyObject* key) { return isTensor(key) && plainTensorType(Py_TYPE(key)); }

bool dictHolds(PyObject* d, PyObject* key) {
  if (identityKey(key)) {
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(d, &pos, &k, &v))
      if (k == key) return true;
    return false;
  }
  int has = PyDict_Contains(d, key);
  if (has < 0) PyErr_Clear();
  return has == 1;
}

bool plainTensorType(PyTypeObject* t) {
  // torch.Tensor, or nn.Parameter (which adds no __torch_function__ of its own).
  static PyObject* parameter = processAttr("torch.nn.parameter", "Parameter");
  PyObject* type = reinterpret_cast<PyObject*>(t);
  return type == THPVariableClass || type == parameter;
}

const at::Tensor& tensorOf(PyObject* o) { return THPVariable_Unpack(o); }

PyObject* pythonObjectHolding(const at::Tensor& t) {
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  auto obj = impl->check_pyobj(getPyInterpreter());
  return obj && *obj && !impl->owns_pyobj() ? *obj : nullptr;
}

PyRef wrapTensor(const at::Tensor& t) { return PyRef::steal(THPVariable_Wrap(t)); }

PyObject* autogradFunctionOfApply(PyObject* f) {
  if (!THPFunctionClass || !PyCFunction_Check(f)) return nullptr;
  PyObject* cls = PyCFunction_GET_SELF(f);
  if (!cls || !PyType_Check(cls) || cls == THPFunctionClass) return nullptr;
  if (!PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls), reinterpret_cast<PyTypeObject*>(THPFunctionClass)))
    return nullptr;
  PyRef name = PyRef::steal(PyObject_GetAttrString(f, "__name__"));
  PyErr_Clear();
  bool apply = name && PyUnicode_Check(name.get()) && PyUnicode_CompareWithASCIIString(name.get(), "apply") == 0;
  return apply ? cls : nullptr;
}

namespace {

// GroupMember.WORLD, read as attributes: no Python code runs (the
// operator recorder asks while the monitor traces).
c10::IValue defaultGroup() {
  PyObject* modules = PyImport_GetModuleDict();
  PyObject* c10d = PyDict_GetItemString(modules, "torch.distributed.distributed_c10d");
  if (!c10d) return {};
  PyObject* members = PyDict_GetItemString(PyModule_GetDict(c10d), "GroupMember");
  static PyObject* name = PyUnicode_InternFromString("WORLD");
  PyObject* world = members && PyType_Check(members) ? classLookup(reinterpret_cast<PyTypeObject*>(members), name) : nullptr;
  return world ? processGroupValue(world) : c10::IValue();
}

}  // namespace

c10::IValue processGroupValue(PyObject* group) {
  if (!group || group == Py_None) return {};
  try {
    return c10::IValue(pybind11::cast<c10::intrusive_ptr<c10d::ProcessGroup>>(pybind11::handle(group)));
  } catch (const pybind11::cast_error&) {
    return {};
  }
}

// torch's bindings run collectives with the GIL released.
c10::IValue scriptProcessGroup() {
  PyGILState_STATE gil = PyGILState_Ensure();
  c10::IValue group = defaultGroup();
  PyGILState_Release(gil);
  return group;
}

}  // namespace magpy::capture

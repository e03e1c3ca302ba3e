// The one place that includes libtorch_python's headers (slow to compile).
#include <torch/csrc/autograd/python_variable.h>

#include "capture/pyobjects.h"

namespace magpy::capture {

bool torchImported() { return THPVariableClass != nullptr; }

bool isTensor(PyObject* o) {
  if (!THPVariableClass) return false;
  try {
    return THPVariable_Check(o);
  } catch (...) {
    PyErr_Clear();
    return false;
  }
}

const at::Tensor& tensorOf(PyObject* o) { return THPVariable_Unpack(o); }

PyRef wrapTensor(const at::Tensor& t) { return PyRef::steal(THPVariable_Wrap(t)); }

}  // namespace magpy::capture

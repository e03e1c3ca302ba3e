// CPython 3.11 object internals: private API and struct fields of types
// and functions that capture reads.
#include <Python.h>

#include "capture/pyobjects.h"
#include "capture/python_frame.h"

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030C0000
#error "capture/cpython311 supports CPython 3.11 only"
#endif

namespace magpy::capture {

PyObject* attrOrNull(PyObject* o, const char* name) {
  PyObject* key = internedName(name);
  PyObject* value = nullptr;
  if (!key || _PyObject_LookupAttr(o, key, &value) < 0) PyErr_Clear();
  return value;
}

PyObject* classLookup(PyTypeObject* type, PyObject* name) { return _PyType_Lookup(type, name); }

PyObject* classNameOf(PyTypeObject* type, PyObject* value) {
  PyObject* mro = type->tp_mro;
  for (Py_ssize_t i = 0; mro && i < PyTuple_GET_SIZE(mro); ++i) {
    PyObject* dict = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i))->tp_dict;
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (dict && PyDict_Next(dict, &pos, &k, &v))
      if (v == value && PyUnicode_Check(k) && _PyType_Lookup(type, k) == value) return k;
  }
  return nullptr;
}

unsigned classVersion(PyTypeObject* type) {
  // A lookup of a cacheable name assigns a tag to the type and its bases
  // (CPython keeps: a type with a valid tag has bases with valid tags, and
  // changing a type clears its subclasses' tags).
  static PyObject* probe = PyUnicode_InternFromString("__magpy_class_version__");
  if (!PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG)) _PyType_Lookup(type, probe);
  return PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG) ? type->tp_version_tag : 0;
}

bool classUnchanged(PyTypeObject* type, unsigned version) {
  return version != 0 && PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG) && type->tp_version_tag == version;
}

void classContents(PyTypeObject* type, std::vector<PyObject*>& out) {
  static PyObject* slotnames = PyUnicode_InternFromString("__slotnames__");
  PyObject* mro = type->tp_mro;
  for (Py_ssize_t i = 0; mro && i < PyTuple_GET_SIZE(mro); ++i) {
    PyObject* cls = PyTuple_GET_ITEM(mro, i);
    out.push_back(cls);
    auto* t = reinterpret_cast<PyTypeObject*>(cls);
    if (t->tp_flags & Py_TPFLAGS_HEAPTYPE) {
      auto* heap = reinterpret_cast<PyHeapTypeObject*>(t);
      out.insert(out.end(), {heap->ht_name, heap->ht_qualname, t->tp_bases, reinterpret_cast<PyObject*>(Py_TYPE(t))});
    }
    PyObject* dict = reinterpret_cast<PyTypeObject*>(cls)->tp_dict;
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (dict && PyDict_Next(dict, &pos, &k, &v)) {
      if (k == slotnames) continue;
      out.push_back(k);
      out.push_back(v);
    }
  }
}

PyObject* functionName(PyObject* function) { return reinterpret_cast<PyFunctionObject*>(function)->func_name; }

PyObject* functionQualname(PyObject* function) { return reinterpret_cast<PyFunctionObject*>(function)->func_qualname; }

PyObject* instanceDict(PyObject* obj) {
  PyObject** slot = _PyObject_GetDictPtr(obj);
  return slot ? *slot : nullptr;
}

}  // namespace magpy::capture

#include "capture/pyobjects.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "capture/python_frame.h"
#include "magpy/record/path.h"
#include "magpy/support/error.h"
#include "magpy/support/hash.h"

namespace magpy::capture {
namespace {

std::string str(PyObject* o) {
  if (!o || !PyUnicode_Check(o)) return "";
  const char* s = PyUnicode_AsUTF8(o);
  if (!s) {
    PyErr_Clear();
    return "";
  }
  return s;
}

// torch's enum-like types, recognized by name so this file needs no torch headers.
record::Atom::Kind torchEnumKind(PyTypeObject* t) {
  const char* n = t->tp_name;
  if (std::strcmp(n, "torch.dtype") == 0) return record::Atom::Kind::DType;
  if (std::strcmp(n, "torch.device") == 0) return record::Atom::Kind::Device;
  if (std::strcmp(n, "torch.layout") == 0) return record::Atom::Kind::Layout;
  if (std::strcmp(n, "torch.memory_format") == 0) return record::Atom::Kind::MemoryFormat;
  return record::Atom::Kind::None;
}

// Names that name the same callable under two spellings.
std::string canonical(std::string name) {
  static const std::pair<const char*, const char*> kAliases[] = {
      {"torch._VariableFunctionsClass.", "torch."},
      {"torch._C._TensorBase.", "torch.Tensor."},
      {"torch._tensor.Tensor.", "torch.Tensor."},
      {"torch._C._VariableFunctions.", "torch."},
  };
  for (auto& [from, to] : kAliases) {
    size_t n = std::strlen(from);
    if (name.compare(0, n, from) == 0) return to + name.substr(n);
  }
  return name;
}

}  // namespace

std::string attrString(PyObject* o, const char* name) {
  PyRef v = PyRef::steal(attrOrNull(o, name));
  return v ? str(v.get()) : "";
}

bool definedIn(PyTypeObject* t, std::string_view package) {
  std::string module = attrString(reinterpret_cast<PyObject*>(t), "__module__");
  return module.compare(0, package.size(), package) == 0 &&
         (module.size() == package.size() || module[package.size()] == '.');
}

bool standardLibrary(const std::string& module) {
  std::string top = module.substr(0, module.find('.'));
  static PyObject* stdlib = PySys_GetObject("stdlib_module_names");  // borrowed; lives as long as sys
  PyRef name = PyRef::steal(PyUnicode_FromString(top.c_str()));
  int found = stdlib && name && !top.empty() ? PySet_Contains(stdlib, name.get()) : 0;
  if (found < 0) PyErr_Clear();
  return found > 0;
}

bool platformClass(PyTypeObject* t) {
  return definedIn(t, "torch") || standardLibrary(attrString(reinterpret_cast<PyObject*>(t), "__module__"));
}

bool globalsAnswerLookups(PyObject* module) {
  return PyModule_CheckExact(module) || (PyModule_Check(module) && platformClass(Py_TYPE(module)));
}

bool isAtom(PyObject* o) {
  return o == Py_None || o == Py_Ellipsis || PyBool_Check(o) || PyLong_CheckExact(o) || PyFloat_CheckExact(o) ||
         PyUnicode_CheckExact(o) || torchEnumKind(Py_TYPE(o)) != record::Atom::Kind::None;
}

bool fixedByIdentity(PyObject* o) {
  PyTypeObject* t = Py_TYPE(o);
  return PyType_Check(o) || PyFunction_Check(o) || PyModule_Check(o) || (PyCFunction_Check(o) && !boundObject(o)) ||
         t == &PyMethodDescr_Type || t == &PyWrapperDescr_Type || t == &PyClassMethodDescr_Type;
}

bool immutableValue(PyObject* o) {
  if (isAtom(o) || PyBytes_CheckExact(o) || fixedByIdentity(o)) return true;
  if (!PyTuple_CheckExact(o)) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); ++i)
    if (!immutableValue(PyTuple_GET_ITEM(o, i))) return false;
  return true;
}

namespace {

// The value of an int, float or str, or of an instance of a class derived
// from one of them; nullopt for anything else or an int beyond int64.
std::optional<record::Atom> scalarValue(PyObject* o) {
  using record::Atom;
  if (PyLong_Check(o)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return std::nullopt;  // beyond int64: not a scalar records can hold
    }
    return Atom::integer(v);
  }
  if (PyFloat_Check(o)) return Atom::floating(PyFloat_AsDouble(o));
  if (PyUnicode_Check(o)) {
    Py_ssize_t n;
    const char* s = PyUnicode_AsUTF8AndSize(o, &n);
    if (!s) {
      PyErr_Clear();
      return std::nullopt;
    }
    return Atom::string(std::string(s, size_t(n)));
  }
  return std::nullopt;
}

bool exactScalar(PyObject* o) { return PyLong_CheckExact(o) || PyFloat_CheckExact(o) || PyUnicode_CheckExact(o); }

}  // namespace

std::optional<record::Atom> atomOf(PyObject* o) {
  using record::Atom;
  if (o == Py_None) return Atom::none();
  if (o == Py_Ellipsis) return Atom::named(Atom::Kind::Ellipsis, "");
  if (PyBool_Check(o)) return Atom::boolean(o == Py_True);
  if (exactScalar(o)) return scalarValue(o);
  auto kind = torchEnumKind(Py_TYPE(o));
  if (kind == Atom::Kind::None) return std::nullopt;
  PyRef text = PyRef::steal(PyObject_Str(o));
  std::string s = str(text.get());
  if (s.rfind("torch.", 0) == 0) s = s.substr(6);
  return Atom::named(kind, s);
}

std::optional<record::Atom> dictKey(PyObject* key) {
  if (!PyTuple_CheckExact(key)) return atomOf(key);
  std::vector<record::Atom> items;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(key); ++i) {
    auto item = dictKey(PyTuple_GET_ITEM(key, i));
    if (!item) return std::nullopt;
    items.push_back(std::move(*item));
  }
  return record::Atom::tuple(std::move(items));
}

PyRef atomObject(const record::Atom& a) {
  using K = record::Atom::Kind;
  switch (a.kind) {
    case K::None: return PyRef::borrow(Py_None);
    case K::Ellipsis: return PyRef::borrow(Py_Ellipsis);
    case K::Bool: return PyRef::borrow(a.i ? Py_True : Py_False);
    case K::Int: return PyRef::steal(PyLong_FromLongLong(a.i));
    case K::Float: return PyRef::steal(PyFloat_FromDouble(a.f));
    case K::Str: return PyRef::steal(PyUnicode_FromStringAndSize(a.s.data(), Py_ssize_t(a.s.size())));
    case K::Tuple: {
      PyRef t = PyRef::steal(PyTuple_New(Py_ssize_t(a.items.size())));
      for (size_t i = 0; i < a.items.size(); ++i) PyTuple_SET_ITEM(t.get(), Py_ssize_t(i), atomObject(a.items[i]).release());
      return t;
    }
    default: break;
  }
  PyRef torch = PyRef::steal(PyImport_ImportModule("torch"));
  if (!torch) throw Error("cannot import torch: " + takePythonError());
  PyRef v = a.kind == K::Device ? PyRef::steal(PyObject_CallMethod(torch.get(), "device", "s", a.s.c_str()))
                                : PyRef::steal(PyObject_GetAttrString(torch.get(), a.s.c_str()));
  if (!v) throw Error("cannot make " + record::toString(a) + ": " + takePythonError());
  return v;
}

std::optional<record::Atom> baseValueOf(PyObject* o) {
  if (PyBool_Check(o) || exactScalar(o)) return std::nullopt;
  return scalarValue(o);
}

std::string enumMemberName(PyObject* o) {
  static PyObject* enumType = processAttr("enum", "Enum");
  if (!enumType || Py_TYPE(o)->tp_flags & Py_TPFLAGS_TYPE_SUBCLASS) return "";
  int is = PyObject_IsInstance(o, enumType);
  if (is <= 0) {
    PyErr_Clear();
    return "";
  }
  PyRef name = PyRef::steal(PyObject_GetAttrString(o, "_name_"));
  if (!name) {
    PyErr_Clear();
    return "";
  }
  return typeName(Py_TYPE(o)) + "." + str(name.get());
}

std::string utf8(PyObject* s) {
  const char* c = s && PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : nullptr;
  if (!c) PyErr_Clear();
  return c ? c : "";
}

PyObject* moduleHolder(PyObject* instanceDict, const char* holder) {
  PyObject* d = PyDict_GetItemString(instanceDict, holder);
  return d && PyDict_Check(d) ? d : nullptr;
}

// Kept per class while its version tag holds: a class that later takes a
// __getattr__ or __getattribute__ of its own (or loses Module's) is asked
// again.
bool plainModule(PyTypeObject* t) {
  static PyObject* getattr = PyUnicode_InternFromString("__getattr__");
  static PyObject* getattribute = PyUnicode_InternFromString("__getattribute__");
  // References kept for the process (never released: no destructor runs
  // after the interpreter is gone).
  static PyObject* objectGetattribute = classLookup(&PyBaseObject_Type, getattribute);
  static PyObject* moduleGetattr = [] {
    PyObject* module = processAttr("torch.nn", "Module");
    PyObject* f = module && PyType_Check(module) ? classLookup(reinterpret_cast<PyTypeObject*>(module), getattr) : nullptr;
    Py_XINCREF(f);
    return f;
  }();
  static std::unordered_map<PyTypeObject*, std::pair<unsigned, bool>> cache;
  auto it = cache.find(t);
  if (it != cache.end() && classUnchanged(t, it->second.first)) return it->second.second;
  bool plain = moduleGetattr && classLookup(t, getattr) == moduleGetattr &&
               classLookup(t, getattribute) == objectGetattribute;
  if (unsigned version = classVersion(t)) {
    if (cache.size() >= 4096) cache.clear();  // classes made per call would otherwise pile up
    cache[t] = {version, plain};
  }
  return plain;
}

PyRef moduleAttr(PyObject* obj, PyObject* name) {
  PyObject* dict = instanceDict(obj);
  if (!dict) return PyRef();
  if (PyObject* v = PyDict_GetItemWithError(dict, name)) return PyRef::borrow(v);
  for (const char* holder : record::kModuleDicts)
    if (PyObject* d = moduleHolder(dict, holder))
      if (PyObject* v = PyDict_GetItemWithError(d, name)) return PyRef::borrow(v);
  return PyRef();
}

namespace {

std::string readTypeName(PyTypeObject* t) {
  std::string module = attrString(reinterpret_cast<PyObject*>(t), "__module__");
  std::string qual = attrString(reinterpret_cast<PyObject*>(t), "__qualname__");
  if (qual.empty()) qual = t->tp_name;
  return canonical(module.empty() ? qual : module + "." + qual);
}

// Whether getattr reads a class's __module__ and __qualname__ with type's
// own descriptors: then only setting them on the class changes them, and
// that changes the class's version tag.
bool namedByType(PyTypeObject* t) {
  static PyObject* module = PyUnicode_InternFromString("__module__");
  static PyObject* qualname = PyUnicode_InternFromString("__qualname__");
  PyTypeObject* meta = Py_TYPE(t);
  return meta == &PyType_Type || (meta->tp_getattro == PyType_Type.tp_getattro &&
                                  classLookup(meta, module) == classLookup(&PyType_Type, module) &&
                                  classLookup(meta, qualname) == classLookup(&PyType_Type, qualname));
}

}  // namespace

// Capture names the same few classes thousands of times per call; a name is
// kept while the class's version tag and its metaclass's hold (tags are
// never reused, so a class made later at the same address misses).
std::string typeName(PyTypeObject* t) {
  struct Named {
    unsigned version, metaVersion;
    std::string name;
  };
  static std::unordered_map<PyTypeObject*, Named> names;
  auto it = names.find(t);
  if (it != names.end() && classUnchanged(t, it->second.version) && classUnchanged(Py_TYPE(t), it->second.metaVersion))
    return it->second.name;
  std::string name = readTypeName(t);
  unsigned version = classVersion(t), metaVersion = classVersion(Py_TYPE(t));
  if (version && metaVersion && namedByType(t)) {
    if (names.size() >= 4096) names.clear();  // classes made per call would otherwise pile up
    names[t] = Named{version, metaVersion, name};
  }
  return name;
}

namespace {

// The name of a callable that is neither a class nor a Python function.
std::string readCallableName(PyObject* c) {
  // A layer (the most common callable): Module.__getattr__, in Python,
  // would format an AttributeError for the missing name at each call.
  static PyObject* qualname = internedName("__qualname__");
  bool layer = plainModule(Py_TYPE(c)) && !classLookup(Py_TYPE(c), qualname);
  std::string qual = layer ? str(moduleAttr(c, qualname).get()) : attrString(c, "__qualname__");
  PyErr_Clear();
  if (qual.empty()) return typeName(Py_TYPE(c)) + ".__call__";

  // Builtins: a module function (__self__ is the module or None), a method
  // bound to an instance, or an unbound method descriptor (__objclass__).
  PyRef objclass = PyRef::steal(attrOrNull(c, "__objclass__"));
  if (objclass && PyType_Check(objclass.get())) {
    std::string owner = typeName(reinterpret_cast<PyTypeObject*>(objclass.get()));
    size_t dot = qual.find('.');
    return canonical(owner + (dot == std::string::npos ? "." + qual : qual.substr(dot)));
  }
  PyRef self = PyRef::steal(attrOrNull(c, "__self__"));
  if (self && PyCapsule_CheckExact(self.get())) {
    // A pybind11 function (torch._C._get_tracing_state): module + name.
    return canonical(attrString(c, "__module__") + "." + attrString(c, "__name__"));
  }
  if (self && self.get() != Py_None && !PyModule_Check(self.get())) {
    // A bound builtin method: find the class that the qualified name starts
    // with in the MRO of the class it is bound to ("tuple.__new__",
    // "dict.fromkeys") or of the instance's class ("Tensor.view" on a
    // Parameter).
    std::string owner = qual.substr(0, qual.find('.'));
    PyObject* mros[] = {PyType_Check(self.get()) ? reinterpret_cast<PyTypeObject*>(self.get())->tp_mro : nullptr,
                        Py_TYPE(self.get())->tp_mro};
    for (PyObject* mro : mros)
      for (Py_ssize_t i = 0; mro && i < PyTuple_GET_SIZE(mro); ++i) {
        auto* t = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i));
        if (attrString(reinterpret_cast<PyObject*>(t), "__name__") == owner) {
          std::string module = attrString(reinterpret_cast<PyObject*>(t), "__module__");
          return canonical(module + "." + qual);
        }
      }
    size_t dot = qual.find('.');
    return canonical(typeName(Py_TYPE(self.get())) + (dot == std::string::npos ? "." + qual : qual.substr(dot)));
  }
  std::string module = attrString(c, "__module__");
  if (module.empty() && self && PyModule_Check(self.get())) module = PyModule_GetName(self.get()) ? PyModule_GetName(self.get()) : "";
  if (PyErr_Occurred()) PyErr_Clear();
  return canonical(module.empty() ? qual : module + "." + qual);
}

// Capture names the builtins a program calls at every call. A builtin
// function's name follows from its method definition, its __module__ (which
// a program may set) and, where it is bound to a class or an instance, that
// class's names along its MRO (which change its version tag). A name is
// kept while those hold; the entry keeps alive what owns the definition
// (the function, or the class whose method table holds it), so no other
// definition takes its address.
std::string builtinName(PyObject* c) {
  struct Named {
    PyRef owner, module;
    unsigned version = 0, metaVersion = 0;
    std::string name;
  };
  using Key = std::tuple<const void*, PyTypeObject*, bool>;
  static auto& names = *new std::map<Key, Named>;  // never destroyed: its references outlive the interpreter
  PyObject* self = PyCFunction_GET_SELF(c);
  PyObject* module = reinterpret_cast<PyCFunctionObject*>(c)->m_module;
  bool bound = self && self != Py_None && !PyModule_Check(self) && !PyCapsule_CheckExact(self);
  if (!bound && (!module || !PyUnicode_Check(module))) return readCallableName(c);  // named by its module's __name__
  PyTypeObject* cls = !bound ? nullptr : PyType_Check(self) ? reinterpret_cast<PyTypeObject*>(self) : Py_TYPE(self);
  Key key{reinterpret_cast<PyCFunctionObject*>(c)->m_ml, cls, bound && PyType_Check(self)};
  auto it = names.find(key);
  if (it != names.end() && it->second.module.get() == module &&
      (!cls || (classUnchanged(cls, it->second.version) && classUnchanged(Py_TYPE(cls), it->second.metaVersion))))
    return it->second.name;
  Named n{PyRef::borrow(cls ? reinterpret_cast<PyObject*>(cls) : c), PyRef::borrow(module), 0, 0, readCallableName(c)};
  if (cls) {
    n.version = classVersion(cls);
    n.metaVersion = classVersion(Py_TYPE(cls));
    if (!n.version || !n.metaVersion) return n.name;
  }
  if (names.size() >= 4096) names.clear();  // callables made per call would otherwise pile up
  return (names[key] = std::move(n)).name;
}

}  // namespace

std::string qualifiedName(PyObject* c) {
  if (PyType_Check(c)) return typeName(reinterpret_cast<PyTypeObject*>(c));
  if (PyMethod_Check(c)) return qualifiedName(PyMethod_GET_FUNCTION(c));
  if (PyFunction_Check(c)) return canonical(str(PyFunction_GET_MODULE(c)) + "." + str(functionQualname(c)));
  if (PyCFunction_Check(c)) return builtinName(c);
  return readCallableName(c);
}

namespace {

// A hash of a constant that does not depend on addresses or on the
// process's string-hash seed: code objects recurse, sets are sorted.
void hashConstant(Hasher& h, PyObject* c);

void hashCode(Hasher& h, PyCodeObject* code) {
  PyRef bytes = PyRef::steal(PyCode_GetCode(code));
  if (bytes && PyBytes_Check(bytes.get())) h.bytes(PyBytes_AS_STRING(bytes.get()), size_t(PyBytes_GET_SIZE(bytes.get())));
  PyErr_Clear();
  PyRef consts = PyRef::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(code), "co_consts"));
  PyRef names = PyRef::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(code), "co_names"));
  PyErr_Clear();
  if (consts) hashConstant(h, consts.get());
  if (names) hashConstant(h, names.get());
}

void hashConstant(Hasher& h, PyObject* c) {
  if (PyCode_Check(c)) {
    h.text("code");
    hashCode(h, reinterpret_cast<PyCodeObject*>(c));
  } else if (PyTuple_Check(c)) {
    h.text("tuple").u64(uint64_t(PyTuple_GET_SIZE(c)));
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(c); ++i) hashConstant(h, PyTuple_GET_ITEM(c, i));
  } else if (PyFrozenSet_Check(c)) {
    std::vector<std::string> items;
    PyRef it = PyRef::steal(PyObject_GetIter(c));
    while (PyObject* x = it ? PyIter_Next(it.get()) : nullptr) {
      items.push_back(safeRepr(x));
      Py_DECREF(x);
    }
    std::sort(items.begin(), items.end());
    h.text("frozenset");
    for (auto& s : items) h.text(s);
  } else {
    h.text(safeRepr(c));
  }
  PyErr_Clear();
}

}  // namespace

int64_t codeHash(PyObject* function) {
  if (!PyFunction_Check(function)) return 0;
  PyObject* code = PyFunction_GET_CODE(function);
  // Keyed by the code object, held so that its address is never another's;
  // never destroyed, as the interpreter may be gone at exit.
  static auto* hashes = new std::unordered_map<PyObject*, std::pair<PyRef, int64_t>>();
  auto it = hashes->find(code);
  if (it != hashes->end()) return it->second.second;
  Hasher h;
  hashCode(h, reinterpret_cast<PyCodeObject*>(code));
  int64_t hash = int64_t(h.digest() & 0x7fffffffffffffffULL);
  hashes->emplace(code, std::pair(PyRef::borrow(code), hash));
  return hash;
}

PyObject* internedName(std::string_view name) {
  static auto* names = new std::map<std::string, PyObject*, std::less<>>();  // as codeHash's
  auto it = names->find(name);
  if (it != names->end()) return it->second;
  PyObject* s = PyUnicode_FromStringAndSize(name.data(), Py_ssize_t(name.size()));
  if (!s) return nullptr;
  PyUnicode_InternInPlace(&s);
  names->emplace(std::string(name), s);
  return s;
}

std::string safeRepr(PyObject* o) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyRef r = PyRef::steal(PyObject_Str(o));
  std::string s = r ? str(r.get()) : "<unprintable>";
  if (!r) PyErr_Clear();
  PyErr_Restore(type, value, tb);
  return s;
}

std::string takePythonError() {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  if (!type) return "unknown error";
  PyErr_NormalizeException(&type, &value, &tb);
  std::string name = attrString(type, "__name__");
  std::string msg = value ? safeRepr(value) : "";
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  return msg.empty() ? name : name + ": " + msg;
}

PyObject* processAttr(const char* module, const char* name) {
  PyRef m = PyRef::steal(PyImport_ImportModule(module));
  PyObject* attr = m ? PyObject_GetAttrString(m.get(), name) : nullptr;  // a reference kept for the process
  if (!attr) PyErr_Clear();
  return attr;
}

bool isPartial(PyObject* o) {
  static PyObject* partial = processAttr("functools", "partial");
  return partial && reinterpret_cast<PyObject*>(Py_TYPE(o)) == partial;
}

PyObject* slotWrapperSelf(PyObject* o) {
  if (Py_TYPE(o) != &_PyMethodWrapper_Type) return nullptr;
  PyRef self = PyRef::steal(PyObject_GetAttrString(o, "__self__"));
  if (!self) {
    PyErr_Clear();
    return nullptr;
  }
  return self.get();  // the wrapper holds it
}

PyObject* boundObject(PyObject* callable) {
  PyObject* self = PyCFunction_Check(callable) ? PyCFunction_GET_SELF(callable) : slotWrapperSelf(callable);
  bool none = !self || PyModule_Check(self) || PyType_Check(self) || PyCapsule_CheckExact(self);
  return none ? nullptr : self;
}

namespace {
thread_local uint8_t tArmedEntries = 0;  // bit per PythonEntry
}  // namespace

bool armEntryFailure(const std::string& name) {
  static const std::pair<const char*, PythonEntry> kNames[] = {
      {"compiled_call", PythonEntry::CompiledCall}, {"frame_hook", PythonEntry::FrameHook}, {"trace", PythonEntry::Trace}};
  for (auto& [n, entry] : kNames)
    if (name == n) {
      tArmedEntries |= uint8_t(1u << unsigned(entry));
      return true;
    }
  return false;
}

void failIfArmed(PythonEntry entry) {
  uint8_t bit = uint8_t(1u << unsigned(entry));
  if (!(tArmedEntries & bit)) return;
  tArmedEntries &= uint8_t(~bit);
  throw std::logic_error("a failure armed by magpy._fail_next_entry");
}

bool sameBinding(PyObject* a, PyObject* b) {
  if (a == b) return true;
  if (PyCFunction_Check(a) && PyCFunction_Check(b))
    return PyCFunction_GET_SELF(a) != nullptr && PyCFunction_GET_SELF(a) == PyCFunction_GET_SELF(b) &&
           PyCFunction_GET_FUNCTION(a) == PyCFunction_GET_FUNCTION(b) && PyCFunction_GET_FLAGS(a) == PyCFunction_GET_FLAGS(b);
  if (PyMethod_Check(a) && PyMethod_Check(b))
    return PyMethod_GET_SELF(a) == PyMethod_GET_SELF(b) && PyMethod_GET_FUNCTION(a) == PyMethod_GET_FUNCTION(b);
  return false;
}

bool hasWeakReferences(PyObject* o) {
  return PyType_SUPPORTS_WEAKREFS(Py_TYPE(o)) && *PyObject_GET_WEAKREFS_LISTPTR(o) != nullptr;
}

// CPython's PyObject_ClearWeakRefs does this for a dying object (it refuses
// a live one): references first, then callbacks, with the error state kept.
void clearWeakReferences(PyObject* o) {
  if (!PyType_SUPPORTS_WEAKREFS(Py_TYPE(o))) return;
  PyObject** list = PyObject_GET_WEAKREFS_LISTPTR(o);
  std::vector<std::pair<PyRef, PyRef>> callbacks;  // (reference, its callback)
  while (*list) {
    auto* ref = reinterpret_cast<PyWeakReference*>(*list);
    PyRef callback = PyRef::steal(ref->wr_callback);
    ref->wr_callback = nullptr;
    _PyWeakref_ClearRef(ref);  // unlinks it: *list moves on
    if (callback) callbacks.emplace_back(PyRef::borrow(reinterpret_cast<PyObject*>(ref)), std::move(callback));
  }
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  for (auto& [ref, callback] : callbacks) {
    PyRef result = PyRef::steal(PyObject_CallOneArg(callback.get(), ref.get()));
    if (!result) PyErr_WriteUnraisable(callback.get());
  }
  PyErr_Restore(type, value, traceback);
}

}  // namespace magpy::capture

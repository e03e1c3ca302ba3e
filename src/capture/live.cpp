#include "capture/live.h"

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "capture/python_frame.h"
#include "magpy/replay/state.h"
#include "magpy/replay/tensors.h"
#include "magpy/support/error.h"
#include "magpy/support/hash.h"

namespace magpy::capture {
namespace {

// A module's globals, as G(name) paths name them: nothing a guard can
// check while lookups of the module's attributes may answer otherwise (a
// module whose __class__ the program set).
PyRef moduleDict(const std::string& name) {
  PyRef n = PyRef::steal(PyUnicode_FromString(name.c_str()));
  PyRef m = PyRef::steal(PyImport_GetModule(n.get()));
  if (!m) {
    PyErr_Clear();
    return {};
  }
  if (!globalsAnswerLookups(m.get())) return {};
  return PyRef::borrow(PyModule_GetDict(m.get()));
}

}  // namespace

std::string LiveStore::describe(const PyRef& v) const {
  PyObject* o = v.get();
  if (isTensor(o)) return "tensor " + record::toString(replay::metaOf(tensorOf(o)));
  if (auto a = atomOf(o)) return record::toString(*a);
  if (PyTuple_Check(o) || PyList_Check(o) || PyDict_Check(o))
    return capture::typeName(Py_TYPE(o)) + " of " + std::to_string(PyObject_Length(o));
  std::string name = qualifiedName(o);
  if (PyFunction_Check(o) || PyCFunction_Check(o) || PyType_Check(o)) return name;
  if (PyModule_Check(o)) return std::string("module ") + PyModule_GetName(o);
  return "<" + capture::typeName(Py_TYPE(o)) + " object>";
}

PyRef LiveStore::keyOf(const replay::PathTree::Node& n) {
  switch (n.kind) {
    case replay::PathTree::StepKind::Index: return PyRef::steal(PyLong_FromLongLong(n.step.index));
    case replay::PathTree::StepKind::Attr:
    case replay::PathTree::StepKind::InstanceAttr: return PyRef::borrow(internedName(n.step.name));
    case replay::PathTree::StepKind::Key: break;
    case replay::PathTree::StepKind::ObjectKey: return {};  // the key is the object at its path
  }
  return atomObject(n.step.key);
}

namespace {

// Whether t finds `name` as a function written in Python.
bool pythonMethod(PyTypeObject* t, PyObject* name) {
  PyObject* f = classLookup(t, name);
  return f && PyFunction_Check(f);
}

// Whether getting through descriptor d, found on a class, runs Python:
// a property's getter (read on an instance), a descriptor class's __get__.
bool getterRunsPython(PyObject* d, bool onInstance) {
  static PyObject* get = PyUnicode_InternFromString("__get__");
  if (PyObject_TypeCheck(d, &PyProperty_Type)) {
    if (!onInstance) return false;  // Cls.prop is the property itself
    PyRef fget = PyRef::steal(PyObject_GetAttrString(d, "fget"));
    PyErr_Clear();
    return fget && fget.get() != Py_None && !PyCFunction_Check(fget.get());
  }
  return pythonMethod(Py_TYPE(d), get);
}

}  // namespace

// A descriptor whose __get__ is C code that calls no Python (a function, a
// slot, a getset or member of a C type, classmethod, staticmethod): every
// descriptor of a static type but property, which calls its fget.
bool nativeDescriptor(PyObject* d) {
  return !(Py_TYPE(d)->tp_flags & Py_TPFLAGS_HEAPTYPE) && !PyObject_TypeCheck(d, &PyProperty_Type);
}

bool attributeRunsPython(PyObject* obj, PyObject* name) {
  static PyObject* getattribute = PyUnicode_InternFromString("__getattribute__");
  static PyObject* getattr = PyUnicode_InternFromString("__getattr__");
  PyTypeObject* type = Py_TYPE(obj);
  // The common cases, with one lookup (guards take this path per call): an
  // object whose class looks attributes up generically (no __getattr__ or
  // __getattribute__ in Python; nn.Module's __getattr__ is done natively
  // here), and a class of the plain metaclass.
  if (type->tp_getattro == PyObject_GenericGetAttr || plainModule(type)) {  // (Module.__getattr__: native here)
    PyObject* d = classLookup(type, name);
    if (!d || nativeDescriptor(d)) return false;
  } else if (type == &PyType_Type) {
    PyObject* found = classLookup(reinterpret_cast<PyTypeObject*>(obj), name);
    if (!found || nativeDescriptor(found)) return false;
  }
  if (pythonMethod(type, getattribute)) return true;
  PyObject* descr = classLookup(type, name);  // on a class: its metaclass's
  if (PyType_Check(obj)) {
    if (descr && getterRunsPython(descr, true)) return true;
    if (PyObject* found = classLookup(reinterpret_cast<PyTypeObject*>(obj), name)) return getterRunsPython(found, false);
    return !descr && pythonMethod(type, getattr);
  }
  if (descr && Py_TYPE(descr)->tp_descr_set) return getterRunsPython(descr, true);  // a data descriptor comes first
  PyObject* dict = instanceDict(obj);
  bool inDict = dict && PyDict_Check(dict) && PyDict_GetItemWithError(dict, name);
  PyErr_Clear();
  if (inDict) return false;
  if (descr) return getterRunsPython(descr, true);
  // Not found: a module's own __getattr__ (PEP 562), a class's __getattr__
  // (nn.Module's is done natively by the live store).
  if (PyModule_Check(obj)) return dict && PyDict_Check(dict) && PyDict_GetItemString(dict, "__getattr__");
  return !plainModule(type) && pythonMethod(type, getattr);
}

namespace {

// One step: Attr (getattr), InstanceAttr (the instance's __dict__),
// Index (sequence item), Key (mapping item).
PyRef stepOn(PyObject* cur, replay::PathTree::StepKind kind, int64_t index, PyObject* key) {
  using K = replay::PathTree::StepKind;
  PyObject* v = nullptr;
  switch (kind) {
    case K::Attr:
      if (PyWeakref_CheckRefExact(cur) && PyUnicode_CompareWithASCIIString(key, record::kWeakReferent) == 0)
        return PyRef::borrow(PyWeakref_GetObject(cur));
      if (plainModule(Py_TYPE(cur)) && !classLookup(Py_TYPE(cur), key)) {
        PyRef found = moduleAttr(cur, key);
        PyErr_Clear();
        return found;  // null: not on the instance, its class, or the module's dicts
      }
      // A guard never runs user code: a path through a property or a
      // __getattr__ holds no value it can check.
      if (attributeRunsPython(cur, key)) return PyRef();
      v = PyObject_GetAttr(cur, key);
      break;
    case K::InstanceAttr: {
      PyObject* dict = instanceDict(cur);
      v = dict ? PyDict_GetItemWithError(dict, key) : nullptr;
      Py_XINCREF(v);
      break;
    }
    case K::Index:
      v = PySequence_Check(cur) ? PySequence_GetItem(cur, Py_ssize_t(index)) : nullptr;
      break;
    case K::ObjectKey: break;  // LiveStore::itemOf
    case K::Key:
      if (PyDict_Check(cur)) {
        v = PyDict_GetItemWithError(cur, key);
        Py_XINCREF(v);
      } else if (PyMapping_Check(cur)) {
        v = PyObject_GetItem(cur, key);
      }
      break;
  }
  if (!v) PyErr_Clear();
  return PyRef::steal(v);
}

}  // namespace

// By identity, as Python finds an identityKey: no __hash__ or __eq__ runs.
PyRef LiveStore::itemOf(const PyRef& parent, const PyRef& key) const {
  if (!PyDict_Check(parent.get()) || !identityKey(key.get())) return {};
  PyObject *k, *v;
  Py_ssize_t pos = 0;
  while (PyDict_Next(parent.get(), &pos, &k, &v))
    if (k == key.get()) return PyRef::borrow(v);
  return {};
}

PyRef LiveStore::root(const record::AccessPath& path) const {
  const LiveRoots& roots = roots_;
  switch (path.root) {
    case record::AccessPath::Root::Self:
      return PyRef::borrow(roots.self);
    case record::AccessPath::Root::Arg:
      if (path.index == -1) return roots.args ? PyRef::borrow(roots.args) : PyRef::steal(PyTuple_New(0));
      if (!roots.args || path.index >= PyTuple_GET_SIZE(roots.args)) return {};
      return PyRef::borrow(PyTuple_GET_ITEM(roots.args, path.index));
    case record::AccessPath::Root::Kwarg:
      if (path.name.empty()) return roots.kwargs ? PyRef::borrow(roots.kwargs) : PyRef::steal(PyDict_New());
      if (!roots.kwargs) return {};
      return PyRef::borrow(PyDict_GetItemString(roots.kwargs, path.name.c_str()));
    case record::AccessPath::Root::Global:
      return moduleDict(path.name.empty() ? roots.homeModule : path.name);
    case record::AccessPath::Root::Runtime: {
      auto value = replay::runtimeState(path.name);
      return value ? atomObject(*value) : PyRef{};
    }
  }
  return {};
}

PyRef LiveStore::step(const PyRef& parent, const replay::PathTree& tree, int node) const {
  const replay::PathTree::Node& n = tree.node(node);
  if (keys_) return stepOn(parent.get(), n.kind, n.step.index, (*keys_)[size_t(node)].get());
  PyRef key = keyOf(n);
  return stepOn(parent.get(), n.kind, n.step.index, key.get());
}

std::string LiveStore::lacks(const PyRef& parent, const replay::PathTree& tree, int node) const {
  const replay::PathTree::Node& n = tree.node(node);
  switch (n.kind) {
    case replay::PathTree::StepKind::Attr:
    case replay::PathTree::StepKind::InstanceAttr: return " (" + describe(parent) + ") has no attribute '" + n.step.name + "'";
    case replay::PathTree::StepKind::Index: return " (" + describe(parent) + ") has no element " + std::to_string(n.step.index);
    case replay::PathTree::StepKind::Key: return " (" + describe(parent) + ") has no key " + record::toString(n.step.key);
    case replay::PathTree::StepKind::ObjectKey:
      return " (" + describe(parent) + ") has no key that is the tensor at " + record::toString(n.step.keyOf.at(0));
  }
  return " lacks it";
}

bool LiveStore::typeIs(const PyRef& v, const record::Check& c, const PyRef& expected) const {
  if (expected) return reinterpret_cast<PyObject*>(Py_TYPE(v.get())) == expected.get();
  return capture::typeName(Py_TYPE(v.get())) == c.s;
}

bool LiveStore::identityIs(const PyRef& v, const record::Check& c, const PyRef& expected) const {
  return expected ? sameBinding(v.get(), expected.get()) : qualifiedName(v.get()) == c.s;
}

std::optional<record::Atom> LiveStore::atom(const PyRef& v) const {
  if (auto a = atomOf(v.get())) return a;
  return baseValueOf(v.get());
}

std::optional<int64_t> LiveStore::length(const PyRef& v) const {
  Py_ssize_t n = PyObject_Length(v.get());
  if (n >= 0) return int64_t(n);
  PyErr_Clear();
  return std::nullopt;
}

namespace {

// Whether a dict key is the atom, without making one for a str key.
bool keyIs(PyObject* k, const record::Atom& atom) {
  if (PyUnicode_CheckExact(k)) {
    Py_ssize_t n = 0;
    const char* text = PyUnicode_AsUTF8AndSize(k, &n);
    if (!text) PyErr_Clear();
    return text && atom.kind == record::Atom::Kind::Str && atom.s.size() == size_t(n) &&
           std::memcmp(atom.s.data(), text, size_t(n)) == 0;
  }
  auto a = dictKey(k);
  return a && *a == atom;
}

}  // namespace

bool LiveStore::keysAre(const PyRef& v, const std::vector<record::Atom>& keys) const {
  if (!PyDict_Check(v.get()) || PyDict_GET_SIZE(v.get()) != Py_ssize_t(keys.size())) return false;
  size_t n = 0;
  bool same = true;
  forEachDictKey(v.get(), [&](PyObject* k) {
    same = same && n < keys.size() && keyIs(k, keys[n]);
    ++n;
  });
  return same && n == keys.size();
}

std::optional<std::vector<record::Atom>> LiveStore::keys(const PyRef& v) const {
  if (!PyDict_Check(v.get())) return std::nullopt;
  std::vector<record::Atom> out;
  bool named = true;
  forEachDictKey(v.get(), [&](PyObject* k) {
    auto a = dictKey(k);
    if (a) out.push_back(*a);
    named = named && a;
  });
  if (!named) return std::nullopt;
  return out;
}

PyRef LiveStore::output(const c10::IValue& v) const {
  if (v.isTensor()) return wrapTensor(v.toTensor());
  if (v.isInt()) return PyRef::steal(PyLong_FromLongLong(v.toInt()));
  if (v.isDouble()) return PyRef::steal(PyFloat_FromDouble(v.toDouble()));
  if (v.isBool()) return PyRef::borrow(v.toBool() ? Py_True : Py_False);
  throw Error("a graph output of kind " + std::string(v.tagKind()) + " cannot be returned");
}

PyRef LiveStore::sequence(bool tuple, std::vector<PyRef> items) const {
  Py_ssize_t n = Py_ssize_t(items.size());
  PyRef c = PyRef::steal(tuple ? PyTuple_New(n) : PyList_New(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (tuple) PyTuple_SET_ITEM(c.get(), i, items[size_t(i)].release());
    else PyList_SET_ITEM(c.get(), i, items[size_t(i)].release());
  }
  return c;
}

PyRef LiveStore::dict(const std::vector<record::Atom>& keys, std::vector<PyRef> items, const std::string& type) const {
  static PyObject* orderedDict = processAttr("collections", "OrderedDict");
  bool ordered = type == record::kOrderedDict;
  if (ordered && !orderedDict) throw Error("collections.OrderedDict is not available");
  PyRef d = PyRef::steal(ordered ? PyObject_CallNoArgs(orderedDict) : PyDict_New());
  if (!d) throw Error(takePythonError());
  for (size_t i = 0; i < keys.size(); ++i) {
    // An OrderedDict keeps its order beside the dict: only its own setitem updates both.
    PyRef key = atomObject(keys[i]);
    int status = ordered ? PyObject_SetItem(d.get(), key.get(), items[i].get())
                         : PyDict_SetItem(d.get(), key.get(), items[i].get());
    if (status < 0) throw Error(takePythonError());
  }
  return d;
}

namespace {

void ensure(int status) {
  if (status < 0) throw Error(takePythonError());
}

}  // namespace

bool LiveStore::setAttr(const PyRef& target, const std::string& name, PyRef value) const {
  ensure(PyObject_SetAttrString(target.get(), name.c_str(), value.get()));
  return true;
}

void LiveStore::delAttr(const PyRef& target, const std::string& name) const {
  ensure(PyObject_DelAttrString(target.get(), name.c_str()));
}

void LiveStore::setItem(const PyRef& target, const record::Atom& key, PyRef value) const {
  ensure(PyObject_SetItem(target.get(), atomObject(key).get(), value.get()));
}

void LiveStore::setItemOf(const PyRef& target, const PyRef& key, PyRef value) const {
  if (!PyDict_Check(target.get())) throw Error("the target is " + describe(target) + ", not a dict");
  ensure(PyObject_SetItem(target.get(), key.get(), value.get()));
}

void LiveStore::delItem(const PyRef& target, const record::Atom& key) const {
  ensure(PyObject_DelItem(target.get(), atomObject(key).get()));
}

void LiveStore::assignContents(const PyRef& target, const PyRef& value) const {
  PyObject* t = target.get();
  if (PyList_Check(t)) {
    ensure(PyList_SetSlice(t, 0, PyList_GET_SIZE(t), value.get()));
  } else if (PyDict_Check(t)) {
    PyDict_Clear(t);
    ensure(PyDict_Update(t, value.get()));
  } else {
    throw Error("the target is neither a list nor a dict");
  }
}

void LiveStore::extendContents(const PyRef& target, const PyRef& value) const {
  PyObject* t = target.get();
  if (!PyList_Check(t)) throw Error("the target is " + describe(target) + ", not a list");
  Py_ssize_t end = PyList_GET_SIZE(t);
  ensure(PyList_SetSlice(t, end, end, value.get()));
}

PyRef liveElement(PyObject* container, const record::PathStep& step) {
  replay::PathTree::Node n;
  n.step = step;
  n.kind = replay::PathTree::kindOf(step.kind);
  PyRef key = LiveStore::keyOf(n);
  return stepOn(container, n.kind, step.index, key.get());
}

PyRef resolveLive(const record::AccessPath& path, const LiveRoots& roots) {
  return replay::resolvePath(LiveStore(roots), path, true);
}

LiveRecord::LiveRecord(const record::Record& record, std::vector<PyRef> expected,
                       const std::vector<record::AccessPath>& inputs)
    : access_(record.guards, inputs, record.mock), expected_(std::move(expected)) {
  expected_.resize(record.guards.size());
  const replay::PathTree& tree = access_.tree();
  keys_.resize(tree.size());
  for (size_t i = 0; i < tree.size(); ++i)
    if (tree.node(int(i)).parent >= 0) keys_[i] = LiveStore::keyOf(tree.node(int(i)));
}

}  // namespace magpy::capture
template class magpy::replay::Resolution<magpy::capture::LiveStore>;
namespace magpy::capture {

// Defined here, with the store, so that the shared checks inline its steps.
void LiveRecord::dependOn(const std::vector<PyRef>& classes, const std::vector<PyRef>& functions) {
  for (auto& c : classes) {
    classes_.push_back({c, 0, {}});
    remember(classes_.back());
  }
  for (auto& f : functions) codes_.push_back({f, PyRef::borrow(PyFunction_GET_CODE(f.get()))});
}

// Records that read a class under one tag share what it held (each new
// record of a model reads the same classes): a tag names the contents, as
// classHolds relies on. Never destroyed, as the interpreter may be gone at
// exit.
void LiveRecord::remember(const ClassRead& c) const {
  auto* type = reinterpret_cast<PyTypeObject*>(c.type.get());
  using Contents = std::shared_ptr<const std::vector<PyRef>>;
  // Its contents hold the type (the MRO starts with it): its address is never another's.
  static auto* latest = new std::unordered_map<PyTypeObject*, std::pair<unsigned, Contents>>();
  unsigned version = classVersion(type);
  auto known = latest->find(type);
  if (version != 0 && known != latest->end() && known->second.first == version) {
    c.contents = known->second.second;
    c.version = version;
    return;
  }
  std::vector<PyObject*> found;
  classContents(type, found);
  auto contents = std::make_shared<std::vector<PyRef>>(found.size());
  for (size_t i = 0; i < found.size(); ++i) (*contents)[i] = PyRef::borrow(found[i]);
  c.contents = contents;
  c.version = classVersion(type);
  if (c.version != 0) (*latest)[type] = {c.version, c.contents};
}

// The class's tag is the fast check; a class whose tag changed may still
// find what it found (a cache written into it): then its new tag holds.
bool LiveRecord::classHolds(const ClassRead& c) const {
  auto* type = reinterpret_cast<PyTypeObject*>(c.type.get());
  if (classUnchanged(type, c.version)) return true;
  thread_local std::vector<PyObject*> now;
  now.clear();
  classContents(type, now);
  if (now.size() != c.contents->size()) return false;
  for (size_t i = 0; i < now.size(); ++i)
    if (now[i] != (*c.contents)[i].get()) return false;
  c.version = classVersion(type);
  return true;
}

std::optional<replay::GuardMiss> LiveRecord::definitionsChanged() const {
  for (auto& c : classes_) {
    auto* type = reinterpret_cast<PyTypeObject*>(c.type.get());
    if (!classHolds(c))
      return replay::GuardMiss{"class " + typeName(type), "as the run found it",
                               "changed (an attribute of it or of a base class was set or deleted)"};
  }
  for (auto& f : codes_)
    if (PyFunction_GET_CODE(f.function.get()) != f.code.get())
      return replay::GuardMiss{qualifiedName(f.function.get()) + ".__code__", "the code the run traced", "other code"};
  return std::nullopt;
}

std::optional<replay::GuardMiss> LiveRecord::check(Values& values) const {
  if (auto changed = definitionsChanged()) return changed;
  return access_.firstMiss(values, replay::RecordAccess::Guards::All, expected_);
}

std::vector<size_t> LiveRecord::misses(Values& values) const { return access_.misses(values, expected_); }

std::vector<c10::IValue> LiveRecord::inputs(Values& values) const { return access_.inputs(values); }

PyRef LiveRecord::mock(const std::vector<c10::IValue>& outputs, Values& values) const {
  PyRef result = access_.mock(outputs, values).result;
  for (auto& c : classes_)
    if (!classUnchanged(reinterpret_cast<PyTypeObject*>(c.type.get()), c.version)) remember(c);
  return result;
}

// Found by content before anything is copied: another record of the same
// model (another shape, another branch) reads the same weights.
uint32_t BlobPool::add(const at::Tensor& t) {
  at::Tensor dense = replay::denseCpu(t);
  uint64_t hash = hashBytes(dense.data_ptr(), dense.nbytes());
  auto sizes = dense.sizes();
  uint64_t key = Hasher().u64(hash).text(replay::dtypeName(dense.scalar_type())).bytes(sizes.data(), sizes.size() * sizeof(int64_t)).digest();
  auto it = byHash_.find(key);
  if (it != byHash_.end()) return it->second;
  record::TensorBlob b = replay::blobOf(dense, hash);
  uint32_t index = uint32_t(blobs_.size());
  bytes_ += b.bytes.size();
  blobs_.push_back(std::move(b));
  byHash_.emplace(key, index);
  return index;
}

void BlobPool::truncate(size_t count) {
  if (count >= blobs_.size()) return;
  for (auto it = byHash_.begin(); it != byHash_.end();) it = it->second >= count ? byHash_.erase(it) : std::next(it);
  for (size_t b = count; b < blobs_.size(); ++b) bytes_ -= blobs_[b].bytes.size();
  blobs_.resize(count);
}

void PathTrie::insert(const std::vector<record::PathStep>& steps, size_t from) {
  if (from >= steps.size()) return;
  children[steps[from]].insert(steps, from + 1);
}

void PathTrie::insertTree(const record::Value& snapshot) {
  for (size_t i = 0; i < snapshot.items.size(); ++i) {
    record::PathStep step = !snapshot.names.empty() ? record::PathStep::attr(snapshot.names[i])
                            : !snapshot.keys.empty() ? record::PathStep::keyed(snapshot.keys[i])
                                                     : record::PathStep::at(int64_t(i));
    children[step].insertTree(snapshot.items[i]);
  }
}

void PathTrie::insertTrie(const PathTrie& other) {
  for (auto& [step, child] : other.children) children[step].insertTrie(child);
}

void objectShell(PyObject* o, record::Value& v) {
  if (PyModule_Check(o)) {
    v.kind = record::Value::Kind::Opaque;
    v.type = std::string("module ") + PyModule_GetName(o);
  } else if (PyFunction_Check(o) || PyCFunction_Check(o) || PyType_Check(o) || Py_TYPE(o) == &PyMethodDescr_Type ||
             Py_TYPE(o) == &PyWrapperDescr_Type || Py_TYPE(o) == &PyClassMethodDescr_Type) {
    v.kind = record::Value::Kind::Opaque;
    v.type = qualifiedName(o);
  } else if (std::string member = enumMemberName(o); !member.empty()) {
    v.kind = record::Value::Kind::Opaque;  // a singleton, named as its identity guard names it
    v.type = member;
  } else {
    v.kind = record::Value::Kind::Object;
    v.type = capture::typeName(Py_TYPE(o));
    if (auto base = baseValueOf(o)) v.atom = *base;  // an int, float or str subclass: its value
  }
}

namespace {

struct SnapshotContext {
  BlobPool& blobs;
  const ContentLookup& content;
  std::unordered_map<PyObject*, uint32_t> ids;  // objects already in the tree (or named as a dict's key)
  uint32_t next = 0;
  std::unordered_set<PyObject*> open;  // objects being snapshotted: the current one and its holders
  std::set<uint32_t> keysOnly;         // ids of dict keys the tree has not defined (yet)
  // What records read below each object, through every path that reaches
  // it (gather): `.x` and `.__dict__['x']`, `.weight` and
  // `._parameters['weight']` are one object, defined where the tree first
  // meets it and a Ref elsewhere, so its definition holds what both read.
  std::unordered_map<PyObject*, PathTrie> tries;
};

bool contains(const PathTrie& all, const PathTrie& some) {
  for (auto& [step, below] : some.children) {
    auto it = all.children.find(step);
    if (it == all.children.end() || !contains(it->second, below)) return false;
  }
  return true;
}

// Marks an object open while its contents are snapshotted.
struct Opened {
  Opened(SnapshotContext& ctx, PyObject* o) : ctx_(ctx), o_(o) { ctx_.open.insert(o_); }
  ~Opened() { ctx_.open.erase(o_); }
  SnapshotContext& ctx_;
  PyObject* o_;
};

// A dict whose keys are all tensors (not a tensor subclass's dict).
bool keyedByTensors(PyObject* o) {
  if (!PyDict_Check(o) || PyDict_GET_SIZE(o) == 0) return false;
  PyObject *k, *val;
  Py_ssize_t pos = 0;
  while (PyDict_Next(o, &pos, &k, &val))
    if (!isTensor(k)) return false;
  return true;
}

// A dict keyed by tensors the tree does not hold elsewhere cannot name its
// keys: it is an opaque value (native replay refuses what reads it).
void withoutUndefinedKeys(record::Value& v, const std::set<uint32_t>& undefined) {
  bool named = std::none_of(v.keyRefs.begin(), v.keyRefs.end(), [&](uint32_t k) { return undefined.count(k); });
  if (!named) {
    record::Value opaque;
    opaque.kind = record::Value::Kind::Opaque;
    opaque.type = "a dict keyed by tensors it alone holds";
    opaque.id = v.id;
    v = std::move(opaque);
    return;
  }
  for (auto& item : v.items) withoutUndefinedKeys(item, undefined);
}

// First pass: the union of what records read below each object, over
// every path the snapshot takes to it (SnapshotContext::tries). `held`
// keeps objects a step made afresh alive, so that no other takes their
// address meanwhile.
void gather(PyObject* o, const PathTrie& wanted, SnapshotContext& ctx, std::vector<PyRef>& held) {
  if (atomOf(o)) return;
  auto [at, fresh] = ctx.tries.try_emplace(o);
  if (!fresh && contains(at->second, wanted)) return;
  if (fresh) held.push_back(PyRef::borrow(o));
  at->second.insertTrie(wanted);
  const PathTrie all = at->second;  // the map may grow below
  auto child = [&](const record::PathStep& s) {
    auto it = all.children.find(s);
    static const PathTrie kEmpty;
    return it == all.children.end() ? kEmpty : it->second;
  };
  if (isTensor(o)) {
    auto grad = all.children.find(record::PathStep::attr("grad"));
    PyRef g = grad == all.children.end() ? PyRef() : PyRef::steal(PyObject_GetAttrString(o, "grad"));
    if (grad != all.children.end() && !g) PyErr_Clear();
    if (g) gather(g.get(), grad->second, ctx, held);
  } else if (PyTuple_Check(o) || PyList_Check(o)) {
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); ++i)
      gather(PySequence_Fast_GET_ITEM(o, i), child(record::PathStep::at(i)), ctx, held);
  } else if (keyedByTensors(o)) {
    PathTrie entry;
    for (auto& [s, sub] : all.children)
      if (s.kind == record::PathStep::Kind::ObjectKey) entry.insertTrie(sub);
    forEachDictItem(o, [&](PyObject*, PyObject* val) { gather(val, entry, ctx, held); });
  } else if (PyDict_Check(o)) {
    forEachDictItem(o, [&](PyObject* k, PyObject* val) {
      auto key = dictKey(k);
      gather(val, key ? child(record::PathStep::keyed(*key)) : PathTrie{}, ctx, held);
    });
  } else {
    for (auto& [s, sub] : all.children) {
      if (s.kind != record::PathStep::Kind::Attr) continue;
      PyRef key = PyRef::steal(PyUnicode_InternFromString(s.name.c_str()));
      PyRef a = stepOn(o, replay::PathTree::StepKind::Attr, 0, key.get());
      if (!a) continue;
      held.push_back(a);
      gather(a.get(), sub, ctx, held);
    }
  }
}

record::Value snapAs(PyObject* o, const PathTrie& wanted, SnapshotContext& ctx, record::Value v);

record::Value snap(PyObject* o, const PathTrie& wanted, SnapshotContext& ctx) {
  record::Value v;
  if (auto a = atomOf(o)) {
    v.atom = *a;
    return v;
  }
  if (auto it = ctx.ids.find(o); it != ctx.ids.end() && !ctx.keysOnly.erase(it->second)) {
    v.kind = record::Value::Kind::Ref;  // the same object again: keep the aliasing
    v.id = it->second;
    return v;
  } else if (it != ctx.ids.end()) {
    v.id = it->second;  // a dict's key met before: defined here
  } else {
    v.id = ctx.ids[o] = ++ctx.next;
  }
  Opened opened(ctx, o);
  if (auto gathered = ctx.tries.find(o); gathered != ctx.tries.end()) return snapAs(o, gathered->second, ctx, std::move(v));
  return snapAs(o, wanted, ctx, std::move(v));
}

// A list's, tuple's or dict's element. One that holds the container
// (L.append(L)) would make the value contain itself, which a record file
// cannot hold: a placeholder no guard accepts stands there instead, so
// native replay refuses the calls that read it.
record::Value snapElement(PyObject* o, const PathTrie& wanted, SnapshotContext& ctx) {
  if (!ctx.open.count(o)) return snap(o, wanted, ctx);
  record::Value placeholder;
  placeholder.kind = record::Value::Kind::Opaque;
  placeholder.type = "an object that holds itself, which a record file cannot hold";
  return placeholder;
}

record::Value snapAs(PyObject* o, const PathTrie& wanted, SnapshotContext& ctx, record::Value v) {
  auto child = [&](const record::PathStep& s) {
    auto it = wanted.children.find(s);
    static const PathTrie kEmpty;
    return it == wanted.children.end() ? kEmpty : it->second;
  };
  if (isTensor(o)) {
    const at::Tensor& t = tensorOf(o);
    const at::Tensor* before = ctx.content ? ctx.content(t) : nullptr;
    v.kind = record::Value::Kind::Tensor;
    v.meta = replay::metaOf(before ? *before : t);
    v.meta.requires_grad = t.requires_grad();
    v.meta.strides.assign(t.strides().begin(), t.strides().end());
    v.blob = ctx.blobs.add(before ? *before : t);
    // Its .grad where records read it (a training step's accumulation).
    auto grad = wanted.children.find(record::PathStep::attr("grad"));
    if (grad != wanted.children.end() && t.grad().defined()) {
      PyRef g = PyRef::steal(PyObject_GetAttrString(o, "grad"));
      if (!g) PyErr_Clear();
      if (g && isTensor(g.get())) {
        v.names = {"grad"};
        v.items.push_back(snap(g.get(), grad->second, ctx));
      }
    }
    return v;
  }
  if (PyTuple_Check(o) || PyList_Check(o)) {
    v.kind = PyTuple_Check(o) ? record::Value::Kind::Tuple : record::Value::Kind::List;
    if (!PyTuple_CheckExact(o) && !PyList_CheckExact(o)) v.type = typeName(Py_TYPE(o));
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    for (Py_ssize_t i = 0; i < n; ++i)
      v.items.push_back(snapElement(PySequence_Fast_GET_ITEM(o, i), child(record::PathStep::at(i)), ctx));
    return v;
  }
  bool plainKeys = PyDict_Check(o);
  if (plainKeys) {
    PyObject *k, *val;
    Py_ssize_t pos = 0;
    while (PyDict_Next(o, &pos, &k, &val))
      if (!dictKey(k)) plainKeys = false;
  }
  if (plainKeys) {
    v.kind = record::Value::Kind::Dict;
    if (!PyDict_CheckExact(o)) v.type = typeName(Py_TYPE(o));
    v.atom = defaultFactoryName(o);
    forEachDictItem(o, [&](PyObject* k, PyObject* val) {
      record::Atom key = *dictKey(k);
      v.keys.push_back(key);
      v.items.push_back(snapElement(val, child(record::PathStep::keyed(key)), ctx));
    });
    return v;
  }
  if (keyedByTensors(o)) {
    // torch.optim's state[param]: each key is the tensor of that id in the
    // same tree; what records read below any entry is taken for each.
    v.kind = record::Value::Kind::Dict;
    if (!PyDict_CheckExact(o)) v.type = typeName(Py_TYPE(o));
    v.atom = defaultFactoryName(o);
    PathTrie entry;
    for (auto& [s, sub] : wanted.children)
      if (s.kind == record::PathStep::Kind::ObjectKey) entry.insertTrie(sub);
    forEachDictItem(o, [&](PyObject* k, PyObject* val) {
      auto [it, fresh] = ctx.ids.emplace(k, ctx.next + 1);
      if (fresh) ctx.keysOnly.insert(++ctx.next);
      v.keys.emplace_back();
      v.keyRefs.push_back(it->second);
      v.items.push_back(snapElement(val, entry, ctx));
    });
    return v;
  }
  objectShell(o, v);
  // Attributes: only those records read.
  for (auto& [s, sub] : wanted.children) {
    if (s.kind != record::PathStep::Kind::Attr) continue;
    PyRef key = PyRef::steal(PyUnicode_InternFromString(s.name.c_str()));
    PyRef a = stepOn(o, replay::PathTree::StepKind::Attr, 0, key.get());
    // An attribute that leads back to an object holding it (a bound
    // method's __self__, a parent module) would make the value contain
    // itself, which records cannot hold: left out, so native replay finds
    // no such path and refuses what needs it. A weak reference's referent
    // is a Ref, which replay holds weakly.
    if (!a || (ctx.open.count(a.get()) && s.name != record::kWeakReferent)) continue;
    v.names.push_back(s.name);
    v.items.push_back(snap(a.get(), sub, ctx));
  }
  return v;
}

}  // namespace

record::Atom defaultFactoryName(PyObject* dict) {
  static PyObject* const defaultdict = processAttr("collections", "defaultdict");
  if (PyDict_CheckExact(dict) || !defaultdict || !PyObject_TypeCheck(dict, reinterpret_cast<PyTypeObject*>(defaultdict)))
    return {};
  PyRef factory = PyRef::steal(PyObject_GetAttrString(dict, "default_factory"));
  if (!factory) PyErr_Clear();
  return factory && factory.get() != Py_None ? record::Atom::string(qualifiedName(factory.get())) : record::Atom();
}

record::Value snapshot(PyObject* o, const PathTrie& wanted, BlobPool& blobs, const ContentLookup& content) {
  SnapshotContext ctx{blobs, content, {}, 0, {}, {}, {}};
  std::vector<PyRef> held;
  gather(o, wanted, ctx, held);
  record::Value v = snap(o, wanted, ctx);
  if (!ctx.keysOnly.empty()) withoutUndefinedKeys(v, ctx.keysOnly);
  record::compactIds(v);
  return v;
}

namespace {

// Which ids of two trees name one object: a value merged into one `into`
// holds at the same path is that object, and so is what a Ref of either
// names. `add` may describe the state at a later call, after the script
// made a path name another object (self.c = self.b): where its aliasing
// would join two objects `into` holds apart, it is not the run's first
// state, and `conflict` says so.
struct SameIds {
  std::map<uint32_t, uint32_t> parent;
  uint32_t addFirst = 0, addLast = 0;  // add's ids, after into's
  uint32_t next = 0;                   // for values of `into` that had no id
  bool conflict = false;
  uint32_t find(uint32_t id) {
    auto it = parent.find(id);
    if (it == parent.end() || it->second == id) return id;
    return it->second = find(it->second);
  }
  // A class's root is into's id once it holds one (unite makes it so).
  bool intos(uint32_t root) const { return root < addFirst || root > addLast; }
  void unite(uint32_t theirs, uint32_t ours) {
    uint32_t a = find(theirs), b = find(ours);
    if (a == b) return;
    if (intos(a)) conflict = true;  // add's object is already another of into's
    else parent[a] = b;
  }
};

// Containers in a snapshot are whole, objects hold the attributes read:
// merging adds attributes, never elements.
void merge(record::Value& into, const record::Value& add, bool addKeys, SameIds* same = nullptr) {
  using K = record::Value::Kind;
  if (same && add.id) {
    if (!into.id) into.id = ++same->next;
    same->unite(add.id, into.id);
  }
  if (into.kind != add.kind || into.kind == K::Ref) return;  // first read wins
  if (into.kind == K::Object || into.kind == K::Opaque) {
    for (size_t i = 0; i < add.names.size(); ++i) {
      auto it = std::find(into.names.begin(), into.names.end(), add.names[i]);
      if (it == into.names.end()) {
        into.names.push_back(add.names[i]);
        into.items.push_back(add.items[i]);
      } else {
        merge(into.items[size_t(it - into.names.begin())], add.items[i], false, same);
      }
    }
  } else if (into.kind == K::Dict) {
    // Keys that are objects (tensors) are named by ids of each tree: no
    // key of one is known to be a key of the other.
    if (!into.keyRefs.empty() || !add.keyRefs.empty()) return;
    for (size_t i = 0; i < add.keys.size(); ++i) {
      auto it = std::find(into.keys.begin(), into.keys.end(), add.keys[i]);
      if (it != into.keys.end()) {
        merge(into.items[size_t(it - into.keys.begin())], add.items[i], false, same);
      } else if (addKeys) {
        into.keys.push_back(add.keys[i]);
        into.items.push_back(add.items[i]);
      }
    }
  } else if (into.kind == K::Tuple || into.kind == K::List) {
    for (size_t i = 0; i < into.items.size() && i < add.items.size(); ++i) merge(into.items[i], add.items[i], false, same);
  }
}

uint32_t maxId(const record::Value& v) {
  uint32_t m = v.id;
  for (auto& item : v.items) m = std::max(m, maxId(item));
  return m;
}

void renumber(record::Value& v, const std::function<uint32_t(uint32_t)>& f) {
  if (v.id) v.id = f(v.id);
  for (auto& k : v.keyRefs)
    if (k) k = f(k);
  for (auto& item : v.items) renumber(item, f);
}

record::Value* definitionOf(record::Value& v, uint32_t id) {
  if (v.id == id && v.kind != record::Value::Kind::Ref) return &v;
  for (auto& item : v.items)
    if (record::Value* d = definitionOf(item, id)) return d;
  return nullptr;
}

// Each object is defined where the tree first meets it (replay builds it
// there) and a Ref elsewhere: a Ref met first trades places with its
// definition; a second definition (two trees described the object)
// becomes a Ref. False where a Ref names no definition.
bool defineBeforeUse(record::Value& root, record::Value& v, std::set<uint32_t>& defined) {
  if (v.kind == record::Value::Kind::Ref) {
    if (defined.count(v.id)) return true;
    record::Value* d = definitionOf(root, v.id);
    if (!d) return false;
    std::swap(v, *d);
  } else if (v.id && defined.count(v.id)) {
    record::Value ref;
    ref.kind = record::Value::Kind::Ref;
    ref.id = v.id;
    v = std::move(ref);
    return true;
  }
  if (v.id) defined.insert(v.id);
  for (auto& item : v.items)
    if (!defineBeforeUse(root, item, defined)) return false;
  return true;
}

}  // namespace

void mergeSnapshot(record::Value& root, const record::Value& add) {
  record::Value saved = root;
  // add's ids move past root's; those of objects root holds become its.
  uint32_t base = maxId(root);
  record::Value grafted = add;
  renumber(grafted, [&](uint32_t id) { return id + base; });
  SameIds same;
  same.addFirst = base + 1;
  same.addLast = same.next = base + maxId(add);
  merge(root, grafted, false, &same);
  std::set<uint32_t> defined;
  if (!same.conflict) {
    renumber(root, [&](uint32_t id) { return same.find(id); });
    if (defineBeforeUse(root, root, defined)) {
      record::compactIds(root);
      return;
    }
  }
  // add's aliasing disagrees with root's, or a Ref into a part root read
  // otherwise (first read wins): add's aliasing is lost, as its values
  // are kept.
  root = std::move(saved);
  grafted = add;
  record::expandRefs(grafted);
  merge(root, grafted, false);
}

void mergeGlobals(record::Value& into, const record::Value& add) {
  record::Value grafted = add;
  record::expandRefs(grafted);
  merge(into, grafted, true);
}

void removeFromSnapshot(record::Value& root, const std::vector<record::PathStep>& steps) {
  record::Value* cur = &root;
  for (size_t k = 0; k < steps.size(); ++k) {
    const record::PathStep& s = steps[k];
    auto& names = cur->names;
    auto& keys = cur->keys;
    size_t at = SIZE_MAX;
    if (s.kind == record::PathStep::Kind::Attr) {
      auto it = std::find(names.begin(), names.end(), s.name);
      if (it != names.end()) at = size_t(it - names.begin());
    } else if (s.kind == record::PathStep::Kind::Key) {
      auto it = std::find(keys.begin(), keys.end(), s.key);
      if (it != keys.end()) at = size_t(it - keys.begin());
    }
    if (at == SIZE_MAX) return;
    if (k + 1 == steps.size()) {
      cur->items.erase(cur->items.begin() + long(at));
      if (s.kind == record::PathStep::Kind::Attr) names.erase(names.begin() + long(at));
      else keys.erase(keys.begin() + long(at));
      return;
    }
    cur = &cur->items[at];
  }
}

}  // namespace magpy::capture

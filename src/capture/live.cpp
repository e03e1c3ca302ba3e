#include "capture/live.h"

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <unordered_map>

#include "magpy/replay/state.h"
#include "magpy/replay/tensors.h"
#include "magpy/support/error.h"
#include "magpy/support/hash.h"

namespace magpy::capture {
namespace {

PyRef moduleDict(const std::string& name) {
  PyRef n = PyRef::steal(PyUnicode_FromString(name.c_str()));
  PyRef m = PyRef::steal(PyImport_GetModule(n.get()));
  if (!m) {
    PyErr_Clear();
    return {};
  }
  return PyRef::borrow(PyModule_GetDict(m.get()));
}

bool tensorMatches(PyObject* o, const record::TensorMeta& m, c10::ScalarType dtype) {
  if (!isTensor(o)) return false;
  const at::Tensor& t = tensorOf(o);
  if (t.scalar_type() != dtype || t.requires_grad() != m.requires_grad) return false;
  auto sizes = t.sizes();
  auto strides = t.strides();
  if (sizes.size() != m.shape.size()) return false;
  for (size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] != m.shape[i] || strides[i] != m.strides[i]) return false;
  return replay::deviceName(t.device()) == m.device;
}

std::string describeLive(PyObject* o) {
  if (!o) return "missing";
  if (isTensor(o)) return "tensor " + record::toString(replay::metaOf(tensorOf(o)));
  if (auto a = atomOf(o)) return record::toString(*a);
  if (PyTuple_Check(o) || PyList_Check(o) || PyDict_Check(o))
    return typeName(Py_TYPE(o)) + " of " + std::to_string(PyObject_Length(o));
  std::string name = qualifiedName(o);
  if (PyFunction_Check(o) || PyCFunction_Check(o) || PyType_Check(o)) return name;
  if (PyModule_Check(o)) return std::string("module ") + PyModule_GetName(o);
  return "<" + typeName(Py_TYPE(o)) + " object>";
}

}  // namespace

namespace {

PyRef keyFor(const record::PathStep& s) {
  switch (s.kind) {
    case record::PathStep::Kind::Index: return PyRef::steal(PyLong_FromLongLong(s.index));
    case record::PathStep::Kind::Attr: return PyRef::steal(PyUnicode_InternFromString(s.name.c_str()));
    case record::PathStep::Kind::Key: break;
  }
  return atomObject(s.key);
}

// nn.Module keeps parameters, buffers and submodules out of __dict__ and
// finds them in Module.__getattr__, in Python. For modules that do not
// change how attributes are looked up, the same lookup in C.
bool plainModule(PyTypeObject* t) {
  static std::unordered_map<PyTypeObject*, bool> cache;
  static PyObject* moduleGetattr = nullptr;
  static PyObject* objectGetattribute = nullptr;
  auto it = cache.find(t);
  if (it != cache.end()) return it->second;
  if (!moduleGetattr) {
    PyRef nn = PyRef::steal(PyImport_ImportModule("torch.nn"));
    PyRef module = nn ? PyRef::steal(PyObject_GetAttrString(nn.get(), "Module")) : PyRef();
    PyObject* dict = module ? reinterpret_cast<PyTypeObject*>(module.get())->tp_dict : nullptr;
    moduleGetattr = dict ? PyDict_GetItemString(dict, "__getattr__") : nullptr;
    objectGetattribute = PyDict_GetItemString(PyBaseObject_Type.tp_dict, "__getattribute__");
    PyErr_Clear();
  }
  PyRef ga = PyRef::steal(PyUnicode_InternFromString("__getattr__"));
  PyRef gab = PyRef::steal(PyUnicode_InternFromString("__getattribute__"));
  bool plain = moduleGetattr && _PyType_Lookup(t, ga.get()) == moduleGetattr &&
               _PyType_Lookup(t, gab.get()) == objectGetattribute;
  cache.emplace(t, plain);
  return plain;
}

// An attribute the module's class does not define: in the instance's
// __dict__, or in one of the dicts Module.__setattr__ files it into.
PyRef moduleAttr(PyObject* obj, PyObject* name) {
  PyObject** dictPtr = _PyObject_GetDictPtr(obj);
  PyObject* dict = dictPtr ? *dictPtr : nullptr;
  if (!dict) return PyRef();
  if (PyObject* v = PyDict_GetItemWithError(dict, name)) return PyRef::borrow(v);
  for (const char* holder : {"_parameters", "_buffers", "_modules"}) {
    PyObject* d = PyDict_GetItemString(dict, holder);
    if (d && PyDict_Check(d))
      if (PyObject* v = PyDict_GetItemWithError(d, name)) return PyRef::borrow(v);
  }
  return PyRef();
}

// One step: Attr (getattr), Index (sequence item), Key (mapping item).
PyRef stepOn(PyObject* cur, const record::PathStep& s, PyObject* key) {
  PyObject* v = nullptr;
  switch (s.kind) {
    case record::PathStep::Kind::Attr:
      if (plainModule(Py_TYPE(cur)) && !_PyType_Lookup(Py_TYPE(cur), key)) {
        PyRef found = moduleAttr(cur, key);
        PyErr_Clear();
        return found;  // null: not on the instance, its class, or the module's dicts
      }
      v = PyObject_GetAttr(cur, key);
      break;
    case record::PathStep::Kind::Index:
      v = PySequence_Check(cur) ? PySequence_GetItem(cur, Py_ssize_t(s.index)) : nullptr;
      break;
    case record::PathStep::Kind::Key:
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

PyRef rootOf(const record::AccessPath& path, const LiveRoots& roots) {
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

}  // namespace

PyRef resolveLive(const record::AccessPath& path, const LiveRoots& roots) {
  PyRef cur = rootOf(path.root == record::AccessPath::Root::Global || path.root == record::AccessPath::Root::Runtime
                         ? path
                         : record::AccessPath{path.root, path.index, path.name, {}},
                     roots);
  for (auto& s : path.steps) {
    if (!cur) return {};
    PyRef key = keyFor(s);
    cur = stepOn(cur.get(), s, key.get());
  }
  return cur;
}

int LivePaths::add(const record::AccessPath& path) {
  record::AccessPath root = path;
  root.steps.clear();
  auto it = roots_.find(root);
  int node;
  if (it != roots_.end()) {
    node = it->second;
  } else {
    node = int(nodes_.size());
    nodes_.push_back({-1, root, {}, {}});
    roots_.emplace(root, node);
  }
  for (auto& s : path.steps) {
    auto child = children_.find({node, s});
    if (child != children_.end()) {
      node = child->second;
      continue;
    }
    int next = int(nodes_.size());
    nodes_.push_back({node, {}, s, keyFor(s)});
    children_.emplace(std::make_pair(node, s), next);
    node = next;
  }
  return node;
}

LivePaths::Values::Values(const LivePaths& paths, const LiveRoots& roots)
    : paths_(paths), roots_(roots), values_(paths.nodes_.size()), state_(paths.nodes_.size(), 0) {}

PyObject* LivePaths::Values::get(int node) {
  if (state_[size_t(node)]) return values_[size_t(node)].get();
  const Node& n = paths_.nodes_[size_t(node)];
  PyRef v;
  if (n.parent < 0) {
    v = rootOf(n.root, roots_);
  } else if (PyObject* parent = get(n.parent)) {
    v = stepOn(parent, n.step, n.key.get());
  }
  state_[size_t(node)] = v ? 1 : 2;
  values_[size_t(node)] = std::move(v);
  return values_[size_t(node)].get();
}

namespace {

void collectMockPaths(const record::ValueExpr& e, std::vector<record::AccessPath>& out) {
  if (e.kind == record::ValueExpr::Kind::Read) out.push_back(e.path);
  for (auto& item : e.items) collectMockPaths(item, out);
}

}  // namespace

LiveRecord::LiveRecord(const record::Record& record, std::vector<PyRef> expected,
                       const std::vector<record::AccessPath>& inputs)
    : record_(record) {
  expected.resize(record_.guards.size());
  for (size_t i = 0; i < record_.guards.size(); ++i) {
    const record::Guard& g = record_.guards[i];
    GuardStep step{&g, paths_.add(g.path), -1, std::move(expected[i]), c10::ScalarType::Undefined};
    if (g.check.kind == record::Check::Kind::Alias) step.other = paths_.add(g.check.path);
    if (g.check.kind == record::Check::Kind::Tensor) {
      step.dtype = replay::dtypeFromName(g.check.meta.dtype);
      for (auto& other : record_.guards)
        step.subclassTyped = step.subclassTyped || (other.check.kind == record::Check::Kind::Type && other.path == g.path);
    }
    guards_.push_back(std::move(step));
  }
  for (auto& p : inputs) inputs_.push_back(paths_.add(p));
  std::vector<record::AccessPath> reads;
  collectMockPaths(record_.mock.result, reads);
  for (auto& e : record_.mock.effects) {
    reads.push_back(e.target);
    collectMockPaths(e.value, reads);
  }
  for (auto& p : reads) mockPaths_.emplace(p, paths_.add(p));
}

std::optional<LiveMiss> LiveRecord::check(LivePaths::Values& values) const {
  using K = record::Check::Kind;
  for (const GuardStep& gs : guards_) {
    const record::Guard& g = *gs.guard;
    PyObject* v = values.get(gs.node);
    bool ok = false;
    if (!v) {
      ok = g.check.kind == K::Absent;
    } else {
      switch (g.check.kind) {
        case K::Type:
          ok = gs.expected ? reinterpret_cast<PyObject*>(Py_TYPE(v)) == gs.expected.get() : typeName(Py_TYPE(v)) == g.check.s;
          break;
        case K::Identity:
          ok = gs.expected ? v == gs.expected.get() : qualifiedName(v) == g.check.s;
          break;
        case K::Equals: {
          auto a = atomOf(v);
          if (!a) a = baseValueOf(v);
          ok = a && *a == g.check.atom;
          break;
        }
        case K::Length:
          ok = PyObject_Length(v) == g.check.i;
          if (PyErr_Occurred()) PyErr_Clear();
          break;
        case K::DictKeys: {
          if (!PyDict_Check(v) || PyDict_GET_SIZE(v) != Py_ssize_t(g.check.keys.size())) break;
          PyObject *k, *val;
          Py_ssize_t pos = 0;
          size_t n = 0;
          ok = true;
          while (PyDict_Next(v, &pos, &k, &val)) {
            auto a = dictKey(k);
            if (!a || !(*a == g.check.keys[n++])) {
              ok = false;
              break;
            }
          }
          break;
        }
        case K::Tensor:
          // A tensor subclass runs Python (__torch_function__) on every
          // operator: only a record made with that subclass serves it.
          ok = tensorMatches(v, g.check.meta, gs.dtype) && (gs.subclassTyped || plainTensorType(Py_TYPE(v)));
          break;
        case K::Alias:
          ok = values.get(gs.other) == v;
          break;
        case K::Absent:
          ok = false;
          break;
      }
    }
    if (!ok) return LiveMiss{record::toString(g.path), record::describe(g.check), describeLive(v)};
  }
  return std::nullopt;
}

std::vector<c10::IValue> LiveRecord::inputs(LivePaths::Values& values) const {
  std::vector<c10::IValue> out;
  out.reserve(inputs_.size());
  for (size_t i = 0; i < inputs_.size(); ++i) {
    PyObject* v = values.get(inputs_[i]);
    if (!v || !isTensor(v)) throw Error("a graph input is not a tensor");
    out.emplace_back(tensorOf(v));
  }
  return out;
}

namespace {

PyRef build(const record::ValueExpr& e, const std::vector<c10::IValue>& outputs,
            const std::function<PyObject*(const record::AccessPath&)>& read) {
  using K = record::ValueExpr::Kind;
  switch (e.kind) {
    case K::Const:
      return atomObject(e.atom);
    case K::GraphOutput: {
      const c10::IValue& v = outputs.at(size_t(e.index));
      if (v.isTensor()) return wrapTensor(v.toTensor());
      if (v.isInt()) return PyRef::steal(PyLong_FromLongLong(v.toInt()));
      if (v.isDouble()) return PyRef::steal(PyFloat_FromDouble(v.toDouble()));
      if (v.isBool()) return PyRef::borrow(v.toBool() ? Py_True : Py_False);
      throw Error("a graph output of kind " + std::string(v.tagKind()) + " cannot be returned");
    }
    case K::Read: {
      PyObject* v = read(e.path);
      if (!v) throw Error("the mock reads " + record::toString(e.path) + ", which does not exist");
      return PyRef::borrow(v);
    }
    case K::Tuple:
    case K::List: {
      PyRef c = PyRef::steal(e.kind == K::Tuple ? PyTuple_New(Py_ssize_t(e.items.size())) : PyList_New(Py_ssize_t(e.items.size())));
      for (size_t i = 0; i < e.items.size(); ++i) {
        PyObject* item = build(e.items[i], outputs, read).release();
        if (e.kind == K::Tuple) PyTuple_SET_ITEM(c.get(), Py_ssize_t(i), item);
        else PyList_SET_ITEM(c.get(), Py_ssize_t(i), item);
      }
      return c;
    }
    case K::Dict: {
      PyRef d = PyRef::steal(PyDict_New());
      for (size_t i = 0; i < e.items.size(); ++i)
        PyDict_SetItem(d.get(), atomObject(e.keys[i]).get(), build(e.items[i], outputs, read).get());
      return d;
    }
  }
  throw Error("unknown mock expression");
}

void ensure(int status, const std::string& what) {
  if (status < 0) throw Error(what + ": " + takePythonError());
}

}  // namespace

PyRef LiveRecord::mock(const std::vector<c10::IValue>& outputs, LivePaths::Values& values) const {
  auto read = [&](const record::AccessPath& p) { return values.get(mockPaths_.at(p)); };
  const record::MockSpec& mock = record_.mock;
  // Reads first, against the entry state; then the writes, in order.
  PyRef result = build(mock.result, outputs, read);
  struct Write {
    const record::Effect* effect;
    PyRef target, value;
  };
  std::vector<Write> writes;
  for (auto& e : mock.effects) {
    PyObject* target = read(e.target);
    if (!target) throw Error("the mock writes to " + record::toString(e.target) + ", which does not exist");
    writes.push_back({&e, PyRef::borrow(target), build(e.value, outputs, read)});
  }
  for (auto& w : writes) {
    const record::Effect& e = *w.effect;
    std::string what = "the mock's write " + record::toString(e);
    switch (e.kind) {
      case record::Effect::Kind::SetAttr:
        ensure(PyObject_SetAttrString(w.target.get(), e.name.c_str(), w.value.get()), what);
        break;
      case record::Effect::Kind::DelAttr:
        ensure(PyObject_DelAttrString(w.target.get(), e.name.c_str()), what);
        break;
      case record::Effect::Kind::SetItem:
        ensure(PyObject_SetItem(w.target.get(), atomObject(e.key).get(), w.value.get()), what);
        break;
      case record::Effect::Kind::DelItem:
        ensure(PyObject_DelItem(w.target.get(), atomObject(e.key).get()), what);
        break;
      case record::Effect::Kind::Assign:
        if (PyList_Check(w.target.get())) {
          ensure(PyList_SetSlice(w.target.get(), 0, PyList_GET_SIZE(w.target.get()), w.value.get()), what);
        } else if (PyDict_Check(w.target.get())) {
          PyDict_Clear(w.target.get());
          ensure(PyDict_Update(w.target.get(), w.value.get()), what);
        } else {
          throw Error(what + ": the target is neither a list nor a dict");
        }
        break;
    }
  }
  return result;
}

uint32_t BlobPool::add(const at::Tensor& t) {
  record::TensorBlob b = replay::blobOf(t);
  uint64_t key = Hasher().u64(b.hash).text(b.dtype).bytes(b.shape.data(), b.shape.size() * sizeof(int64_t)).digest();
  auto it = byHash_.find(key);
  if (it != byHash_.end()) return it->second;
  uint32_t index = uint32_t(blobs_.size());
  blobs_.push_back(std::move(b));
  byHash_.emplace(key, index);
  return index;
}

void PathTrie::insert(const std::vector<record::PathStep>& steps, size_t from) {
  if (from >= steps.size()) return;
  children[steps[from]].insert(steps, from + 1);
}

namespace {

struct SnapshotContext {
  BlobPool& blobs;
  const ContentLookup& content;
  std::unordered_map<PyObject*, uint32_t> ids;  // objects already in the tree
  uint32_t next = 0;
};

record::Value snap(PyObject* o, const PathTrie& wanted, SnapshotContext& ctx) {
  record::Value v;
  if (auto a = atomOf(o)) {
    v.atom = *a;
    return v;
  }
  if (auto it = ctx.ids.find(o); it != ctx.ids.end()) {
    v.kind = record::Value::Kind::Ref;  // the same object again: keep the aliasing
    v.id = it->second;
    return v;
  }
  v.id = ctx.ids[o] = ++ctx.next;
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
    return v;
  }
  if (PyTuple_Check(o) || PyList_Check(o)) {
    v.kind = PyTuple_Check(o) ? record::Value::Kind::Tuple : record::Value::Kind::List;
    if (!PyTuple_CheckExact(o) && !PyList_CheckExact(o)) v.type = typeName(Py_TYPE(o));
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    for (Py_ssize_t i = 0; i < n; ++i)
      v.items.push_back(snap(PySequence_Fast_GET_ITEM(o, i), child(record::PathStep::at(i)), ctx));
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
    PyObject *k, *val;
    Py_ssize_t pos = 0;
    while (PyDict_Next(o, &pos, &k, &val)) {
      record::Atom key = *dictKey(k);
      v.keys.push_back(key);
      v.items.push_back(snap(val, child(record::PathStep::keyed(key)), ctx));
    }
    return v;
  }
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
    v.type = typeName(Py_TYPE(o));
  }
  // Attributes: only those records read.
  for (auto& [s, sub] : wanted.children) {
    if (s.kind != record::PathStep::Kind::Attr) continue;
    PyRef key = keyFor(s);
    PyRef a = stepOn(o, s, key.get());
    if (!a) continue;
    v.names.push_back(s.name);
    v.items.push_back(snap(a.get(), sub, ctx));
  }
  return v;
}

}  // namespace

record::Value snapshot(PyObject* o, const PathTrie& wanted, BlobPool& blobs, const ContentLookup& content) {
  SnapshotContext ctx{blobs, content, {}, 0};
  record::Value v = snap(o, wanted, ctx);
  record::compactIds(v);
  return v;
}

namespace {

// Containers in a snapshot are whole, objects hold the attributes read:
// merging adds attributes, never elements.
void merge(record::Value& into, const record::Value& add, bool addKeys) {
  using K = record::Value::Kind;
  if (into.kind != add.kind) return;  // first read wins
  if (into.kind == K::Object || into.kind == K::Opaque) {
    for (size_t i = 0; i < add.names.size(); ++i) {
      auto it = std::find(into.names.begin(), into.names.end(), add.names[i]);
      if (it == into.names.end()) {
        into.names.push_back(add.names[i]);
        into.items.push_back(add.items[i]);
      } else {
        merge(into.items[size_t(it - into.names.begin())], add.items[i], false);
      }
    }
  } else if (into.kind == K::Dict) {
    for (size_t i = 0; i < add.keys.size(); ++i) {
      auto it = std::find(into.keys.begin(), into.keys.end(), add.keys[i]);
      if (it != into.keys.end()) {
        merge(into.items[size_t(it - into.keys.begin())], add.items[i], false);
      } else if (addKeys) {
        into.keys.push_back(add.keys[i]);
        into.items.push_back(add.items[i]);
      }
    }
  } else if (into.kind == K::Tuple || into.kind == K::List) {
    for (size_t i = 0; i < into.items.size() && i < add.items.size(); ++i) merge(into.items[i], add.items[i], false);
  }
}

}  // namespace

void mergeSnapshot(record::Value& into, const record::Value& add) {
  record::Value grafted = add;
  record::expandRefs(grafted);  // its ids mean nothing in `into`
  merge(into, grafted, false);
}

void mergeGlobals(record::Value& into, const record::Value& add) {
  record::Value grafted = add;
  record::expandRefs(grafted);
  merge(into, grafted, true);
}

}  // namespace magpy::capture

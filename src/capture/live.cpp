#include "capture/live.h"

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <unordered_map>

#include "magpy/replay/tensors.h"
#include "magpy/support/error.h"
#include "magpy/support/hash.h"

namespace magpy::capture {
namespace {

PyRef keyObject(const record::PathStep& s) {
  return PyRef::steal(s.keyIsInt ? PyLong_FromLongLong(s.index) : PyUnicode_FromStringAndSize(s.name.data(), Py_ssize_t(s.name.size())));
}

PyRef step(PyObject* cur, const record::PathStep& s) {
  PyObject* v = nullptr;
  switch (s.kind) {
    case record::PathStep::Kind::Attr:
      v = PyObject_GetAttrString(cur, s.name.c_str());
      break;
    case record::PathStep::Kind::Index:
      v = PySequence_Check(cur) ? PySequence_GetItem(cur, Py_ssize_t(s.index)) : nullptr;
      break;
    case record::PathStep::Kind::Key: {
      PyRef key = keyObject(s);
      if (PyDict_Check(cur)) {
        v = PyDict_GetItemWithError(cur, key.get());
        Py_XINCREF(v);
      } else if (PyMapping_Check(cur)) {
        v = PyObject_GetItem(cur, key.get());
      }
      break;
    }
  }
  if (!v) PyErr_Clear();
  return PyRef::steal(v);
}

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

PyRef resolveLive(const record::AccessPath& path, const LiveRoots& roots) {
  PyRef cur;
  switch (path.root) {
    case record::AccessPath::Root::Self:
      cur = PyRef::borrow(roots.self);
      break;
    case record::AccessPath::Root::Arg:
      if (path.index == -1) {
        cur = roots.args ? PyRef::borrow(roots.args) : PyRef::steal(PyTuple_New(0));
        break;
      }
      if (!roots.args || path.index >= PyTuple_GET_SIZE(roots.args)) return {};
      cur = PyRef::borrow(PyTuple_GET_ITEM(roots.args, path.index));
      break;
    case record::AccessPath::Root::Kwarg:
      if (path.name.empty()) {
        cur = roots.kwargs ? PyRef::borrow(roots.kwargs) : PyRef::steal(PyDict_New());
        break;
      }
      if (!roots.kwargs) return {};
      cur = PyRef::borrow(PyDict_GetItemString(roots.kwargs, path.name.c_str()));
      break;
    case record::AccessPath::Root::Global:
      cur = moduleDict(path.name.empty() ? roots.homeModule : path.name);
      break;
    case record::AccessPath::Root::Runtime: {
      if (path.name != "grad_enabled") return {};
      PyRef torch = PyRef::steal(PyImport_ImportModule("torch"));
      cur = torch ? PyRef::steal(PyObject_CallMethod(torch.get(), "is_grad_enabled", nullptr)) : PyRef();
      if (!cur) PyErr_Clear();
      break;
    }
  }
  for (auto& s : path.steps) {
    if (!cur) return {};
    cur = step(cur.get(), s);
  }
  return cur;
}

LiveGuards::LiveGuards(const std::vector<record::Guard>& guards, std::vector<PyRef> expected)
    : guards_(guards), expected_(std::move(expected)) {
  expected_.resize(guards_.size());
}

std::optional<LiveMiss> LiveGuards::check(const LiveRoots& roots) const {
  using K = record::Check::Kind;
  for (size_t i = 0; i < guards_.size(); ++i) {
    const record::Guard& g = guards_[i];
    PyRef v = resolveLive(g.path, roots);
    bool ok = false;
    if (!v) {
      ok = g.check.kind == K::Absent;
    } else {
      switch (g.check.kind) {
        case K::Type:
          ok = expected_[i] ? reinterpret_cast<PyObject*>(Py_TYPE(v.get())) == expected_[i].get()
                            : typeName(Py_TYPE(v.get())) == g.check.s;
          break;
        case K::Identity:
          ok = expected_[i] ? v.get() == expected_[i].get() : qualifiedName(v.get()) == g.check.s;
          break;
        case K::Equals: {
          auto a = atomOf(v.get());
          ok = a && *a == g.check.atom;
          break;
        }
        case K::Length:
          ok = PyObject_Length(v.get()) == g.check.i;
          if (PyErr_Occurred()) PyErr_Clear();
          break;
        case K::DictKeys: {
          if (!PyDict_Check(v.get()) || PyDict_GET_SIZE(v.get()) != Py_ssize_t(g.check.keys.size())) break;
          PyObject *k, *val;
          Py_ssize_t pos = 0;
          size_t n = 0;
          ok = true;
          while (PyDict_Next(v.get(), &pos, &k, &val)) {
            auto a = atomOf(k);
            if (!a || !(*a == g.check.keys[n++])) {
              ok = false;
              break;
            }
          }
          break;
        }
        case K::Tensor:
          ok = tensorMatches(v.get(), g.check.meta, replay::dtypeFromName(g.check.meta.dtype));
          break;
        case K::Alias: {
          PyRef other = resolveLive(g.check.path, roots);
          ok = other && other.get() == v.get();
          break;
        }
        case K::Absent:
          ok = false;
          break;
      }
    }
    if (!ok) return LiveMiss{record::toString(g.path), record::describe(g.check), describeLive(v.get())};
  }
  return std::nullopt;
}

namespace {

PyRef build(const record::ValueExpr& e, const std::vector<c10::IValue>& outputs, const LiveRoots& roots) {
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
      PyRef v = resolveLive(e.path, roots);
      if (!v) throw Error("the mock reads " + record::toString(e.path) + ", which does not exist");
      return v;
    }
    case K::Tuple:
    case K::List: {
      PyRef c = PyRef::steal(e.kind == K::Tuple ? PyTuple_New(Py_ssize_t(e.items.size())) : PyList_New(Py_ssize_t(e.items.size())));
      for (size_t i = 0; i < e.items.size(); ++i) {
        PyObject* item = build(e.items[i], outputs, roots).release();
        if (e.kind == K::Tuple) PyTuple_SET_ITEM(c.get(), Py_ssize_t(i), item);
        else PyList_SET_ITEM(c.get(), Py_ssize_t(i), item);
      }
      return c;
    }
    case K::Dict: {
      PyRef d = PyRef::steal(PyDict_New());
      for (size_t i = 0; i < e.items.size(); ++i)
        PyDict_SetItem(d.get(), atomObject(e.keys[i]).get(), build(e.items[i], outputs, roots).get());
      return d;
    }
  }
  throw Error("unknown mock expression");
}

void check(int status, const std::string& what) {
  if (status < 0) throw Error(what + ": " + takePythonError());
}

}  // namespace

PyRef applyLiveMock(const record::MockSpec& mock, const std::vector<c10::IValue>& outputs, const LiveRoots& roots) {
  // Reads first, against the entry state; then the writes, in order.
  PyRef result = build(mock.result, outputs, roots);
  struct Write {
    const record::Effect* effect;
    PyRef target, value;
  };
  std::vector<Write> writes;
  for (auto& e : mock.effects) {
    PyRef target = resolveLive(e.target, roots);
    if (!target) throw Error("the mock writes to " + record::toString(e.target) + ", which does not exist");
    writes.push_back({&e, std::move(target), build(e.value, outputs, roots)});
  }
  for (auto& w : writes) {
    const record::Effect& e = *w.effect;
    std::string what = "the mock's write " + record::toString(e);
    switch (e.kind) {
      case record::Effect::Kind::SetAttr:
        check(PyObject_SetAttrString(w.target.get(), e.name.c_str(), w.value.get()), what);
        break;
      case record::Effect::Kind::DelAttr:
        check(PyObject_DelAttrString(w.target.get(), e.name.c_str()), what);
        break;
      case record::Effect::Kind::SetItem:
        check(PyObject_SetItem(w.target.get(), atomObject(e.key).get(), w.value.get()), what);
        break;
      case record::Effect::Kind::DelItem:
        check(PyObject_DelItem(w.target.get(), atomObject(e.key).get()), what);
        break;
      case record::Effect::Kind::Assign:
        if (PyList_Check(w.target.get())) {
          check(PyList_SetSlice(w.target.get(), 0, PyList_GET_SIZE(w.target.get()), w.value.get()), what);
        } else if (PyDict_Check(w.target.get())) {
          PyDict_Clear(w.target.get());
          check(PyDict_Update(w.target.get(), w.value.get()), what);
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
      v.items.push_back(snap(PySequence_Fast_GET_ITEM(o, i), child({record::PathStep::Kind::Index, {}, i, false}), ctx));
    return v;
  }
  bool plainKeys = PyDict_Check(o);
  if (plainKeys) {
    PyObject *k, *val;
    Py_ssize_t pos = 0;
    while (PyDict_Next(o, &pos, &k, &val))
      if (!PyUnicode_CheckExact(k) && !PyLong_CheckExact(k)) plainKeys = false;
  }
  if (plainKeys) {
    v.kind = record::Value::Kind::Dict;
    if (!PyDict_CheckExact(o)) v.type = typeName(Py_TYPE(o));
    PyObject *k, *val;
    Py_ssize_t pos = 0;
    while (PyDict_Next(o, &pos, &k, &val)) {
      record::PathStep s = PyUnicode_CheckExact(k) ? record::PathStep{record::PathStep::Kind::Key, PyUnicode_AsUTF8(k), 0, false}
                                                   : record::PathStep{record::PathStep::Kind::Key, {}, PyLong_AsLongLong(k), true};
      v.keys.push_back(*atomOf(k));
      v.items.push_back(snap(val, child(s), ctx));
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
  } else {
    v.kind = record::Value::Kind::Object;
    v.type = typeName(Py_TYPE(o));
  }
  // Attributes: only those records read.
  for (auto& [s, sub] : wanted.children) {
    if (s.kind != record::PathStep::Kind::Attr) continue;
    PyRef a = step(o, s);
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

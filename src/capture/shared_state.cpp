#include "capture/shared_state.h"

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <functional>

#include "capture/call_log.h"
#include "capture/pyobjects.h"
#include "magpy/replay/passes.h"

namespace magpy::capture {

namespace {

// What stands for an object's identity where a write could change it: a
// tensor's storage (a view shares it), a list, a dict, or an instance of a
// class defined in Python; null for the rest (numbers, strings, tuples,
// classes, functions, modules), which records do not write into.
const void* writableIdentity(PyObject* o) {
  if (isTensor(o)) {
    const at::Tensor& t = tensorOf(o);
    return t.has_storage() ? t.storage().unsafeGetStorageImpl() : nullptr;
  }
  bool instance = PyType_HasFeature(Py_TYPE(o), Py_TPFLAGS_HEAPTYPE) && !PyType_Check(o) && !PyFunction_Check(o);
  return PyList_Check(o) || PyDict_Check(o) || instance ? o : nullptr;
}

// The value that defines what `steps` name below root (a Ref followed to
// its definition), or null where the walk finds none.
const record::Value* definitionAt(const record::Value& root, const std::vector<record::PathStep>& steps) {
  std::map<uint32_t, const record::Value*> defined;
  std::function<void(const record::Value&)> index = [&](const record::Value& v) {
    if (v.id && v.kind != record::Value::Kind::Ref) defined.emplace(v.id, &v);
    for (auto& item : v.items) index(item);
  };
  auto follow = [&](const record::Value* v) -> const record::Value* {
    if (v->kind != record::Value::Kind::Ref) return v;
    if (defined.empty()) index(root);
    auto it = defined.find(v->id);
    return it == defined.end() ? nullptr : it->second;
  };
  const record::Value* v = follow(&root);
  for (const record::PathStep& s : steps) {
    if (!v) return nullptr;
    size_t at = SIZE_MAX;
    if (s.kind == record::PathStep::Kind::Attr) {
      auto it = std::find(v->names.begin(), v->names.end(), s.name);
      if (it != v->names.end()) at = size_t(it - v->names.begin());
    } else if (s.kind == record::PathStep::Kind::Index && s.index >= 0) {
      at = size_t(s.index);
    } else if (s.kind == record::PathStep::Kind::Key && v->keyRefs.empty()) {
      auto it = std::find(v->keys.begin(), v->keys.end(), s.key);
      if (it != v->keys.end()) at = size_t(it - v->keys.begin());
    }
    if (at >= v->items.size()) return nullptr;
    v = follow(&v->items[at]);
  }
  return v;
}

// The state paths record r writes through: its mock's targets and the
// graph's inputs that an operator writes in place.
std::vector<record::AccessPath> writtenState(const record::Record& r) {
  std::vector<record::AccessPath> out;
  auto state = [](const record::AccessPath& p) {
    return p.root == record::AccessPath::Root::Self || p.root == record::AccessPath::Root::Global;
  };
  for (const record::Effect& e : r.mock.effects)
    if (state(e.target)) out.push_back(e.target);
  if (r.graph.nodes.empty()) return out;
  replay::StorageFacts facts = replay::storageFacts(r.graph);
  for (size_t i = 0; i < r.graph.nodes.size(); ++i) {
    const record::Node& n = r.graph.nodes[i];
    if (n.isInput() && facts.writtenInPlace[i] && state(n.source)) out.push_back(n.source);
  }
  return out;
}

}  // namespace

SharedState::Holder SharedState::holder(const Units& units, size_t u, const record::AccessPath& path) const {
  auto [index, canonical] = CallLog::stateKey(units, u, path);
  Holder h{{index, index < 0 ? canonical.name : ""}, nullptr, ""};
  h.where = (index < 0 ? "" : units[u]->name + "'s ") + record::toString(canonical);
  if (index >= 0 && units[u]->haveSelf) {
    h.native = definitionAt(units[u]->self, path.steps);
  } else if (auto it = globals_.find(canonical.name); index < 0 && it != globals_.end()) {
    h.native = definitionAt(it->second, path.steps);
  }
  return h;
}

SharedState::SharedState(const Units& units, const std::map<std::string, record::Value>& globals) : globals_(globals) {
  std::map<const void*, std::vector<std::pair<size_t, record::AccessPath>>> named;  // per object, the paths to it
  for (size_t u = 0; u < units.size(); ++u) {
    const Unit& fn = *units[u];
    LiveRoots roots{fn.spec.self, nullptr, nullptr, fn.spec.homeModule};
    for (const record::AccessPath& path : fn.statePaths) {
      record::AccessPath prefix = path;
      prefix.steps.clear();
      for (size_t k = 0; k <= path.steps.size(); ++k) {
        if (k > 0) prefix.steps.push_back(path.steps[k - 1]);
        PyRef o = resolveLive(prefix, roots);
        const void* id = o ? writableIdentity(o.get()) : nullptr;
        if (!id) continue;
        held_.push_back(o);
        auto& paths = named[id];
        if (std::find(paths.begin(), paths.end(), std::make_pair(u, prefix)) == paths.end()) paths.emplace_back(u, prefix);
      }
    }
  }
  PyErr_Clear();
  for (auto& [id, paths] : named) {
    if (paths.size() < 2) continue;
    std::vector<Holder>& holders = holders_[id];
    for (auto& [u, path] : paths) holders.push_back(holder(units, u, path));
  }
}

std::string SharedState::refusal(const Units& units, size_t u, const record::Record& r) const {
  if (holders_.empty()) return "";
  const Unit& fn = *units[u];
  LiveRoots roots{fn.spec.self, nullptr, nullptr, fn.spec.homeModule};
  for (const record::AccessPath& path : writtenState(r)) {
    PyRef o = resolveLive(path, roots);
    auto it = holders_.find(o ? writableIdentity(o.get()) : nullptr);
    if (it == holders_.end()) continue;
    Holder written = holder(units, u, path);
    // Another tree's copy, or another value of this tree (where the file
    // tells: a path no walk finds is taken to be the written one).
    auto apart = [&](const Holder& h) {
      if (h.tree != written.tree) return true;
      return h.native && written.native && h.native != written.native;
    };
    for (const Holder& h : it->second)
      if (apart(h))
        return "refused natively: it writes " + record::toString(path) + ", which is also " + h.where +
               "; a record file holds the two apart, so natively the write would not show there";
  }
  PyErr_Clear();
  return "";
}

}  // namespace magpy::capture

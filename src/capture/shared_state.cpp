#include "capture/shared_state.h"

#include <ATen/core/Tensor.h>

#include <algorithm>

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

SharedState::SharedState(const Units& units) {
  std::map<const void*, std::vector<Holder>> all;
  for (size_t u = 0; u < units.size(); ++u) {
    const Unit& fn = *units[u];
    LiveRoots roots{fn.spec.self, nullptr, nullptr, fn.spec.homeModule};
    for (const record::AccessPath& path : fn.statePaths) {
      auto [index, canonical] = CallLog::stateKey(units, u, path);
      Tree tree{index, index < 0 ? canonical.name : ""};
      record::AccessPath prefix = path, named = canonical;
      prefix.steps.clear();
      named.steps.clear();
      for (size_t k = 0; k <= path.steps.size(); ++k) {
        if (k > 0) {
          prefix.steps.push_back(path.steps[k - 1]);
          named.steps.push_back(path.steps[k - 1]);
        }
        PyRef o = resolveLive(prefix, roots);
        const void* id = o ? writableIdentity(o.get()) : nullptr;
        if (!id) continue;
        held_.push_back(o);
        std::vector<Holder>& holders = all[id];
        bool known = std::any_of(holders.begin(), holders.end(),
                                 [&](const Holder& h) { return h.unit == u && h.path == prefix; });
        if (!known)
          holders.push_back({tree, u, prefix, (index < 0 ? "" : fn.name + "'s ") + record::toString(named)});
      }
    }
  }
  PyErr_Clear();
  for (auto& [id, holders] : all) {
    bool apart = std::any_of(holders.begin(), holders.end(),
                             [&](const Holder& h) { return h.tree != holders.front().tree; });
    if (apart) holders_.emplace(id, std::move(holders));
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
    auto [index, canonical] = CallLog::stateKey(units, u, path);
    Tree tree{index, index < 0 ? canonical.name : ""};
    for (const Holder& h : it->second)
      if (h.tree != tree)
        return "refused natively: it writes " + record::toString(path) + ", which is also " + h.where +
               "; a record file keeps each compiled function's state and each module's globals apart, so "
               "natively the write would not show there";
  }
  PyErr_Clear();
  return "";
}

}  // namespace magpy::capture

#include "capture/call_log.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "magpy/replay/state.h"
#include "magpy/support/hash.h"

namespace magpy::capture {
namespace {

// A container changed in place (list.append, dict item set, a hook
// registered) keeps its identity; its elements tell.
// Elements hashed by identity are added to `held`.
// A container's length and elements; an element that is state of its own
// (`tracked`: its path is logged apart, param_groups[0]['lr'] under
// param_groups[0]) counts by its key only, so that a change to it is
// logged where it is, not as a new container holding copies of the rest.
uint64_t shallowHash(PyObject* c, std::vector<PyRef>& held, const std::function<bool(const record::PathStep&)>& tracked) {
  Hasher h;
  auto element = [&](PyObject* e) {
    if (!e) {
      h.text("(tracked)");
    } else if (auto a = atomOf(e)) {
      h.text(record::toString(*a));
    } else {
      h.u64(reinterpret_cast<uintptr_t>(e));
      held.push_back(PyRef::borrow(e));
    }
  };
  if (PyDict_Check(c)) {
    forEachDictItem(c, [&](PyObject* k, PyObject* v) {
      element(k);
      auto key = dictKey(k);
      element(key && tracked(record::PathStep::keyed(*key)) ? nullptr : v);
    });
  } else {
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(c); ++i)
      element(tracked(record::PathStep::at(i)) ? nullptr : PySequence_Fast_GET_ITEM(c, i));
  }
  return h.u64(uint64_t(PyObject_Length(c))).digest();
}

// A tensor below its Python object: its memory, layout, contents and
// requires_grad (freezing a parameter changes what a backward does).
// `w.data = t` swaps the memory under w, and writes through `w.data` bump
// a version counter of their own, not w's: neither shows in w's version.
uint64_t tensorFingerprint(const at::Tensor& t) {
  Hasher h;
  h.u64(uint64_t(t.scalar_type())).u64(uint64_t(t.dim())).u64(t.requires_grad());
  for (int64_t d = 0; d < t.dim(); ++d) h.u64(uint64_t(t.size(d))).u64(uint64_t(t.stride(d)));
  if (!t.has_storage() || !t.is_cpu() || t.layout() != c10::kStrided) return h.digest();
  h.u64(reinterpret_cast<uintptr_t>(t.storage().data())).u64(uint64_t(t.storage_offset()));
  at::Tensor dense = t.is_contiguous() ? t : t.detach().contiguous();
  return h.u64(hashBytes(dense.data_ptr(), dense.nbytes())).digest();
}

}  // namespace

CallLog::CallLog(BlobPool& blobs)
    : blobs_(blobs), runtimeLogged_(replay::settableRuntimeStates().begin(), replay::settableRuntimeStates().end()) {}

// Module-rooted paths are shared: they belong to no unit (-1) and name
// their module explicitly.
CallLog::StateKey CallLog::stateKey(const Units& units, size_t u, record::AccessPath p) {
  if (p.root != record::AccessPath::Root::Global) return {int(u), p};
  if (p.name.empty()) p.name = units[u]->spec.homeModule;
  return {-1, p};
}

bool CallLog::Seen::alive() const {
  return std::all_of(weaklyHeld.begin(), weaklyHeld.end(),
                     [](const PyRef& r) { return PyWeakref_GetObject(r.get()) != Py_None; });
}

namespace {

// Holds `held` weakly where an object takes weak references: keeping one
// alive would change what the script's ref() of it returns once the
// program drops it (objects that take none cannot be a referent).
void holdWeakly(std::vector<PyRef>& held, std::vector<PyRef>& weakly) {
  auto strong = held.begin();
  for (PyRef& r : held) {
    PyObject* weak = PyType_SUPPORTS_WEAKREFS(Py_TYPE(r.get())) ? PyWeakref_NewRef(r.get(), nullptr) : nullptr;
    if (!weak) PyErr_Clear();
    if (weak) {
      weakly.push_back(PyRef::steal(weak));
      continue;
    }
    if (&*strong != &r) *strong = std::move(r);
    ++strong;
  }
  held.erase(strong, held.end());
}

}  // namespace

CallLog::Seen CallLog::observe(const PyRef& v, const record::AccessPath& path, const std::set<record::AccessPath>& tracked) {
  Seen s;
  if (!v) return s;
  s.exists = true;
  if (auto a = atomOf(v.get())) {
    s.atom = *a;
  } else if (PyMethod_Check(v.get())) {
    // Bound methods are made anew at each read: the same method when its
    // function and object are.
    s.object = PyMethod_GET_FUNCTION(v.get());
    s.contents = uint64_t(reinterpret_cast<uintptr_t>(PyMethod_GET_SELF(v.get())));
    s.held = {PyRef::borrow(s.object), PyRef::borrow(PyMethod_GET_SELF(v.get()))};
  } else if (PyCFunction_Check(v.get()) && PyCFunction_GET_SELF(v.get())) {
    // The same for a native method (autograd's Function.apply).
    s.object = PyCFunction_GET_SELF(v.get());
    s.contents = uint64_t(reinterpret_cast<uintptr_t>(reinterpret_cast<PyCFunctionObject*>(v.get())->m_ml));
    s.held = {PyRef::borrow(s.object), v};  // the method def lives as long as the function
  } else {
    s.object = v.get();
    s.held.push_back(v);
    if (isTensor(v.get())) {
      const at::Tensor& t = tensorOf(v.get());
      s.version = int64_t(t.unsafeGetTensorImpl()->version_counter().current_version());
      s.contents = tensorFingerprint(t);
    }
    auto isTracked = [&](const record::PathStep& step) {
      record::AccessPath child = path;
      child.steps.push_back(step);
      return tracked.count(child) > 0;
    };
    if (PyTuple_Check(v.get()) || PyList_Check(v.get()) || PyDict_Check(v.get()))
      s.contents = shallowHash(v.get(), s.held, isTracked);
  }
  holdWeakly(s.held, s.weaklyHeld);
  return s;
}

namespace {

// A placeholder no guard accepts, for a logged value that shares memory
// with state outside it: the record file would hold two tensors where the
// script has one, and replay would go on where the script's own tensor
// changed (native replay refuses the call instead).
record::Value keptApart(const std::string& what) {
  record::Value placeholder;
  placeholder.kind = record::Value::Kind::Opaque;
  placeholder.type = what + ", which a record file keeps apart";
  return placeholder;
}

record::Value memoryKeptApart(const std::string& with, bool tensor = true) {
  return keptApart(std::string(tensor ? "a tensor" : "a value holding a tensor") + " sharing memory with " + with);
}

// The state path, not under `except`, of a tensor sharing t's memory; "".
// With `same`, a path that holds t itself does not count: an update that
// refills t in place keeps it one tensor natively.
std::string sharedWith(const CallLog::StateMemory& memory, const at::Tensor& t, const record::AccessPath* except,
                       const void* same = nullptr) {
  if (!t.has_storage()) return "";
  auto [from, to] = memory.equal_range(t.storage().unsafeGetStorageImpl());
  for (auto it = from; it != to; ++it) {
    if (except && except->isPrefixOf(it->second.path)) continue;
    if (same && t.unsafeGetTensorImpl() == same && it->second.tensor == same) continue;
    return record::toString(it->second.path);
  }
  return "";
}

// A snapshot's content lookup that notes, in *alias, the first tensor it
// meets that shares memory with state outside `path` (but for `same`).
ContentLookup sharingWith(const CallLog::StateMemory& memory, const record::AccessPath& path, std::string& alias,
                          const void* same) {
  return [&memory, &path, &alias, same](const at::Tensor& t) -> const at::Tensor* {
    if (alias.empty()) alias = sharedWith(memory, t, &path, same);
    return nullptr;
  };
}

}  // namespace

// The steps' names and keys are made into Python objects once per tree.
struct CallLog::StateTree {
  size_t paths = 0;  // how many state paths the tree was made from (a unit only gains paths)
  replay::PathTree tree;
  std::vector<int> nodes;   // per state path, in Unit::statePaths' order
  std::vector<PyRef> keys;  // per tree node
};

CallLog::~CallLog() = default;

std::vector<PyRef> CallLog::stateValues(const Units& units, size_t u, bool globalsOnly) {
  const Unit& fn = *units[u];
  if (trees_.size() <= u) trees_.resize(u + 1);
  if (!trees_[u] || trees_[u]->paths != fn.statePaths.size()) {
    trees_[u] = std::make_unique<StateTree>();
    StateTree& t = *trees_[u];
    t.paths = fn.statePaths.size();
    for (auto& path : fn.statePaths) t.nodes.push_back(t.tree.add(path));
    t.keys.resize(t.tree.size());
    for (size_t i = 0; i < t.tree.size(); ++i)
      if (t.tree.node(int(i)).parent >= 0) t.keys[i] = LiveStore::keyOf(t.tree.node(int(i)));
  }
  const StateTree& t = *trees_[u];
  LiveRoots roots{fn.spec.self, nullptr, nullptr, fn.spec.homeModule};
  LiveStore store(roots, &t.keys);
  replay::Resolution<LiveStore> values(store, t.tree);
  std::vector<PyRef> out;
  out.reserve(t.nodes.size());
  size_t k = 0;
  for (auto& path : fn.statePaths) {
    int node = t.nodes[k++];
    out.push_back(!globalsOnly || path.root == record::AccessPath::Root::Global ? values.get(node) : PyRef());
  }
  PyErr_Clear();  // a path that leads nowhere is null
  return out;
}

CallLog::StateMemory CallLog::stateMemory(const Units& units, size_t compiled) {
  StateMemory out;
  for (size_t w = 0; w < compiled; ++w) {
    std::vector<PyRef> values = stateValues(units, w);
    size_t k = 0;
    for (auto& path : units[w]->statePaths) {
      const PyRef& v = values[k++];
      if (!v || !isTensor(v.get()) || !tensorOf(v.get()).has_storage()) continue;
      const at::Tensor& t = tensorOf(v.get());
      out.emplace(t.storage().unsafeGetStorageImpl(), StateTensor{t.unsafeGetTensorImpl(), stateKey(units, w, path).second});
    }
  }
  return out;
}

std::multimap<PyObject*, record::AccessPath> CallLog::stateObjects(const Units& units, size_t compiled) {
  std::multimap<PyObject*, record::AccessPath> out;
  for (size_t w = 0; w < compiled; ++w) {
    std::vector<PyRef> values = stateValues(units, w);
    size_t k = 0;
    for (auto& path : units[w]->statePaths) {
      const PyRef& v = values[k++];
      if (v && (PyList_Check(v.get()) || PyDict_Check(v.get()))) out.emplace(v.get(), stateKey(units, w, path).second);
    }
  }
  return out;
}

std::vector<record::StateUpdate> CallLog::changesBefore(const Units& units, size_t compiled, size_t u) {
  std::vector<record::StateUpdate> out;
  std::set<StateKey> seen;
  std::optional<StateMemory> memory;  // made on the first change
  std::optional<std::multimap<PyObject*, record::AccessPath>> objects;  // the same, for lists and dicts
  for (size_t w = 0; w < compiled; ++w) {
    const Unit& fn = *units[w];
    std::vector<PyRef> values = stateValues(units, w, w != u);
    size_t k = 0;
    for (auto& path : fn.statePaths) {
      const PyRef& v = values[k++];
      if (w != u && path.root != record::AccessPath::Root::Global) continue;
      auto key = stateKey(units, w, path);
      auto it = lastExit_.find(key);
      if (!seen.insert(key).second || it == lastExit_.end() || observe(v, path, fn.statePaths) == it->second)
        continue;
      record::StateUpdate upd;
      upd.function = key.first;
      upd.path = key.second;
      if (!v) {  // removed (del obj.x, del G[x]): native state follows, as guards of absence read it
        upd.how = record::StateUpdate::How::Remove;
        out.push_back(std::move(upd));
        continue;
      }
      PathTrie below;
      for (auto& other : fn.statePaths)
        if (path.isPrefixOf(other) && other.steps.size() > path.steps.size())
          below.insert(std::vector<record::PathStep>(other.steps.begin() + long(path.steps.size()), other.steps.end()));
      // A list, dict or tensor changed in place keeps its identity natively
      // too: other paths may name it (two layers sharing one table, tied
      // weights an optimizer steps).
      bool same = it->second.object == v.get();
      const void* tensor = same && isTensor(v.get()) ? tensorOf(v.get()).unsafeGetTensorImpl() : nullptr;
      if (!memory) memory = stateMemory(units, compiled);
      std::string alias;
      upd.value = snapshot(v.get(), below, blobs_, sharingWith(*memory, upd.path, alias, tensor));
      if (!alias.empty()) upd.value = memoryKeptApart(alias, isTensor(v.get()));
      if (!same && (PyList_Check(v.get()) || PyDict_Check(v.get()))) {
        // M[0] = L, L a list another path names: the logged copy would be
        // another object natively, so that call is refused there.
        if (!objects) objects = stateObjects(units, compiled);
        auto [from, to] = objects->equal_range(v.get());
        for (auto it = from; it != to; ++it)
          if (!(it->second == upd.path)) {
            upd.value = keptApart("the object at " + record::toString(it->second));
            break;
          }
      }
      using K = record::Value::Kind;
      if (same && (upd.value.kind == K::List || upd.value.kind == K::Dict || upd.value.kind == K::Tensor))
        upd.how = record::StateUpdate::How::Refill;
      out.push_back(std::move(upd));
    }
  }
  // A value replaced or refilled carries what lies below it (self.shape =
  // (4, 5) is one update, not also self.shape[0] = 4, which a tuple cannot
  // take; a list that shrank, not also the removal of its last index). A
  // tensor refilled in place keeps its .grad: an update of that follows.
  auto covered = [&](const record::StateUpdate& u) {
    return std::any_of(out.begin(), out.end(), [&](const record::StateUpdate& other) {
      bool carries = other.how == record::StateUpdate::How::Replace ||
                     (other.how == record::StateUpdate::How::Refill && other.value.kind != record::Value::Kind::Tensor);
      return &other != &u && carries && other.function == u.function && other.path.isPrefixOf(u.path) &&
             other.path.steps.size() < u.path.steps.size();
    });
  };
  std::vector<record::StateUpdate> kept;
  for (auto& u : out)
    if (!covered(u)) kept.push_back(u);
  out = std::move(kept);
  // Interpreter state is the process's, not a function's: logged when it
  // differs from what replay would have after the calls logged so far.
  for (auto& [name, logged] : runtimeLogged_) {
    auto now = replay::runtimeState(name);
    if (!now || *now == logged) continue;
    record::StateUpdate upd;
    upd.path = record::AccessPath::runtime(name);
    upd.value.atom = logged = *now;
    out.push_back(std::move(upd));
  }
  return out;
}

void CallLog::noteExit(const Units& units, size_t compiled, size_t u) {
  for (size_t w = 0; w < compiled; ++w) {
    std::vector<PyRef> values = stateValues(units, w, w != u);
    size_t k = 0;
    for (auto& path : units[w]->statePaths) {
      const PyRef& v = values[k++];
      if (w == u || path.root == record::AccessPath::Root::Global)
        lastExit_[stateKey(units, w, path)] = observe(v, path, units[w]->statePaths);
    }
  }
}

namespace {

// Finds distinct tensors among a call's arguments that share a storage,
// and those that share one with the state (f(model.weight)).
class SharedMemoryFinder {
 public:
  SharedMemoryFinder(std::vector<CallLog::SharedTensor>& out, const CallLog::StateMemory& state,
                     std::vector<CallLog::SharedTensor>& withState)
      : out_(out), state_(state), withState_(withState) {}

  void walk(PyObject* o, bool keyword, std::vector<record::PathStep>& steps, int depth = 0) {
    if (depth > 16) return;
    if (isTensor(o)) return see(tensorOf(o), keyword, steps);
    if (PyTuple_Check(o) || PyList_Check(o)) {
      for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); ++i) {
        steps.push_back(record::PathStep::at(i));
        walk(PySequence_Fast_GET_ITEM(o, i), keyword, steps, depth + 1);
        steps.pop_back();
      }
    } else if (PyDict_Check(o)) {
      forEachDictItem(o, [&](PyObject* k, PyObject* v) {
        auto key = dictKey(k);
        if (!key) return;
        steps.push_back(record::PathStep::keyed(*key));
        walk(v, keyword, steps, depth + 1);
        steps.pop_back();
      });
    }
  }

 private:
  void see(const at::Tensor& t, bool keyword, const std::vector<record::PathStep>& steps) {
    if (!t.has_storage()) return;
    if (std::string with = sharedWith(state_, t, nullptr); !with.empty()) return withState_.push_back({keyword, steps, with});
    record::AccessPath path = keyword ? record::AccessPath::allKwargs() : record::AccessPath::allArgs();
    path.steps = steps;
    auto [it, fresh] = first_.emplace(t.storage().unsafeGetStorageImpl(),
                                      std::make_pair(t.unsafeGetTensorImpl(), record::toString(path)));
    if (!fresh && it->second.first != t.unsafeGetTensorImpl()) out_.push_back({keyword, steps, it->second.second});
  }

  std::vector<CallLog::SharedTensor>& out_;
  const CallLog::StateMemory& state_;
  std::vector<CallLog::SharedTensor>& withState_;
  std::map<const void*, std::pair<const void*, std::string>> first_;
};

// The value at steps below root in a snapshot, or null.
record::Value* snapshotAt(record::Value& root, const std::vector<record::PathStep>& steps) {
  record::Value* v = &root;
  for (auto& step : steps) {
    record::Value* next = nullptr;
    if (step.kind == record::PathStep::Kind::Index && size_t(step.index) < v->items.size() &&
        (v->kind == record::Value::Kind::Tuple || v->kind == record::Value::Kind::List))
      next = &v->items[size_t(step.index)];
    for (size_t k = 0; step.kind == record::PathStep::Kind::Key && v->kind == record::Value::Kind::Dict &&
                       k < v->keys.size(); ++k)
      if (v->keys[k] == step.key) next = &v->items[k];
    if (!next) return nullptr;
    v = next;
  }
  return v;
}

}  // namespace

void CallLog::keepsApart(record::LoggedCall& call, const std::vector<SharedTensor>& shared) {
  for (auto& s : shared) {
    record::Value* v = snapshotAt(s.keyword ? call.kwargs : call.args, s.steps);
    if (!v || v->kind != record::Value::Kind::Tensor) continue;
    *v = memoryKeptApart(s.with);
  }
}

void CallLog::keepsStateIdentity(record::LoggedCall& call, const std::vector<record::Guard>& guards) {
  auto isArg = [](const record::AccessPath& p) {
    return (p.root == record::AccessPath::Root::Arg && p.index >= 0) || (p.root == record::AccessPath::Root::Kwarg && !p.name.empty());
  };
  for (auto& g : guards) {
    if (g.check.kind != record::Check::Kind::Alias || isArg(g.path) == isArg(g.check.path)) continue;
    const record::AccessPath& arg = isArg(g.path) ? g.path : g.check.path;
    const record::AccessPath& state = isArg(g.path) ? g.check.path : g.path;
    std::vector<record::PathStep> steps{arg.root == record::AccessPath::Root::Arg
                                            ? record::PathStep::at(arg.index)
                                            : record::PathStep::keyed(record::Atom::string(arg.name))};
    steps.insert(steps.end(), arg.steps.begin(), arg.steps.end());
    bool keyword = arg.root == record::AccessPath::Root::Kwarg;
    record::Value* v = snapshotAt(keyword ? call.kwargs : call.args, steps);
    if (v && v->kind == record::Value::Kind::Tensor) *v = memoryKeptApart(record::toString(state));
  }
}

record::Value CallLog::snapshotArgs(const Unit& fn, PyObject* args, PyObject* kwargs, record::Value* kwOut,
                                    const StateMemory& stateMemory) {
  std::map<size_t, PathTrie> argPaths;
  std::map<std::string, PathTrie> kwPaths;
  for (auto& e : fn.entries) {  // every record's reads: a call may go to any
    for (auto& [i, t] : e.args) argPaths[i].insertTrie(t);
    for (auto& [k, t] : e.kwargs) kwPaths[k].insertTrie(t);
  }
  // One tree for the arguments, so that f(x, x) keeps its aliasing.
  PathTrie argTrie;
  for (auto& [i, t] : argPaths) argTrie.children[record::PathStep::at(int64_t(i))] = t;
  record::Value a = snapshot(args, argTrie, blobs_);
  a.type.clear();
  *kwOut = record::Value();
  kwOut->kind = record::Value::Kind::Dict;
  if (kwargs) {
    PathTrie kwTrie;
    for (auto& [k, t] : kwPaths) kwTrie.children[record::PathStep::keyed(record::Atom::string(k))] = t;
    *kwOut = snapshot(kwargs, kwTrie, blobs_);
  }
  shared_.clear();
  std::vector<SharedTensor> withState;
  SharedMemoryFinder finder(shared_, stateMemory, withState);
  std::vector<record::PathStep> steps;
  finder.walk(args, false, steps);
  if (kwargs) finder.walk(kwargs, true, steps);
  for (auto& w : withState)
    if (record::Value* v = snapshotAt(w.keyword ? *kwOut : a, w.steps); v && v->kind == record::Value::Kind::Tensor)
      *v = memoryKeptApart(w.with);
  return a;
}

}  // namespace magpy::capture

#include "capture/refgraph.h"

#include <algorithm>
#include <deque>
#include <unordered_set>

#include "capture/pyobjects.h"
#include "magpy/support/error.h"

namespace magpy::capture {

std::string toString(const Relation& r) {
  switch (r.kind) {
    case Relation::Kind::Self: return "self";
    case Relation::Kind::Arg: return "args[" + std::to_string(r.index) + "]";
    case Relation::Kind::Kwarg: return "kwargs[" + record::toString(record::Atom::string(r.name)) + "]";
    case Relation::Kind::Module: return "G(" + r.name + ")";
    case Relation::Kind::Attr: return "." + r.name;
    case Relation::Kind::Index: return "[" + std::to_string(r.index) + "]";
    case Relation::Kind::Key: return "[" + record::toString(r.key) + "]";
    case Relation::Kind::KeyOf: return "[@node " + std::to_string(r.index) + "]";
  }
  return "?";
}

record::AccessPath extend(const record::AccessPath& base, const Relation& r, const std::string& homeModule,
                          const record::AccessPath* keyPath) {
  switch (r.kind) {
    case Relation::Kind::Self: return record::AccessPath::self();
    case Relation::Kind::Arg: return record::AccessPath::arg(r.index);
    case Relation::Kind::Kwarg: return record::AccessPath::kwarg(r.name);
    case Relation::Kind::Module: {
      record::AccessPath p;
      p.root = record::AccessPath::Root::Global;
      p.name = r.name == homeModule ? "" : r.name;
      return p;
    }
    case Relation::Kind::Attr:
      // A module's attributes are its globals: G(m)['x'], not G(m).x.
      if (base.root == record::AccessPath::Root::Global && base.steps.empty()) return base.key(r.name);
      return base.attr(r.name);
    case Relation::Kind::Index: return base.item(r.index);
    case Relation::Kind::Key: return base.key(r.key);
    case Relation::Kind::KeyOf:
      if (!keyPath) throw Error("a dict key is an object the call's state holds nowhere else, which no path can name");
      return base.keyedBy(*keyPath);
  }
  return base;
}

NodeId ShadowNode::refOf(const Relation& r, size_t version) const {
  for (auto& e : versions[version].refs)
    if (e.rel == r) return e.target;
  return kNoNode;
}

RefGraph::RefGraph() {
  add(NodeKind::Object, nullptr);  // node 0: the external state
  nodes_[0].external = true;
}

RefGraph::~RefGraph() {
  for (auto& n : nodes_) Py_XDECREF(n.obj);
}

NodeKind RefGraph::classify(PyObject* o) {
  if (capture::isAtom(o)) return NodeKind::Atom;
  if (isTensor(o)) return NodeKind::Tensor;
  if (PyTuple_Check(o)) return NodeKind::Tuple;
  if (PyList_Check(o)) return NodeKind::List;
  if (PyDict_Check(o)) {
    // Dicts with keys access paths cannot name (objects other than
    // tensors) stay opaque; one that gains such a key later is marked
    // `unsupported`.
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(o, &pos, &k, &v))
      if (!dictKey(k) && !identityKey(k)) return NodeKind::Object;
    return NodeKind::Dict;
  }
  if (PyModule_Check(o)) return NodeKind::Module;
  if (PyFunction_Check(o) || PyCFunction_Check(o) || PyType_Check(o) ||
      Py_TYPE(o) == &PyMethodDescr_Type || Py_TYPE(o) == &PyWrapperDescr_Type ||
      Py_TYPE(o) == &PyClassMethodDescr_Type)
    return NodeKind::Function;
  return NodeKind::Object;
}

bool RefGraph::isAtom(PyObject* o) { return capture::isAtom(o); }

bool RefGraph::registeredModule(PyObject* m) {
  const char* name = PyModule_GetName(m);
  PyObject* nameObject = name ? PyModule_GetNameObject(m) : nullptr;
  PyObject* registered = nameObject ? PyImport_GetModule(nameObject) : nullptr;
  Py_XDECREF(nameObject);
  Py_XDECREF(registered);  // compared by address only
  if (!registered) PyErr_Clear();
  return name && registered == m;
}

bool RefGraph::keyedByObjects(NodeId id) const {
  for (auto& v : node(id).versions)
    for (auto& e : v.refs)
      if (e.rel.kind == Relation::Kind::KeyOf) return true;
  return false;
}

std::optional<Relation> RefGraph::dictRelation(PyObject* key) {
  if (auto k = dictKey(key)) return Relation::keyed(*k);
  if (identityKey(key)) return Relation::keyOf(nodeFor(key));
  return std::nullopt;
}

NodeId RefGraph::add(NodeKind kind, PyObject* obj) {
  ShadowNode n;
  n.id = NodeId(nodes_.size());
  n.kind = kind;
  n.obj = obj;
  Py_XINCREF(obj);
  if (kind == NodeKind::Atom) n.atom = *atomOf(obj);
  nodes_.push_back(std::move(n));
  NodeId id = nodes_.back().id;
  if (obj && kind != NodeKind::Atom) byObject_[obj] = id;
  if (kind == NodeKind::Tuple || kind == NodeKind::List || kind == NodeKind::Dict) usableContainers_.push_back(id);
  if (kind == NodeKind::Tensor && onTensor_) onTensor_(id);
  return id;
}

Py_ssize_t RefGraph::unusableRefs(PyObject* obj) const {
  if (find(obj) == kNoNode) return 0;
  auto dropped = heldByDropped_.find(obj);
  return 1 + (dropped == heldByDropped_.end() ? 0 : dropped->second);
}

// Newest first: a container held by a newer dropped one (a tuple in
// *args) is found in the same pass. The state's containers (external)
// are left out for good: checking them before every operator would cost
// more than what the program rarely drops of its state.
void RefGraph::settle() {
  for (size_t i = usableContainers_.size(); i-- > 0;) {
    const ShadowNode& n = nodes_[size_t(usableContainers_[i])];
    if (n.external) {
      usableContainers_.erase(usableContainers_.begin() + long(i));
      continue;
    }
    PyObject* c = n.obj;
    auto dropped = Py_REFCNT(c) == 1 ? heldByDropped_.end() : heldByDropped_.find(c);
    if (Py_REFCNT(c) != 1 && (dropped == heldByDropped_.end() || Py_REFCNT(c) != 1 + dropped->second)) continue;
    if (hasWeakReferences(c)) continue;  // a weak reference could hand it back
    auto drop = [this](PyObject* element) { ++heldByDropped_[element]; };
    if (PyDict_Check(c)) {
      forEachDictItem(c, [&](PyObject* k, PyObject* v) { drop(k), drop(v); });
    } else {
      for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(c); ++k) drop(PySequence_Fast_GET_ITEM(c, k));
    }
    PyObject_GC_UnTrack(c);
    usableContainers_.erase(usableContainers_.begin() + long(i));
  }
}

void RefGraph::releaseUnreached() {
  std::vector<bool> reached(nodes_.size());
  std::vector<NodeId> pending{kExternal};
  for (auto& [id, rels] : lazyRoots_) pending.push_back(id);  // arguments not used yet
  for (NodeId id : pending) reached[size_t(id)] = true;
  auto reach = [&](NodeId id) {
    if (reached[size_t(id)]) return;
    reached[size_t(id)] = true;
    pending.push_back(id);
  };
  while (!pending.empty()) {
    NodeId id = pending.back();
    pending.pop_back();
    for (auto& version : nodes_[size_t(id)].versions)
      for (auto& e : version.refs) {
        reach(e.target);
        if (e.rel.kind == Relation::Kind::KeyOf) reach(NodeId(e.rel.index));
      }
  }
  usableContainers_.clear();
  heldByDropped_.clear();
  for (auto& n : nodes_) {
    if (reached[size_t(n.id)] || !n.obj) continue;
    if (n.kind != NodeKind::Atom) byObject_.erase(n.obj);
    Py_CLEAR(n.obj);  // may free it, and what it held: nothing here refers to those any more
  }
}

NodeId RefGraph::find(PyObject* obj) const {
  auto it = byObject_.find(obj);
  return it == byObject_.end() ? kNoNode : it->second;
}

NodeId RefGraph::nodeFor(PyObject* obj) {
  NodeKind kind = classify(obj);
  if (kind == NodeKind::Atom) {
    if (!atomOf(obj)) kind = NodeKind::Object;  // an int beyond int64: treat as an object
    else return add(kind, obj);
  }
  if (NodeId id = find(obj); id != kNoNode) return id;
  NodeId id = add(kind, obj);
  if (kind == NodeKind::Module) {
    // A module is global state: reachable from node 0 by its name, so that
    // its attributes are named G(module)['x'] however it was reached. Only
    // a module sys.modules holds under that name can be found by it (one
    // made by types.ModuleType is an object like any other).
    if (registeredModule(obj)) {
      const char* name = PyModule_GetName(obj);
      for (auto& v : nodes_[0].versions) v.refs.push_back({Relation::module(name), id});
      node(id).external = true;
    }
  }
  observeElements(id);
  return id;
}

void RefGraph::observeElements(NodeId id) {
  PyObject* o = node(id).obj;
  NodeKind kind = node(id).kind;
  std::vector<Edge> refs;
  auto previous = [&](const Relation& r) { return node(id).refOf(r, node(id).versions.size() - 1); };
  // An element that is the same value as before keeps its node (and so its
  // provenance); a new value gets a node of its own.
  auto element = [&](const Relation& r, PyObject* value) {
    NodeId old = previous(r);
    if (old != kNoNode) {
      const ShadowNode& n = node(old);
      if (n.kind == NodeKind::Atom ? (atomOf(value) && *atomOf(value) == n.atom && classify(value) == NodeKind::Atom)
                                   : n.obj == value)
        return old;
    }
    return nodeFor(value);
  };
  if (kind == NodeKind::Tuple || kind == NodeKind::List) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    for (Py_ssize_t i = 0; i < n; ++i) {
      Relation r = Relation::at(i);
      refs.push_back({r, element(r, PySequence_Fast_GET_ITEM(o, i))});
    }
  } else if (kind == NodeKind::Dict) {
    forEachDictItem(o, [&](PyObject* k, PyObject* v) {
      auto r = dictRelation(k);
      if (!r) {
        node(id).unsupported = std::string("a dict with a key of type ") + Py_TYPE(k)->tp_name;
        return;
      }
      refs.push_back({*r, element(*r, v)});
    });
  } else {
    return;
  }
  node(id).versions.back().refs = std::move(refs);
}

NodeId RefGraph::read(NodeId source, const Relation& rel, PyObject* target) {
  use(source);
  ShadowNode& s = node(source);
  if (s.kind == NodeKind::List && rel.kind == Relation::Kind::Index) s.contentsRead = true;
  NodeId existing = s.refOf(rel, s.versions.size() - 1);
  if (existing != kNoNode) {
    const ShadowNode& t = node(existing);
    bool same = t.kind == NodeKind::Atom ? (classify(target) == NodeKind::Atom && *atomOf(target) == t.atom)
                                         : t.obj == target;
    if (same) return existing;
  }
  NodeId t = nodeFor(target);
  ShadowNode& src = node(source);  // nodeFor may have grown the node table
  if (existing == kNoNode) {
    if (src.external || source == kExternal) markExternal(t);
    // The reference was there from the start: reading it is a read of the
    // state the call began with.
    for (auto& v : src.versions)
      if (v.refs.end() == std::find_if(v.refs.begin(), v.refs.end(), [&](const Edge& e) { return e.rel == rel; }))
        v.refs.push_back({rel, t});
  } else {
    // The value changed behind our back (computed attribute, native code):
    // it says nothing about the entry state.
    for (auto& e : src.versions.back().refs)
      if (e.rel == rel) e.target = t;
  }
  return t;
}

// Everything reachable from the entry state through version-0 edges was
// part of it.
void RefGraph::markExternal(NodeId id) {
  if (node(id).external) return;
  node(id).external = true;
  for (auto& e : std::vector<Edge>(node(id).versions.front().refs)) markExternal(e.target);
}

void RefGraph::addLazyRoot(NodeId id, const Relation& rel) { lazyRoots_[id].push_back(rel); }

void RefGraph::activate(NodeId id) {
  auto it = lazyRoots_.find(id);
  if (it == lazyRoots_.end()) return;
  std::vector<Relation> rels = std::move(it->second);
  lazyRoots_.erase(it);
  for (auto& rel : rels)
    for (auto& v : nodes_[0].versions) v.refs.push_back({rel, id});
  markExternal(id);
}

void RefGraph::write(NodeId source, const Relation& rel, NodeId target) {
  if (onWrite_) onWrite_(source);
  ShadowNode& s = node(source);
  ShadowVersion v = s.versions.back();
  v.graphValue = -1;
  bool replaced = false;
  for (auto& e : v.refs)
    if (e.rel == rel) {
      e.target = target;
      replaced = true;
    }
  if (!replaced) v.refs.push_back({rel, target});
  s.versions.push_back(std::move(v));
}

void RefGraph::remove(NodeId source, const Relation& rel) {
  if (onWrite_) onWrite_(source);
  ShadowNode& s = node(source);
  ShadowVersion v = s.versions.back();
  v.refs.erase(std::remove_if(v.refs.begin(), v.refs.end(), [&](const Edge& e) { return e.rel == rel; }), v.refs.end());
  s.versions.push_back(std::move(v));
}

void RefGraph::changedInPlace(NodeId id) {
  if (onWrite_) onWrite_(id);
  ShadowNode& s = node(id);
  s.versions.push_back(s.versions.back());
  s.versions.back().graphValue = -1;
  observeElements(id);
}

void RefGraph::appended(NodeId list, NodeId value, PyObject* valueObj) {
  ShadowNode& l = node(list);
  if (l.kind != NodeKind::List || !l.obj || l.last().refs.empty() || node(value).kind != NodeKind::Atom) return;
  Py_ssize_t n = PyList_GET_SIZE(l.obj);
  Edge& last = l.versions.back().refs.back();
  if (n > 0 && PyList_GET_ITEM(l.obj, n - 1) == valueObj && last.rel == Relation::at(n - 1) &&
      node(last.target).kind == NodeKind::Atom)
    last.target = value;
}

void RefGraph::readContents(NodeId id) {
  auto container = [&](NodeId n) {
    NodeKind k = n >= 0 ? node(n).kind : NodeKind::Atom;
    return k == NodeKind::List || k == NodeKind::Tuple || k == NodeKind::Dict;
  };
  if (!container(id)) return;  // most inputs: no walk, nothing allocated
  std::vector<NodeId> stack{id};
  std::unordered_set<NodeId> seen;
  while (!stack.empty()) {
    NodeId at = stack.back();
    stack.pop_back();
    if (!seen.insert(at).second) continue;
    ShadowNode& n = node(at);
    if (n.kind == NodeKind::List) n.contentsRead = true;
    for (auto& e : n.last().refs)
      if (container(e.target)) stack.push_back(e.target);
  }
}

bool RefGraph::onlyExtended(NodeId id) const {
  const ShadowNode& n = node(id);
  if (n.kind != NodeKind::List || n.contentsRead || !n.external || n.versions.size() < 2) return false;
  const auto &before = n.versions.front().refs, &after = n.last().refs;
  if (after.size() <= before.size()) return false;
  for (size_t i = 0; i < before.size(); ++i)
    if (!(after[i].rel == before[i].rel) || after[i].target != before[i].target) return false;
  return true;
}

void RefGraph::search(const std::function<void(NodeId, const Edge&, bool)>& visit) const {
  std::vector<bool> seen(nodes_.size(), false);
  seen[size_t(kExternal)] = true;
  std::deque<NodeId> queue{kExternal};
  std::vector<std::pair<NodeId, const Edge*>> waiting;  // keyed by objects not reached yet
  auto reach = [&](NodeId from, const Edge& e) {
    bool first = !seen[size_t(e.target)];
    seen[size_t(e.target)] = true;
    if (first) queue.push_back(e.target);
    visit(from, e, first);
  };
  while (!queue.empty()) {
    while (!queue.empty()) {
      NodeId cur = queue.front();
      queue.pop_front();
      if (onlyExtended(cur)) continue;  // what it held at entry is not read
      for (auto& e : node(cur).versions.front().refs) {
        if (e.rel.kind == Relation::Kind::KeyOf && !seen[size_t(e.rel.index)]) waiting.push_back({cur, &e});
        else reach(cur, e);
      }
    }
    // Edges whose keys are reached now, in the order they were met.
    std::vector<std::pair<NodeId, const Edge*>> still;
    for (auto& [from, e] : waiting) {
      if (seen[size_t(e->rel.index)]) reach(from, *e);
      else still.push_back({from, e});
    }
    waiting = std::move(still);
  }
}

}  // namespace magpy::capture

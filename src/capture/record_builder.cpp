#include "capture/record_builder.h"

#include <cmath>
#include <deque>
#include <map>
#include <optional>
#include <set>

#include "magpy/record/graph_utils.h"
#include "magpy/replay/passes.h"
#include "magpy/replay/tensors.h"
#include "magpy/support/error.h"

namespace magpy::capture {
namespace {

using record::AccessPath;

// torch.fx names parameters by their dotted path under the root module
// ("blocks.0.weight"); the dicts nn.Module keeps them in (record/path.h)
// are not part of that name. Other state is named by its access path.
std::string fxTarget(const AccessPath& p) {
  using Kind = record::PathStep::Kind;
  auto moduleDict = [&](size_t k) {
    return k + 1 < p.steps.size() && p.steps[k].kind == Kind::Attr && p.steps[k + 1].kind == Kind::Key &&
           record::isModuleDict(p.steps[k].name);
  };
  std::string dotted;
  bool plain = p.root == AccessPath::Root::Self;
  for (size_t k = 0; k < p.steps.size(); ++k) {
    const record::PathStep& s = p.steps[k];
    if (moduleDict(k)) continue;
    if (s.kind == Kind::Index || s.kind == Kind::ObjectKey || (s.kind == Kind::Key && !(k > 0 && moduleDict(k - 1))))
      plain = false;
    std::string part = s.kind == Kind::Attr                    ? s.name
                       : s.kind == Kind::Index                 ? std::to_string(s.index)
                       : s.key.kind == record::Atom::Kind::Str ? s.key.s
                                                               : record::toString(s.key);
    dotted += (dotted.empty() ? "" : ".") + part;
  }
  return plain ? dotted : record::toString(p);
}

struct Paths {
  std::vector<NodeId> order;               // BFS order over version-0 edges
  std::map<NodeId, AccessPath> first;      // the first path that reaches each node
  std::vector<std::pair<AccessPath, NodeId>> aliases;  // other paths to identity-keyed nodes
  // Other paths to a module or function (`backend = math`; `act = F.relu`):
  // each path must lead to it, so each gets the identity guard.
  std::vector<std::pair<AccessPath, NodeId>> namedAgain;
  // A dict of the state keyed by an object that no other path reaches:
  // no path names its element, so no record can hold it.
  std::string unnamedKey;

  // The path of a KeyOf relation's key, or null (other relations, or a
  // key the state does not hold).
  const AccessPath* keyPath(const Relation& r) const {
    if (r.kind != Relation::Kind::KeyOf) return nullptr;
    auto it = first.find(NodeId(r.index));
    return it == first.end() ? nullptr : &it->second;
  }
};

// Algorithm 1's search over version 0, keeping the access path of each node.
Paths entryPaths(const RefGraph& g, const std::string& home) {
  Paths p;
  p.first[kExternal] = AccessPath::self();
  g.search([&](NodeId from, const Edge& e, bool firstVisit) {
    NodeKind k = g.node(e.target).kind;
    if (!firstVisit && k == NodeKind::Atom) return;
    AccessPath path = extend(p.first[from], e.rel, home, p.keyPath(e.rel));
    if (firstVisit) {
      p.first.insert_or_assign(e.target, std::move(path));
      p.order.push_back(e.target);
      return;
    }
    if (path == p.first[e.target]) return;
    if (k == NodeKind::Module || k == NodeKind::Function) p.namedAgain.push_back({std::move(path), e.target});
    else p.aliases.push_back({std::move(path), e.target});
  });
  for (NodeId id : p.order)
    for (auto& e : g.node(id).versions.front().refs)
      if (e.rel.kind == Relation::Kind::KeyOf && !p.keyPath(e.rel) && p.unnamedKey.empty())
        p.unnamedKey = record::toString(p.first[id]) + " is a dict keyed by a tensor that no other path of the state reaches";
  return p;
}

bool isArgPath(const AccessPath& p) {
  return p.root == AccessPath::Root::Arg || p.root == AccessPath::Root::Kwarg;
}

// What the parts of building a record share: the monitored run, the
// paths of its entry state, and the record being built.
struct BuildState {
  Monitor& m;
  RefGraph& g;
  const CallSpec& call;
  Paths entry;
  BuiltRecord out;
  std::optional<bool> stopsCleanly;

  // Whether a call of the graph may stop half-way without having changed
  // anything (replay::stopsCleanly), computed once per record.
  bool graphStopsCleanly() {
    if (!stopsCleanly) stopsCleanly = replay::stopsCleanly(m.ops().graph());
    return *stopsCleanly;
  }
};

// The guards of a record: the call's shape, each value of the entry state
// by its kind, then the relations between paths.
class GuardMaker {
 public:
  explicit GuardMaker(BuildState& s) : s_(s) {}

  void guards() {
    callShapeGuards();
    // Arguments first: they change most often, so a miss is found early.
    std::vector<NodeId> order;
    for (NodeId id : s_.entry.order)
      if (isArgPath(s_.entry.first[id])) order.push_back(id);
    for (NodeId id : s_.entry.order)
      if (!isArgPath(s_.entry.first[id])) order.push_back(id);
    for (NodeId id : order) nodeGuards(id);
    relationGuards();
  }

 private:
  void addGuard(AccessPath path, record::Check check, PyObject* expected = nullptr) {
    s_.out.record.guards.push_back({std::move(path), std::move(check)});
    s_.out.expected.push_back(PyRef::borrow(expected));
  }

  // A module or function, named as other processes can check it.
  static record::Check identity(const ShadowNode& n) {
    record::Check c;
    c.kind = record::Check::Kind::Identity;
    if (n.kind == NodeKind::Module) {
      c.s = std::string("module ") + PyModule_GetName(n.obj);
    } else {
      c.s = qualifiedName(n.obj);
      c.i = codeHash(n.obj);
    }
    return c;
  }

  // The call's shape: how many positional arguments, which keywords.
  // Parameters not passed take defaults the run may have relied on.
  void callShapeGuards() {
    using K = record::Check::Kind;
    record::Check count;
    count.kind = K::Length;
    count.i = s_.call.args ? PyTuple_GET_SIZE(s_.call.args) : 0;
    addGuard(AccessPath::allArgs(), std::move(count));
    record::Check keys;
    keys.kind = K::DictKeys;
    if (s_.call.kwargs) {
      PyObject *k, *v;
      Py_ssize_t pos = 0;
      while (PyDict_Next(s_.call.kwargs, &pos, &k, &v)) keys.keys.push_back(*atomOf(k));
    }
    addGuard(AccessPath::allKwargs(), std::move(keys));
  }

  // Whether a call may take the number at any value: the graph stops
  // nowhere after an effect, or the number only scales values (a learning
  // rate: no size or check depends on it).
  bool stopsWhereverItsValue(NodeId id) {
    if (s_.graphStopsCleanly()) return true;
    int node = s_.m.liftedNumber(id);
    return node >= 0 && replay::onlyScalesValues(s_.m.ops().graph(), node);
  }

  void keptBecause(NodeId id, const AccessPath& path) {
    std::string why = s_.m.numberUse(id);
    if (why.empty())
      why = "a size, check or region depends on it after the call writes its inputs in place or draws random numbers, "
            "so a call with another value could stop half-way";
    std::string& all = s_.out.numberUse;
    all += (all.empty() ? "" : "; ") + record::toString(path) + ": " + why;
  }

  // What a value of the entry state must be, by the kind of its node.
  void nodeGuards(NodeId id) {
    using K = record::Check::Kind;
    const ShadowNode& n = s_.g.node(id);
    const AccessPath& path = s_.entry.first[id];
    record::Check c;
    switch (n.kind) {
      case NodeKind::Atom:
        if (s_.call.varyingNumbers.count(path) && s_.m.numberFree(id) && stopsWhereverItsValue(id)) {
          // A lifted number whose value the run did not depend on (MagPy 6.2.1):
          // any value of its type will do. A run that can stop half-way (a
          // size check failing after an in-place write) keeps the value.
          bool isInt = n.atom.kind == record::Atom::Kind::Int;
          c = record::numberCheck(isInt ? record::NumberType::Int : record::NumberType::Float);
          addGuard(path, std::move(c), reinterpret_cast<PyObject*>(isInt ? &PyLong_Type : &PyFloat_Type));
          break;
        }
        if (s_.call.varyingNumbers.count(path)) keptBecause(id, path);
        c.kind = K::Equals;
        c.atom = n.atom;
        addGuard(path, std::move(c));
        break;
      case NodeKind::Tensor:
        c.kind = K::Tensor;
        c.meta = s_.m.entryMeta(id) ? *s_.m.entryMeta(id) : replay::metaOf(tensorOf(n.obj));
        addGuard(path, std::move(c));
        if (!plainTensorType(Py_TYPE(n.obj))) {
          // A tensor subclass (its __torch_function__ runs Python code):
          // a plain tensor in its place must not take this record, nor
          // it a plain tensor's.
          record::Check type;
          type.kind = K::Type;
          type.s = typeName(Py_TYPE(n.obj));
          addGuard(path, std::move(type), reinterpret_cast<PyObject*>(Py_TYPE(n.obj)));
        }
        break;
      case NodeKind::Tuple:
      case NodeKind::List:
      case NodeKind::Dict: {
        c.kind = K::Type;
        c.s = typeName(Py_TYPE(n.obj));
        addGuard(path, std::move(c), reinterpret_cast<PyObject*>(Py_TYPE(n.obj)));
        if (s_.g.onlyExtended(id)) break;  // what it held at entry is not read
        record::Check len;
        std::vector<const Edge*> entries;  // not a defaultdict's .default_factory
        for (auto& e : n.versions.front().refs)
          if (e.rel.kind != Relation::Kind::Attr) entries.push_back(&e);
        bool keyedByObjects = std::any_of(entries.begin(), entries.end(),
                                          [](const Edge* e) { return e->rel.kind == Relation::Kind::KeyOf; });
        if (n.kind == NodeKind::Dict && !keyedByObjects) {
          if (!n.unsupported.empty()) break;  // a break record: its keys are not all known
          len.kind = K::DictKeys;
          for (auto* e : entries) len.keys.push_back(e->rel.key);
        } else {
          // Keys that are objects: as many, each present (its element's
          // guards resolve it), none absent that the run relied on.
          len.kind = K::Length;
          len.i = int64_t(entries.size());
        }
        addGuard(path, std::move(len));
        break;
      }
      case NodeKind::Module:
        if (path.steps.empty()) break;  // G(m) itself: a module does not change identity
        addGuard(path, identity(n), n.obj);
        break;
      case NodeKind::Function:
        addGuard(path, identity(n), n.obj);
        break;
      case NodeKind::Object: {
        // An enum member is a singleton: identity says all. A value of a
        // class derived from int, float or str is used as a value: its
        // type alone says nothing.
        if (std::string member = enumMemberName(n.obj); !member.empty()) {
          c.kind = K::Identity;
          c.s = member;
          addGuard(path, std::move(c), n.obj);
          break;
        }
        c.kind = K::Type;
        c.s = typeName(Py_TYPE(n.obj));
        addGuard(path, std::move(c), reinterpret_cast<PyObject*>(Py_TYPE(n.obj)));
        if (auto atom = baseValueOf(n.obj)) {
          record::Check value;
          value.kind = K::Equals;
          value.atom = *atom;
          addGuard(path, std::move(value));
        }
        break;
      }
    }
  }

  // Two objects of one type the run found apart, one of which it wrote: a
  // call that passes one object for both (f(l, l)) would see its own
  // write where the record read the other's value.
  void distinctGuards() {
    std::map<PyTypeObject*, std::vector<NodeId>> byType;
    for (NodeId id : s_.entry.order) {
      const ShadowNode& n = s_.g.node(id);
      bool mutableKind = n.kind == NodeKind::List || n.kind == NodeKind::Dict || n.kind == NodeKind::Object;
      if (n.obj && mutableKind) byType[Py_TYPE(n.obj)].push_back(id);
    }
    auto written = [&](NodeId id) { return s_.g.node(id).versions.size() > 1; };
    for (auto& [type, ids] : byType)
      for (size_t b = 1; b < ids.size(); ++b)
        for (size_t a = 0; a < b; ++a) {
          if (!written(ids[a]) && !written(ids[b])) continue;
          record::Check c;
          c.kind = record::Check::Kind::Distinct;
          c.path = s_.entry.first[ids[a]];
          addGuard(s_.entry.first[ids[b]], std::move(c));
        }
  }

  // Paths related to others or to nothing: second names of modules and
  // functions, aliases, absences, and interpreter state read.
  void relationGuards() {
    using K = record::Check::Kind;
    // (x.__class__ needs none: x's own type guard checks it.)
    for (auto& [path, id] : s_.entry.namedAgain)
      if (!path.steps.empty() && !(path.steps.back().kind == record::PathStep::Kind::Attr &&
                                   path.steps.back().name == "__class__"))
        addGuard(path, identity(s_.g.node(id)), s_.g.node(id).obj);
    for (auto& [path, id] : s_.entry.aliases) {
      record::Check c;
      c.kind = K::Alias;
      c.path = s_.entry.first[id];
      addGuard(path, std::move(c));
    }
    distinctGuards();
    std::set<std::string> seen;
    for (auto& [id, rel] : s_.m.absences()) {
      if (!s_.entry.first.count(id) || s_.g.node(id).refOf(rel, 0) != kNoNode) continue;
      // A key the call made cannot have been in the dict at entry.
      if (rel.kind == Relation::Kind::KeyOf && !s_.entry.keyPath(rel)) continue;
      AccessPath path = extend(s_.entry.first[id], rel, s_.call.homeModule, s_.entry.keyPath(rel));
      if (!seen.insert(record::toString(path)).second) continue;
      record::Check c;
      c.kind = K::Absent;
      addGuard(std::move(path), std::move(c));
    }
    for (auto& [id, name] : s_.m.classMethods()) {
      if (!s_.entry.first.count(id)) continue;
      AccessPath path = s_.entry.first[id].attr("__dict__").key(name);
      if (!seen.insert(record::toString(path)).second) continue;
      record::Check c;
      c.kind = K::Absent;
      addGuard(std::move(path), std::move(c));
    }
    for (auto& [name, value] : s_.m.runtimeReads()) {
      record::Check c;
      c.kind = K::Equals;
      c.atom = value;
      addGuard(AccessPath::runtime(name), std::move(c));
    }
  }

  BuildState& s_;
};

// What the record was built from, for pictures (RefGraphView).
class RefGraphViewMaker {
 public:
  explicit RefGraphViewMaker(BuildState& s) : s_(s) {}

  // What the record was built from, for pictures: every node reachable
  // from node 0 through any version, then what the call returns.
  void make() {
    using View = record::RefGraphView;
    View& view = s_.out.record.refs;
    std::map<NodeId, uint32_t> index;
    std::vector<NodeId> order;
    auto reach = [&](NodeId from) {
      if (from == kNoNode || index.count(from)) return;
      std::deque<NodeId> queue{from};
      index[from] = uint32_t(order.size());
      order.push_back(from);
      while (!queue.empty()) {
        NodeId id = queue.front();
        queue.pop_front();
        for (auto& version : s_.g.node(id).versions)
          for (auto& e : version.refs)
            if (!index.count(e.target)) {
              index[e.target] = uint32_t(order.size());
              order.push_back(e.target);
              queue.push_back(e.target);
            }
      }
    };
    reach(kExternal);
    size_t inState = order.size();  // reachable from the state: at entry, or stored into it
    reach(s_.out.record.breaks.empty() ? s_.m.resultNode() : kNoNode);
    for (size_t at = 0; at < order.size(); ++at) {
      NodeId id = order[at];
      const ShadowNode& n = s_.g.node(id);
      bool atEntry = id != kExternal && s_.entry.first.count(id);
      uint8_t roles = atEntry ? View::kGuarded : 0;
      if (id != kExternal && (n.versions.size() > 1 || (at < inState && !atEntry))) roles |= View::kWritten;
      view.nodes.push_back({label(id), uint32_t(n.versions.size()), roles});
      for (size_t v = 0; v < n.versions.size(); ++v)
        for (auto& e : n.versions[v].refs)
          if (v == 0 || n.refOf(e.rel, v - 1) != e.target)
            view.edges.push_back({uint32_t(at), index[e.target], uint32_t(v), toString(e.rel)});
    }
    // The result's subtree, as the run left it.
    std::vector<NodeId> stack;
    if (s_.out.record.breaks.empty() && s_.m.resultNode() != kNoNode) stack.push_back(s_.m.resultNode());
    std::set<NodeId> seen;
    while (!stack.empty()) {
      NodeId id = stack.back();
      stack.pop_back();
      if (!seen.insert(id).second) continue;
      view.nodes[index[id]].roles |= View::kResult;
      for (auto& e : s_.g.node(id).last().refs) stack.push_back(e.target);
    }
  }

 private:
  std::string label(NodeId id) {
    const ShadowNode& n = s_.g.node(id);
    if (id == kExternal) return "external state";
    switch (n.kind) {
      case NodeKind::Atom: return n.dataDependent ? "number from tensor data" : record::toString(n.atom);
      case NodeKind::Tensor: {
        const record::TensorMeta* meta = s_.m.entryMeta(id);
        return "Tensor " + record::toString(meta ? *meta : replay::metaOf(tensorOf(n.obj)));
      }
      case NodeKind::Module: return std::string("module ") + PyModule_GetName(n.obj);
      case NodeKind::Function: return qualifiedName(n.obj);
      default: {
        std::string type = typeName(Py_TYPE(n.obj));
        return type.substr(type.rfind('.') + 1);
      }
    }
  }

  BuildState& s_;
};

// The mock (MagPy 4.3): what the call returns and the writes it leaves
// in the state, as expressions over the graph's outputs, the entry state
// and constants.
class MockMaker {
 public:
  explicit MockMaker(BuildState& s) : s_(s) {}

  void make() {
    auto& mock = s_.out.record.mock;
    mock.result = expr(s_.m.resultNode());
    // Entry nodes with more than one version were changed in place (Algorithm 1, lines 22-24).
    // A tensor's versions are in-place writes of its contents, which the
    // graph does, and stores into its .grad, which the mock does.
    for (NodeId id : s_.entry.order) {
      const ShadowNode& n = s_.g.node(id);
      if (n.versions.size() < 2 || n.kind == NodeKind::Atom) continue;
      const AccessPath& path = s_.entry.first[id];
      const auto& before = n.versions.front().refs;
      const auto& after = n.versions.back().refs;
      if (n.kind == NodeKind::Dict && s_.g.keyedByObjects(id)) {
        itemWrites(id, path);
        continue;
      }
      if (s_.g.onlyExtended(id)) {
        record::Effect e;
        e.kind = record::Effect::Kind::Extend;
        e.target = path;
        e.value.kind = record::ValueExpr::Kind::List;
        for (size_t i = before.size(); i < after.size(); ++i) e.value.items.push_back(expr(after[i].target));
        mock.effects.push_back(std::move(e));
        continue;
      }
      if (n.kind == NodeKind::List || n.kind == NodeKind::Dict) {
        record::Effect e;
        e.kind = record::Effect::Kind::Assign;
        e.target = path;
        e.value.kind = n.kind == NodeKind::List ? record::ValueExpr::Kind::List : record::ValueExpr::Kind::Dict;
        std::vector<Edge> was = items(before), now = items(after);
        bool same = was.size() == now.size();
        for (size_t i = 0; i < now.size(); ++i) {
          same = same && was[i].rel == now[i].rel && was[i].target == now[i].target;
          e.value.items.push_back(expr(now[i].target));
          if (n.kind == NodeKind::Dict) e.value.keys.push_back(keyAtom(now[i].rel));
        }
        if (!same) mock.effects.push_back(std::move(e));
        continue;
      }
      // Objects, modules (globals), cells, tensors (.grad): attribute by attribute.
      bool globals = n.kind == NodeKind::Module;
      for (auto& edge : after) {
        NodeId was = n.refOf(edge.rel, 0);
        if (was == edge.target) continue;
        record::Effect e;
        e.kind = globals ? record::Effect::Kind::SetItem : record::Effect::Kind::SetAttr;
        e.target = path;
        if (globals) {
          record::AccessPath p;
          p.root = AccessPath::Root::Global;
          p.name = s_.g.node(id).obj ? PyModule_GetName(s_.g.node(id).obj) : "";
          if (p.name == s_.call.homeModule) p.name.clear();
          e.target = p;
          e.key = record::Atom::string(edge.rel.name);
        } else {
          e.name = edge.rel.name;
        }
        e.value = expr(edge.target);
        mock.effects.push_back(std::move(e));
      }
      for (auto& edge : before) {
        if (n.refOf(edge.rel, n.versions.size() - 1) != kNoNode) continue;
        record::Effect e;
        e.kind = globals ? record::Effect::Kind::DelItem : record::Effect::Kind::DelAttr;
        e.target = path;
        e.name = edge.rel.name;
        e.key = record::Atom::string(edge.rel.name);
        mock.effects.push_back(std::move(e));
      }
    }
    // New values stored into state that were not at entry (Algorithm 1,
    // lines 19-21) are reached through the writes above.
    dropUnreferredNames(mock.result);
    for (auto& e : mock.effects) dropUnreferredNames(e.value);
  }

  // The graph values the mock reads, in the order of the graph's outputs.
  const std::vector<int>& outputs() const { return outputs_; }

 private:
  // A dict keyed by objects changes key by key (no Assign: its keys are
  // named by paths, not values): d[k] = v for each element new or changed.
  void itemWrites(NodeId id, const AccessPath& path) {
    const ShadowNode& n = s_.g.node(id);
    for (auto& edge : n.versions.front().refs)
      if (n.refOf(edge.rel, n.versions.size() - 1) == kNoNode)
        throw Error("the function removes a key from " + record::toString(path) +
                    ", a dict keyed by tensors, which a record cannot repeat yet");
    for (auto& edge : items(n.last().refs)) {
      if (n.refOf(edge.rel, 0) == edge.target) continue;
      record::Effect e;
      e.target = path;
      if (edge.rel.kind == Relation::Kind::KeyOf) {
        const AccessPath* key = s_.entry.keyPath(edge.rel);
        if (!key)
          throw Error("the function stores into " + record::toString(path) + " under a tensor the call made");
        e.kind = record::Effect::Kind::SetObjectItem;
        e.keyPath = *key;
      } else {
        e.kind = record::Effect::Kind::SetItem;
        e.key = edge.rel.key;
      }
      e.value = expr(edge.target);
      s_.out.record.mock.effects.push_back(std::move(e));
    }
  }

  // The mock's expression for node n as the run left it.
  record::ValueExpr expr(NodeId id, int depth = 0) {
    if (depth > 64) throw Error("a value the function returns or stores is nested too deeply (or cyclic)");
    const ShadowNode& n = s_.g.node(id);
    if (!n.unsupported.empty()) throw Error("the function returns or stores " + n.unsupported + ", which no record can hold");
    bool atEntry = s_.entry.first.count(id) > 0;
    if (n.kind == NodeKind::Atom) {
      if (n.dataDependent) throw Error("the function returns or stores a Python number computed from tensor contents");
      if (int value = s_.m.liftedNumber(id); value >= 0) return output(value);
      return record::ValueExpr::constant(n.atom);
    }
    if (atEntry) return record::ValueExpr::read(s_.entry.first[id]);  // the same object, not a copy
    switch (n.kind) {
      case NodeKind::Tensor: {
        int value = s_.m.ops().valueOf(tensorOf(n.obj));
        if (value < 0) throw Error("the function returns or stores a tensor that no graph operation made");
        return output(value);
      }
      case NodeKind::Tuple:
      case NodeKind::List:
      case NodeKind::Dict: {
        if (n.kind == NodeKind::Tuple && !PyTuple_CheckExact(n.obj))
          throw Error("the function returns or stores a new " + typeName(Py_TYPE(n.obj)) + ", which a record cannot rebuild yet");
        if (n.kind == NodeKind::List && !PyList_CheckExact(n.obj))
          throw Error("the function returns or stores a new " + typeName(Py_TYPE(n.obj)) + ", which a record cannot rebuild yet");
        std::string dictType = n.kind == NodeKind::Dict && !PyDict_CheckExact(n.obj) ? typeName(Py_TYPE(n.obj)) : "";
        if (!dictType.empty() && dictType != record::kOrderedDict)
          throw Error("the function returns or stores a new " + dictType + ", which a record cannot rebuild yet");
        // A new container the run left in two places (returned and stored
        // on self) is one object: built once, then referred to.
        auto [named, fresh] = rebuilt_.emplace(id, 0);
        if (!fresh) {
          if (named->second == 0) throw Error("the function returns or stores a container that holds itself");
          record::ValueExpr ref;
          ref.kind = record::ValueExpr::Kind::Ref;
          ref.index = named->second;
          referred_.insert(ref.index);
          return ref;
        }
        record::ValueExpr e;
        e.type = dictType;
        e.kind = n.kind == NodeKind::Tuple ? record::ValueExpr::Kind::Tuple
                 : n.kind == NodeKind::List ? record::ValueExpr::Kind::List : record::ValueExpr::Kind::Dict;
        for (auto& edge : items(n.last().refs)) {
          if (edge.rel.kind == Relation::Kind::KeyOf)
            throw Error("the function returns or stores a new dict keyed by tensors, which a record cannot rebuild yet");
          e.items.push_back(expr(edge.target, depth + 1));
          if (n.kind == NodeKind::Dict)
            e.keys.push_back(edge.rel.key);
        }
        e.index = named->second = ++lastName_;  // complete: later Refs may name it
        return e;
      }
      default:
        throw Error("the function returns or stores a new " + typeName(Py_TYPE(n.obj)) + " object, which a record cannot rebuild");
    }
  }

  record::ValueExpr output(int value) {
    auto it = std::find(outputs_.begin(), outputs_.end(), value);
    if (it == outputs_.end()) it = outputs_.insert(outputs_.end(), value);
    return record::ValueExpr::output(int64_t(it - outputs_.begin()));
  }

  // A container's elements: not a defaultdict's .default_factory.
  static std::vector<Edge> items(const std::vector<Edge>& edges) {
    std::vector<Edge> out;
    for (auto& e : edges)
      if (e.rel.kind != Relation::Kind::Attr) out.push_back(e);
    return out;
  }

  static record::Atom keyAtom(const Relation& r) {
    return r.kind == Relation::Kind::Index ? record::Atom::integer(r.index) : r.key;
  }

  BuildState& s_;
  std::vector<int> outputs_;
  // New containers the mock builds, each named once complete (0 while its
  // elements are being built).
  std::map<NodeId, int64_t> rebuilt_;
  int64_t lastName_ = 0;
  std::set<int64_t> referred_;  // the names a Ref uses: the others are dropped

  void dropUnreferredNames(record::ValueExpr& e) const {
    if (e.kind != record::ValueExpr::Kind::Ref && e.kind != record::ValueExpr::Kind::GraphOutput &&
        !referred_.count(e.index))
      e.index = 0;
    for (auto& item : e.items) dropUnreferredNames(item);
  }
};

class Builder {
 public:
  Builder(Monitor& m, const CallSpec& call, BlobPool& blobs)
      : s_{m, m.refs(), call, entryPaths(m.refs(), call.homeModule), {}, std::nullopt}, blobs_(blobs) {}

  BuiltRecord buildGuards(std::vector<record::GraphBreak> breaks) {
    s_.out.record.breaks = std::move(breaks);
    GuardMaker(s_).guards();
    RefGraphViewMaker(s_).make();
    return std::move(s_.out);
  }

  BuiltRecord build() {
    if (!s_.entry.unnamedKey.empty()) throw Error(s_.entry.unnamedKey + ", so no path names its element");
    for (NodeId id : s_.entry.order) {
      const ShadowNode& n = s_.g.node(id);
      if (!n.unsupported.empty()) throw Error(n.unsupported + " is read, and no record can hold it");
      // (v,) == (v,) holds for one NaN object and not for two: Python's
      // containers compare identity first, which no guard on atoms follows.
      if (n.kind == NodeKind::Atom && n.atom.kind == record::Atom::Kind::Float && std::isnan(n.atom.f))
        throw Error(record::toString(s_.entry.first[id]) + " is a float NaN, which containers compare by identity "
                    "(no record follows which NaN object it is)");
      if (n.kind == NodeKind::Tensor && !plainTensorType(Py_TYPE(n.obj)))
        throw Error(std::string("a tensor of subclass ") + Py_TYPE(n.obj)->tp_name +
                    " is read: its __torch_function__ runs Python on every operator, which a graph cannot repeat");
    }
    GuardMaker(s_).guards();
    MockMaker mock(s_);
    mock.make();
    graphInputs();  // after the mock, which may lift a number it writes
    finishGraph(mock.outputs());
    entryState();
    RefGraphViewMaker(s_).make();
    s_.out.record.origin = "";
    return std::move(s_.out);
  }

 private:
  void graphInputs() {
    auto& nodes = s_.m.ops().graph().nodes;
    for (auto& [index, shadow] : s_.m.graphInputs()) {
      auto it = s_.entry.first.find(shadow);
      if (it == s_.entry.first.end())
        throw Error(std::string("a ") + (nodes[size_t(index)].number.empty() ? "tensor" : "number") +
                    " the graph reads is not part of the call's state (it was made outside the graph)");
      record::Node& n = nodes[size_t(index)];
      n.source = it->second;
      const AccessPath& p = it->second;
      if (isArgPath(p)) {
        n.kind = record::NodeKind::Placeholder;
        n.target = p.root == AccessPath::Root::Arg ? "arg" + std::to_string(p.index) : p.name;
      } else {
        n.kind = record::NodeKind::GetAttr;
        n.target = fxTarget(p);
      }
    }
    for (auto& [index, tensor] : s_.m.constants()) nodes[size_t(index)].blob = blobs_.add(tensor);
  }

  // Output node, then dead code elimination (replay's pass: it keeps what
  // the outputs need, every operator that writes a tensor, and every random
  // draw, which moves the generator even when unused).
  void finishGraph(const std::vector<int>& outputs) {
    record::Graph out = s_.m.ops().graph();
    record::Node output;
    output.kind = record::NodeKind::Output;
    output.name = "output";
    output.target = "output";
    for (int v : outputs) output.args.push_back(record::Arg::node(v));
    out.nodes.push_back(std::move(output));
    makeBranches(out);
    rollLoops(out);
    // A record with branches keeps what a side left unused: another path's
    // record joining it may use it (plans drop dead code anyway).
    if (!record::hasBranches(out)) replay::eliminateDeadCode(out);
    if (std::string why = replay::readsUninitialized(out); !why.empty()) throw Error(why);
    nameInputs(out);
    s_.out.record.graph = std::move(out);
  }

  // Branches the monitor saw (Monitor::branches) become branches with one
  // side seen where they can, the latest first: making one moves the nodes
  // after it, not those before. In a run with loops over a size they stay
  // checks (the loops' spans would move), as in static records.
  void makeBranches(record::Graph& g) {
    const auto& branches = s_.m.branches();
    if (!s_.call.makeBranches || branches.empty()) return;  // a static record keeps its checks
    record::Graph made = g;
    for (size_t k = branches.size(); k-- > 0;) {
      std::string why = branches[k].why;
      if (why.empty() && !s_.m.loops().empty()) why = "the run also loops over a size";
      if (why.empty()) why = makeBranch(made, branches[k].span);
      if (!why.empty()) s_.out.notes.push_back("the branch at " + branches[k].where + " stays a check: " + why);
    }
    if (std::string why = stopsCleanly(made); !why.empty()) {  // the checks did: keep them
      s_.out.notes.push_back("the branches stay checks: " + why);
      return;
    }
    nameBranchesInOrder(made);
    g = std::move(made);
  }

  // Loops the monitor saw over a size (Monitor::loops) are rolled where
  // they can be, the latest first: rolling one moves the nodes after it,
  // not those before. A record that keeps its sizes anyway keeps them
  // unrolled, for backends that lower no loops.
  void rollLoops(record::Graph& g) {
    if (s_.m.readSizes() || !s_.call.rollLoops) return;
    const auto& loops = s_.m.loops();
    for (size_t k = loops.size(); k-- > 0;) {
      std::string why = loops[k].why;
      if (why.empty()) why = rollLoop(g, loops[k].span);
      if (!why.empty()) s_.m.keepsUnrolled(loops[k], why);
    }
  }

  // Inputs are named after what they read, as torch.fx names them:
  // args[0] -> arg0, self.fc1.weight -> fc1_weight.
  static void nameInputs(record::Graph& graph) {
    record::Namespace names;
    for (auto& n : graph.nodes)
      if (!n.isInput()) names.reserve(n.name);  // operators keep the names capture gave them
    for (auto& n : graph.nodes)
      if (n.isInput()) n.name = names.create(n.target);
  }

  // The entry state the run read, from the version-0 view of the RefGraph
  // (the live objects may have changed since: the run's own writes).
  // Objects reached twice are one value and Refs to it (aliasing). An
  // attribute that leads back to an object holding it (a bound method's
  // __self__, a parent module) would make the value contain itself, which
  // records cannot hold: it is left out, so native replay finds no such
  // path and refuses what needs it. A weak reference's referent is a Ref
  // (replay holds it weakly).
  record::Value entryValue(NodeId id, std::map<NodeId, uint32_t>& ids) {
    const ShadowNode& n = s_.g.node(id);
    record::Value v;
    if (n.kind != NodeKind::Atom) {
      if (auto it = ids.find(id); it != ids.end()) {
        v.kind = record::Value::Kind::Ref;
        v.id = it->second;
        return v;
      }
      v.id = ids[id] = uint32_t(ids.size() + 1);
    }
    open_.insert(id);
    auto edgesInto = [&](record::Value& into) {
      bool attributes = n.kind != NodeKind::Dict && n.kind != NodeKind::Tuple && n.kind != NodeKind::List;
      for (auto& e : std::vector<Edge>(n.versions.front().refs)) {
        bool weak = e.rel.kind == Relation::Kind::Attr && e.rel.name == record::kWeakReferent;
        if (attributes && open_.count(e.target) && !weak) continue;
        if (n.kind == NodeKind::Dict && e.rel.kind == Relation::Kind::Attr) {
          // A defaultdict's default_factory: named, for native guards.
          if (e.rel.name == "default_factory") into.atom = defaultFactoryName(n.obj);
          continue;
        }
        if (e.rel.kind == Relation::Kind::KeyOf) {
          // The key's node for now: resolveKeys makes it the key's id.
          into.keyRefs.resize(into.keys.size());
          into.keyRefs.push_back(uint32_t(e.rel.index));
          into.keys.push_back(record::Atom::none());
        } else if (n.kind == NodeKind::Dict) {
          into.keys.push_back(e.rel.key);
          if (!into.keyRefs.empty()) into.keyRefs.push_back(0);
        } else if (n.kind != NodeKind::Tuple && n.kind != NodeKind::List) {
          into.names.push_back(e.rel.name);
        }
        into.items.push_back(entryValue(e.target, ids));
      }
    };
    switch (n.kind) {
      case NodeKind::Atom:
        v.atom = n.atom;
        break;
      case NodeKind::Tensor: {
        const at::Tensor& t = tensorOf(n.obj);
        const at::Tensor* before = s_.m.entryContent(t);
        v.kind = record::Value::Kind::Tensor;
        v.meta = s_.m.entryMeta(id) ? *s_.m.entryMeta(id) : replay::metaOf(t);
        v.blob = blobs_.add(before ? *before : t);
        tensorGrad(n, v, ids);
        break;
      }
      case NodeKind::Tuple:
      case NodeKind::List:
      case NodeKind::Dict:
        v.kind = n.kind == NodeKind::Tuple ? record::Value::Kind::Tuple
                 : n.kind == NodeKind::List ? record::Value::Kind::List : record::Value::Kind::Dict;
        if (!PyTuple_CheckExact(n.obj) && !PyList_CheckExact(n.obj) && !PyDict_CheckExact(n.obj)) v.type = typeName(Py_TYPE(n.obj));
        edgesInto(v);
        break;
      case NodeKind::Module:
        objectShell(n.obj, v);  // a module's attributes are globals, read as G(module)[...]
        if (!RefGraph::registeredModule(n.obj)) edgesInto(v);  // or attributes, where unregistered
        break;
      case NodeKind::Function:
      case NodeKind::Object:
        objectShell(n.obj, v);
        edgesInto(v);
        break;
    }
    open_.erase(id);
    return v;
  }

  // A tensor's .grad as the run first read it, where it held a tensor.
  void tensorGrad(const ShadowNode& n, record::Value& v, std::map<NodeId, uint32_t>& ids) {
    NodeId grad = n.refOf(Relation::attr("grad"), 0);
    if (grad == kNoNode || s_.g.node(grad).kind != NodeKind::Tensor) return;
    v.names = {"grad"};
    v.items = {entryValue(grad, ids)};
  }

  // A dict's keys that are objects, from the nodes entryValue left to the
  // ids of those nodes' values in the same tree.
  static void resolveKeys(record::Value& v, const std::map<NodeId, uint32_t>& ids) {
    for (uint32_t& key : v.keyRefs) {  // 0: an atom key (node 0 is never a key)
      if (!key) continue;
      auto it = ids.find(NodeId(key));
      if (it == ids.end()) throw Error("a dict of the state is keyed by a tensor held by another part of it");
      key = it->second;
    }
    for (auto& item : v.items) resolveKeys(item, ids);
  }

  void entryState() {
    std::map<NodeId, uint32_t> ids, argIds, kwargIds;  // one id space per tree
    for (auto& e : s_.g.node(kExternal).versions.front().refs) {
      switch (e.rel.kind) {
        case Relation::Kind::Self:
          ids.clear();
          s_.out.selfEntry = entryValue(e.target, ids);
          resolveKeys(s_.out.selfEntry, ids);
          record::compactIds(s_.out.selfEntry);
          break;
        case Relation::Kind::Arg:  // one id space for all arguments, as the call log has
          s_.out.argsEntry[size_t(e.rel.index)] = entryValue(e.target, argIds);
          resolveKeys(s_.out.argsEntry[size_t(e.rel.index)], argIds);
          break;
        case Relation::Kind::Kwarg:
          s_.out.kwargsEntry[e.rel.name] = entryValue(e.target, kwargIds);
          resolveKeys(s_.out.kwargsEntry[e.rel.name], kwargIds);
          break;
        case Relation::Kind::Module: {
          // A module's globals: only those the run read.
          record::Value globals;
          globals.kind = record::Value::Kind::Dict;
          ids.clear();
          for (auto& g : std::vector<Edge>(s_.g.node(e.target).versions.front().refs)) {
            globals.keys.push_back(record::Atom::string(g.rel.name));
            globals.items.push_back(entryValue(g.target, ids));
          }
          resolveKeys(globals, ids);
          record::compactIds(globals);
          if (!globals.items.empty()) s_.out.globalsEntry[e.rel.name] = std::move(globals);
          break;
        }
        default:
          break;
      }
    }
    for (auto& g : s_.out.record.guards) {
      if (g.path.root == AccessPath::Root::Arg) s_.out.argPaths[size_t(g.path.index)].insert(g.path.steps);
      if (g.path.root == AccessPath::Root::Kwarg) s_.out.kwargPaths[g.path.name].insert(g.path.steps);
    }
  }

  BuildState s_;
  BlobPool& blobs_;
  std::set<NodeId> open_;  // entryValue's objects being built: the current one and its holders
};

}  // namespace

BuiltRecord buildRecord(Monitor& monitor, const CallSpec& call, BlobPool& blobs) {
  BuiltRecord built = Builder(monitor, call, blobs).build();
  built.record.forwardOnly = monitor.forwardOnly();
  return built;
}

BuiltRecord buildBreakRecord(Monitor& monitor, const CallSpec& call, std::vector<record::GraphBreak> breaks) {
  BlobPool unused;
  return Builder(monitor, call, unused).buildGuards(std::move(breaks));
}

}  // namespace magpy::capture

// One implementation of access paths, guards and mocks for every store of
// state. A *store* says how to reach a value and what a value is; this file
// says what a path resolves to, what each guard means and what a mock does.
// Two stores exist: live Python objects (the JIT, capture/live.h) and
// native values (replay, replay/native_store.h).
//
// A store S provides:
//   S::Handle    a value, or nothing (a path that leads nowhere); tests as bool
//   S::Expected  what the capturing run saw per guard (live: the object), or
//                an empty struct
//   root(path)                   the value at path's root (its steps ignored)
//   step(parent, tree, node)     one step below parent: tree.node(node)
//   itemOf(parent, key)          parent[key] for a key that is an object (a tensor),
//                                found by identity
//   rootMissing(path), lacks(parent, tree, node)
//                                why a root or a step leads nowhere (messages)
//   argCount()                   the call's number of positional arguments
//   typeIs(h, check, expected), identityIs(h, check, expected),
//   atom(h), exactAtom(h) (an atom of its exact type, not a subclass's value),
//   length(h), keysAre(h, keys), keys(h), tensor(h), plainTensor(h),
//   same(a, b), typeName(h), describe(h)
//                                what guards read
//   constant(atom), output(ivalue), sequence(isTuple, items),
//   dict(keys, items, type), setAttr/delAttr/setItem/delItem/setItemOf/assignContents/
//   extendContents
//                                what mocks build and write; writes throw
//                                Error with a reason; setAttr returns whether
//                                the value changed
#pragma once

#include <ATen/core/ivalue.h>

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "magpy/record/record.h"
#include "magpy/replay/guards.h"
#include "magpy/replay/tensors.h"
#include "magpy/support/error.h"

namespace magpy::replay {

// Access paths as a prefix tree: a call resolves each shared prefix once
// (self.layer1 for all of layer1's parameters). `obj.__dict__['name']` is
// one node, an instance attribute (the class's attributes do not count).
class PathTree {
 public:
  enum class StepKind : uint8_t { Attr, InstanceAttr, Index, Key, ObjectKey };
  struct Node {
    int parent = -1;          // -1: a root
    record::AccessPath root;  // roots only: the path without steps
    StepKind kind = StepKind::Attr;
    record::PathStep step;    // Attr/InstanceAttr: name; Index: index; Key: key; ObjectKey: its path
    int keyNode = -1;         // ObjectKey: the node of the key's path
  };

  static StepKind kindOf(record::PathStep::Kind kind);  // Attr, Index, Key or ObjectKey

  int add(const record::AccessPath& path);  // the node that names path
  const Node& node(int i) const { return nodes_[size_t(i)]; }
  size_t size() const { return nodes_.size(); }
  record::AccessPath pathOf(int node) const;  // for messages

 private:
  int rootOf(const record::AccessPath& path);
  int child(int parent, StepKind kind, const record::PathStep& step, int keyNode);

  std::vector<Node> nodes_;
  // Ordered, not hashed: a record from elsewhere could name many steps of
  // one hash (dict keys that differ only in a float's bits) and make each
  // lookup a scan. Transparent: a lookup compares the caller's step, copied
  // only when added.
  std::map<std::tuple<int, StepKind, record::PathStep>, int, std::less<>> children_;
  std::map<record::AccessPath, int> roots_;
  // Per step of the path added last, the node it led to: paths come
  // sorted, so the next one mostly shares its prefix (self.layer1.0.conv1
  // .weight, then .bias), found without a map lookup. A hint only: a node
  // is taken when its parent and step match, as the map would find it.
  std::vector<int> lastChain_;
};

// The values of a tree's nodes for one call, resolved on first use.
template <class Store>
class Resolution {
 public:
  using Handle = typename Store::Handle;
  Resolution(const Store& store, const PathTree& tree)
      : store_(store), tree_(tree), values_(tree.size()), resolved_(tree.size(), 0) {}

  const Store& store() const { return store_; }
  const PathTree& tree() const { return tree_; }
  SymbolValues& symbols() { return symbols_; }

  // Empty when the path leads nowhere.
  const Handle& get(int node) {
    if (resolved_[size_t(node)]) return values_[size_t(node)];
    const PathTree::Node& n = tree_.node(node);
    Handle v;
    if (n.parent < 0) {
      v = store_.root(n.root);
    } else if (const Handle& parent = get(n.parent)) {
      if (n.kind != PathTree::StepKind::ObjectKey) {
        v = store_.step(parent, tree_, node);
      } else if (const Handle& key = get(n.keyNode)) {
        v = store_.itemOf(parent, key);
      }
    }
    resolved_[size_t(node)] = 1;
    return values_[size_t(node)] = std::move(v);
  }

  // For a node that leads nowhere: "self.x does not exist: self has no attribute 'x'".
  std::string whyMissing(int node) {
    int missing = node;
    for (int up = tree_.node(node).parent; up >= 0 && !get(up); up = tree_.node(up).parent) missing = up;
    const PathTree::Node& n = tree_.node(missing);
    std::string what = record::toString(tree_.pathOf(missing)) + " does not exist: ";
    if (n.parent < 0) return what + store_.rootMissing(n.root);
    if (n.kind == PathTree::StepKind::ObjectKey && !get(n.keyNode)) return what + "its key " + whyMissing(n.keyNode);
    return what + record::toString(tree_.pathOf(n.parent)) + store_.lacks(get(n.parent), tree_, missing);
  }

 private:
  const Store& store_;
  const PathTree& tree_;
  std::vector<Handle> values_;
  std::vector<uint8_t> resolved_;  // bytes, not bits: read on every step
  SymbolValues symbols_;
};

// The value at one path. Where it leads nowhere: empty with orEmpty, else
// an Error saying which step leads nowhere.
template <class Store>
typename Store::Handle resolvePath(const Store& store, const record::AccessPath& path, bool orEmpty = false) {
  PathTree tree;
  int node = tree.add(path);
  Resolution<Store> r(store, tree);
  typename Store::Handle v = r.get(node);
  if (!v && !orEmpty) throw Error(r.whyMissing(node));
  return v;
}

// A record's guards, graph inputs and mock compiled over one PathTree.
class RecordAccess {
 public:
  enum class Guards { All, PerCall, OnState };  // PerCall: guards that read the call's arguments or interpreter state

  RecordAccess(const std::vector<record::Guard>& guards, const std::vector<record::AccessPath>& inputs,
               const record::MockSpec& mock);

  const PathTree& tree() const { return tree_; }
  size_t numGuards() const { return guards_.size(); }

  // The first guard (of those asked for) that does not hold. `expected`
  // holds one entry per guard, or none.
  template <class Store>
  std::optional<GuardMiss> firstMiss(Resolution<Store>& r, Guards which,
                                     const std::vector<typename Store::Expected>& expected = {}) const;

  // Every guard that does not hold, by its index in the record's guards.
  template <class Store>
  std::vector<size_t> misses(Resolution<Store>& r, const std::vector<typename Store::Expected>& expected = {}) const;

  // The graph's inputs (tensors, lifted numbers). Throws Error.
  template <class Store>
  std::vector<c10::IValue> inputs(Resolution<Store>& r) const;

  template <class Handle>
  struct MockRun {
    Handle result;
    bool stateChanged = false;  // a write changed the state (rewriting the held value does not)
  };
  // Builds the call's result and performs the writes. Every read sees the
  // state as it was at call entry; the writes happen afterwards, in order.
  template <class Store>
  MockRun<typename Store::Handle> mock(const std::vector<c10::IValue>& outputs, Resolution<Store>& r) const;

 private:
  struct GuardStep {
    size_t guard = 0;  // in checks_
    int node = -1;
    int other = -1;  // Alias, Distinct: the other path's node
    bool perCall = false;
    bool argCount = false;  // len(args): answered without building the tuple
    c10::ScalarType dtype = c10::ScalarType::Undefined;
    // Tensor, Equals: a Type guard on the same path admits a subclass (a
    // tensor subclass, a float subclass such as numpy.float64); without
    // one, only the exact type matches.
    bool subclassTyped = false;
  };
  template <class Store>
  bool holds(const GuardStep& gs, Resolution<Store>& r, const typename Store::Expected& expected) const;
  // What the value is instead, for a guard that does not hold.
  template <class Store>
  std::string actual(const GuardStep& gs, Resolution<Store>& r) const;
  // Where a mock's evaluation stands: its next read, and the containers
  // built so far that a later Ref names (one object in two places).
  template <class Handle>
  struct Building {
    size_t nextRead = 0;
    std::vector<std::pair<int64_t, Handle>> named;
  };
  template <class Store>
  typename Store::Handle build(const record::ValueExpr& e, const std::vector<c10::IValue>& outputs, Resolution<Store>& r,
                               Building<typename Store::Handle>& b) const;
  void addMockReads(const record::ValueExpr& e);

  PathTree tree_;
  std::vector<record::Check> checks_;  // the guards' (their paths are tree_'s nodes)
  std::vector<GuardStep> guards_;  // small, in check order: one per guard
  std::vector<int> inputs_;
  record::MockSpec mock_;
  std::vector<int> mockReads_;  // nodes of the mock's reads and targets, in the order mock() meets them
};

// Whether a tensor has the metadata a Tensor guard expects (dtype given
// separately, parsed once). Dynamic sizes bind or check `symbols`.
bool tensorMatches(const at::Tensor& t, const record::TensorMeta& m, c10::ScalarType dtype, SymbolValues& symbols);

template <class Store>
bool RecordAccess::holds(const GuardStep& gs, Resolution<Store>& r, const typename Store::Expected& expected) const {
  using K = record::Check::Kind;
  const record::Check& c = checks_[gs.guard];
  const Store& s = r.store();
  if (gs.argCount) return int64_t(s.argCount()) == c.i;
  const auto& v = r.get(gs.node);
  if (!v) return c.kind == K::Absent;
  switch (c.kind) {
    case K::Type: return s.typeIs(v, c, expected);
    // A lifted number's type: also one the graph can hold (an int within 64 bits).
    case K::Number: return s.typeIs(v, c, expected) && s.atom(v).has_value();
    case K::Identity: return s.identityIs(v, c, expected);
    case K::Equals: {
      auto a = s.atom(v);
      return a && *a == c.atom && (gs.subclassTyped || s.exactAtom(v));
    }
    case K::Length: {
      auto n = s.length(v);
      return n && *n == c.i;
    }
    case K::DictKeys: return s.keysAre(v, c.keys);
    case K::Tensor: {
      // A tensor subclass runs Python (__torch_function__) on every
      // operator: only a record made with that subclass serves it.
      const at::Tensor* t = s.tensor(v);
      return t && tensorMatches(*t, c.meta, gs.dtype, r.symbols()) && (gs.subclassTyped || s.plainTensor(v));
    }
    case K::Alias: {
      const auto& other = r.get(gs.other);
      return other && s.same(v, other);
    }
    case K::Absent: return false;  // it resolved, so it is present
    case K::Distinct: {
      const auto& other = r.get(gs.other);
      return !other || !s.same(v, other);
    }
  }
  return false;
}

template <class Store>
std::string RecordAccess::actual(const GuardStep& gs, Resolution<Store>& r) const {
  using K = record::Check::Kind;
  const record::Check& c = checks_[gs.guard];
  const Store& s = r.store();
  if (gs.argCount) return "len " + std::to_string(s.argCount());
  const auto& v = r.get(gs.node);
  if (!v) return "missing (" + r.whyMissing(gs.node) + ")";
  switch (c.kind) {
    case K::Type: return "type " + s.typeName(v);
    case K::Number: {
      std::string type = s.typeName(v);
      return type == c.s ? "a number no graph holds (an int beyond 64 bits)" : "type " + type;
    }
    case K::Length: {
      auto n = s.length(v);
      return n ? "len " + std::to_string(*n) : s.describe(v);
    }
    case K::DictKeys: {
      auto keys = s.keys(v);
      if (!keys) return s.describe(v);
      std::string text;
      for (auto& k : *keys) text += (text.empty() ? "" : ", ") + record::toString(k);
      return "keys [" + text + "]";
    }
    case K::Alias: return "a different object than " + record::toString(c.path);
    case K::Distinct: return "the same object as " + record::toString(c.path);
    default: return s.describe(v);
  }
}

template <class Store>
std::optional<GuardMiss> RecordAccess::firstMiss(Resolution<Store>& r, Guards which,
                                                 const std::vector<typename Store::Expected>& expected) const {
  static const typename Store::Expected kNothingExpected{};
  for (size_t i = 0; i < guards_.size(); ++i) {
    const GuardStep& gs = guards_[i];
    if (which != Guards::All && gs.perCall != (which == Guards::PerCall)) continue;
    if (holds(gs, r, i < expected.size() ? expected[i] : kNothingExpected)) continue;
    return GuardMiss{record::toString(tree_.pathOf(gs.node)), record::describe(checks_[gs.guard]), actual(gs, r)};
  }
  return std::nullopt;
}

template <class Store>
std::vector<size_t> RecordAccess::misses(Resolution<Store>& r, const std::vector<typename Store::Expected>& expected) const {
  static const typename Store::Expected kNothingExpected{};
  std::vector<size_t> out;
  for (size_t i = 0; i < guards_.size(); ++i)
    if (!holds(guards_[i], r, i < expected.size() ? expected[i] : kNothingExpected)) out.push_back(guards_[i].guard);
  return out;
}

template <class Store>
std::vector<c10::IValue> RecordAccess::inputs(Resolution<Store>& r) const {
  std::vector<c10::IValue> out;
  out.reserve(inputs_.size());
  for (int node : inputs_) {
    const auto& v = r.get(node);
    if (!v) throw Error("graph input " + r.whyMissing(node));
    if (const at::Tensor* t = r.store().tensor(v)) {
      out.emplace_back(*t);
      continue;
    }
    // A lifted number; the plan checks it is the kind its graph computes with.
    auto a = r.store().atom(v);
    if (a && a->kind == record::Atom::Kind::Int) out.emplace_back(a->i);
    else if (a && a->kind == record::Atom::Kind::Float) out.emplace_back(a->f);
    else
      throw Error("graph input " + record::toString(r.tree().pathOf(node)) + " is " + r.store().describe(v) +
                  ", not a tensor or number");
  }
  return out;
}

template <class Store>
typename Store::Handle RecordAccess::build(const record::ValueExpr& e, const std::vector<c10::IValue>& outputs,
                                           Resolution<Store>& r, Building<typename Store::Handle>& b) const {
  using K = record::ValueExpr::Kind;
  const Store& store = r.store();
  auto items = [&] {
    std::vector<typename Store::Handle> out;
    out.reserve(e.items.size());
    for (auto& item : e.items) out.push_back(build(item, outputs, r, b));
    return out;
  };
  switch (e.kind) {
    case K::Const:
      return store.constant(e.atom);
    case K::GraphOutput:
      if (e.index < 0 || size_t(e.index) >= outputs.size())
        throw Error("the mock uses graph output " + std::to_string(e.index) + " of " + std::to_string(outputs.size()));
      return store.output(outputs[size_t(e.index)]);
    case K::Read: {
      int node = mockReads_[b.nextRead++];
      const auto& v = r.get(node);
      if (!v) throw Error("the mock reads " + r.whyMissing(node));
      return v;
    }
    case K::Ref:
      for (auto& [index, handle] : b.named)
        if (index == e.index) return handle;
      throw Error("the mock refers to object #" + std::to_string(e.index) + ", which it has not built");
    case K::Tuple:
    case K::List:
    case K::Dict: {
      auto built = e.kind == K::Dict ? store.dict(e.keys, items(), e.type) : store.sequence(e.kind == K::Tuple, items());
      if (e.index > 0) b.named.emplace_back(e.index, built);
      return built;
    }
  }
  throw Error("unknown mock expression");
}

template <class Store>
RecordAccess::MockRun<typename Store::Handle> RecordAccess::mock(const std::vector<c10::IValue>& outputs,
                                                                 Resolution<Store>& r) const {
  using Handle = typename Store::Handle;
  const Store& store = r.store();
  Building<Handle> building;
  MockRun<Handle> run{build(mock_.result, outputs, r, building), false};
  struct Write {
    const record::Effect* effect;
    Handle target, key, value;
  };
  std::vector<Write> writes;
  writes.reserve(mock_.effects.size());
  for (auto& e : mock_.effects) {
    int node = mockReads_[building.nextRead++];
    const Handle& target = r.get(node);
    if (!target) throw Error("the mock writes to " + r.whyMissing(node));
    Handle key;
    if (e.kind == record::Effect::Kind::SetObjectItem) {
      int keyNode = mockReads_[building.nextRead++];
      key = r.get(keyNode);
      if (!key) throw Error("the mock writes under the key " + r.whyMissing(keyNode));
    }
    writes.push_back({&e, target, std::move(key), build(e.value, outputs, r, building)});
  }
  for (auto& w : writes) {
    const record::Effect& e = *w.effect;
    try {
      bool changed = true;
      switch (e.kind) {
        case record::Effect::Kind::SetAttr: changed = store.setAttr(w.target, e.name, std::move(w.value)); break;
        case record::Effect::Kind::DelAttr: store.delAttr(w.target, e.name); break;
        case record::Effect::Kind::SetItem: store.setItem(w.target, e.key, std::move(w.value)); break;
        case record::Effect::Kind::DelItem: store.delItem(w.target, e.key); break;
        case record::Effect::Kind::Assign: store.assignContents(w.target, w.value); break;
        case record::Effect::Kind::SetObjectItem: store.setItemOf(w.target, w.key, std::move(w.value)); break;
        case record::Effect::Kind::Extend: store.extendContents(w.target, w.value); break;
      }
      run.stateChanged = run.stateChanged || changed;
    } catch (const Error& err) {
      throw Error("the mock's write " + record::toString(e) + ": " + err.what());
    }
  }
  return run;
}

}  // namespace magpy::replay

#include "magpy/replay/state_access.h"

#include <algorithm>
#include <set>
#include <tuple>

namespace magpy::replay {

PathTree::StepKind PathTree::kindOf(record::PathStep::Kind kind) {
  switch (kind) {
    case record::PathStep::Kind::Attr: return StepKind::Attr;
    case record::PathStep::Kind::Index: return StepKind::Index;
    case record::PathStep::Kind::Key: break;
    case record::PathStep::Kind::ObjectKey: return StepKind::ObjectKey;
  }
  return StepKind::Key;
}

int PathTree::add(const record::AccessPath& path) {
  int node = rootOf(path);
  lastChain_.resize(std::max(lastChain_.size(), path.steps.size() + 1), -1);
  lastChain_[0] = node;
  for (size_t k = 0; k < path.steps.size(); ++k) {
    if (record::isInstanceDictKey(path, k)) {
      const std::string& name = path.steps[++k].key.s;
      int hint = lastChain_[k + 1];
      bool same = hint >= 0 && nodes_[size_t(hint)].parent == node && nodes_[size_t(hint)].kind == StepKind::InstanceAttr &&
                  nodes_[size_t(hint)].step.name == name;
      node = same ? hint : child(node, StepKind::InstanceAttr, record::PathStep::attr(name), -1);
      lastChain_[k] = -1;  // inside the pair: no node of its own
      lastChain_[k + 1] = node;
      continue;
    }
    const record::PathStep& step = path.steps[k];
    StepKind kind = kindOf(step.kind);
    int hint = lastChain_[k + 1];
    if (kind != StepKind::ObjectKey && hint >= 0 && nodes_[size_t(hint)].parent == node &&
        nodes_[size_t(hint)].kind == kind && nodes_[size_t(hint)].step.compare(step) == 0) {
      node = hint;
    } else {
      // The key's own path first: resolving this step resolves it.
      int keyNode = kind == StepKind::ObjectKey ? add(step.keyOf.at(0)) : -1;
      node = child(node, kind, step, keyNode);
    }
    lastChain_[k + 1] = node;
  }
  return node;
}

int PathTree::rootOf(const record::AccessPath& path) {
  int last = lastChain_.empty() ? -1 : lastChain_[0];
  if (last >= 0) {
    const record::AccessPath& root = nodes_[size_t(last)].root;
    if (root.root == path.root && root.index == path.index && root.name == path.name) return last;
  }
  record::AccessPath root;
  root.root = path.root;
  root.index = path.index;
  root.name = path.name;
  auto [at, fresh] = roots_.try_emplace(std::move(root), int(nodes_.size()));
  if (fresh) nodes_.push_back({-1, at->first, StepKind::Attr, {}});
  return at->second;
}

int PathTree::child(int parent, StepKind kind, const record::PathStep& step, int keyNode) {
  auto key = std::forward_as_tuple(parent, kind, step);
  auto it = children_.lower_bound(key);
  if (it != children_.end() && !children_.key_comp()(key, it->first)) return it->second;
  int id = int(nodes_.size());
  children_.emplace_hint(it, std::make_tuple(parent, kind, step), id);
  nodes_.push_back({parent, {}, kind, step, keyNode});
  return id;
}

record::AccessPath PathTree::pathOf(int node) const {
  std::vector<const Node*> chain;
  for (int n = node; n >= 0; n = nodes_[size_t(n)].parent) chain.push_back(&nodes_[size_t(n)]);
  record::AccessPath path = chain.back()->root;
  for (auto it = chain.rbegin() + 1; it != chain.rend(); ++it) {
    if ((*it)->kind == StepKind::InstanceAttr) {
      path.steps.push_back(record::PathStep::attr("__dict__"));
      path.steps.push_back(record::PathStep::keyed(record::Atom::string((*it)->step.name)));
    } else {
      path.steps.push_back((*it)->step);
    }
  }
  return path;
}

namespace {

// Guards on what a call brings (its arguments, the interpreter's state)
// are checked on every call; the others only after the state changed.
bool readsCall(const record::AccessPath& p) {
  using R = record::AccessPath::Root;
  return p.root == R::Arg || p.root == R::Kwarg || p.root == R::Runtime;
}

}  // namespace

RecordAccess::RecordAccess(const std::vector<record::Guard>& guards, const std::vector<record::AccessPath>& inputs,
                           const record::MockSpec& mock)
    : mock_(mock) {
  using K = record::Check::Kind;
  // One tree node per path: a value with a type guard is found by node
  // (a scan of the guards per tensor guard was quadratic in large models).
  std::vector<int> nodes;
  std::set<int> typed;
  checks_.reserve(guards.size());
  for (const record::Guard& g : guards) {
    nodes.push_back(tree_.add(g.path));
    if (g.check.kind == K::Type) typed.insert(nodes.back());
    checks_.push_back(g.check);
  }
  for (size_t i = 0; i < guards.size(); ++i) {
    const record::Guard& g = guards[i];
    GuardStep gs;
    gs.guard = i;
    gs.node = nodes[i];
    bool relation = g.check.kind == K::Alias || g.check.kind == K::Distinct;
    gs.perCall = readsCall(g.path) || (relation && readsCall(g.check.path));
    gs.argCount = g.check.kind == K::Length && g.path == record::AccessPath::allArgs();
    if (relation) gs.other = tree_.add(g.check.path);
    if (g.check.kind == K::Tensor || g.check.kind == K::Equals) gs.subclassTyped = typed.count(gs.node) > 0;
    if (g.check.kind == K::Tensor) gs.dtype = dtypeFromName(g.check.meta.dtype);
    guards_.push_back(std::move(gs));
  }
  for (auto& p : inputs) inputs_.push_back(tree_.add(p));
  addMockReads(mock_.result);
  for (auto& e : mock_.effects) {
    mockReads_.push_back(tree_.add(e.target));
    if (e.kind == record::Effect::Kind::SetObjectItem) mockReads_.push_back(tree_.add(e.keyPath));
    addMockReads(e.value);
  }
}

void RecordAccess::addMockReads(const record::ValueExpr& e) {
  if (e.kind == record::ValueExpr::Kind::Read) mockReads_.push_back(tree_.add(e.path));
  for (auto& item : e.items) addMockReads(item);
}

bool tensorMatches(const at::Tensor& t, const record::TensorMeta& m, c10::ScalarType dtype, SymbolValues& symbols) {
  auto sizes = t.sizes();
  if (t.scalar_type() != dtype || t.requires_grad() != m.requires_grad || sizes.size() != m.shape.size() ||
      (t.is_cpu() ? m.device != "cpu" : deviceName(t.device()) != m.device))
    return false;
  if (!m.dynamic()) {
    auto strides = t.strides();
    return std::equal(sizes.begin(), sizes.end(), m.shape.begin()) &&
           std::equal(strides.begin(), strides.end(), m.strides.begin());
  }
  for (size_t d = 0; d < sizes.size(); ++d) {
    const record::SymDim& x = m.sym[d];
    if (x.symbol < 0 ? sizes[d] != x.offset : !symbols.unify(x.symbol, sizes[d])) return false;
  }
  return t.is_contiguous();
}

}  // namespace magpy::replay

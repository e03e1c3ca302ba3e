#include "capture/branches.h"

#include <algorithm>
#include <map>
#include <set>

#include "magpy/record/graph_utils.h"
#include "magpy/replay/passes.h"

namespace magpy::capture {

using record::Arg;
using record::Graph;
using record::Node;

namespace {

Arg nodeList(std::vector<int64_t> ints) {
  Arg a;
  a.kind = Arg::Kind::NodeList;
  a.ints = std::move(ints);
  return a;
}

Node marker(const std::string& name, const char* target, const std::string& where, std::vector<Arg> args) {
  Node n;
  n.name = name;
  n.target = target;
  n.where = where;
  n.args = std::move(args);
  return n;
}

}  // namespace

std::string makeBranch(Graph& g, const BranchSpan& span) {
  if (span.check < 0 || size_t(span.end) > g.nodes.size() || span.begin != span.check + 1 || span.end < span.begin ||
      span.places.size() != span.values.size())
    return "its side is not where the check was";
  const Node& check = g.nodes[size_t(span.check)];
  if (check.target != record::kExpectEqual || check.args.size() != 2) return "its condition is not checked";
  if (replay::firstEffect(g) < size_t(span.check))
    return "the graph wrote its inputs in place or drew random numbers before it";
  for (int64_t i = span.begin; i < span.end; ++i)
    if (record::isRegionMarker(g.nodes[size_t(i)].target)) return "its side holds a loop or another branch";
  int64_t cond = check.args[0].i, seen = check.args[1].i;
  std::vector<size_t> uses = record::useCounts(g);

  // Later nodes see the side's values only through the variables that
  // hold them where the sides meet: the branch's values.
  for (int v : span.values)
    if (v < 0 || v >= span.end || g.nodes[size_t(v)].outputs.size() != 1 || !g.nodes[size_t(v)].number.empty())
      return "a variable holds no tensor of the graph where its sides meet";
  for (size_t i = size_t(span.end); i < g.nodes.size(); ++i) {
    bool hidden = false;
    record::forEachNodeArg(g.nodes[i], [&](int64_t j) {
      bool side = j >= span.begin && j < span.end && !g.nodes[size_t(j)].isInput();
      hidden = hidden || (side && std::find(span.values.begin(), span.values.end(), j) == span.values.end());
    });
    if (hidden) return "a value of its side is used after it, not through a variable";
  }
  record::Namespace names;
  for (const Node& n : g.nodes) names.reserve(n.name);
  Graph out;
  std::vector<int64_t> to(g.nodes.size(), -1);
  auto keep = [&](size_t i) {
    to[i] = int64_t(out.nodes.size());
    out.nodes.push_back(g.nodes[i]);
    record::forEachNodeArg(out.nodes.back(), [&](int64_t& r) { r = to[size_t(r)]; });
  };
  bool dropSeen = uses[size_t(seen)] == 1 && g.nodes[size_t(seen)].isInput();
  for (size_t i = 0; i < size_t(span.check); ++i)
    if (!(dropSeen && int64_t(i) == seen)) keep(i);
  for (int64_t i = span.begin; i < span.end; ++i)  // the side's inputs come before it
    if (g.nodes[size_t(i)].isInput()) keep(size_t(i));
  const std::string& where = check.where;
  int64_t branch = int64_t(out.nodes.size());
  Arg places;
  places.kind = Arg::Kind::IntList;
  places.ints.assign(span.places.begin(), span.places.end());
  out.nodes.push_back(marker(names.create("if"), record::kIf, where,
                             {Arg::node(to[size_t(cond)]), Arg::boolean(span.taken), Arg::boolean(!span.taken), places}));
  auto side = [&]() {
    for (int64_t i = span.begin; i < span.end; ++i)
      if (!g.nodes[size_t(i)].isInput()) keep(size_t(i));
  };
  auto sideValues = [&]() {
    std::vector<int64_t> v;
    for (int j : span.values) v.push_back(to[size_t(j)]);
    return v;
  };
  if (span.taken) side();
  out.nodes.push_back(marker(names.create("if_else"), record::kIfElse, where,
                             {Arg::node(branch), nodeList(span.taken ? sideValues() : std::vector<int64_t>{})}));
  if (!span.taken) side();
  int64_t end = int64_t(out.nodes.size());
  out.nodes.push_back(marker(names.create("if_end"), record::kIfEnd, where,
                             {Arg::node(branch), nodeList(span.taken ? std::vector<int64_t>{} : sideValues())}));
  // From here on, a variable's tensor is the branch's value (the first
  // variable that holds it), also where the side left it as it was: what
  // later nodes take through a variable depends on the side that ran.
  std::vector<bool> remapped(g.nodes.size(), false);
  for (size_t k = 0; k < span.values.size(); ++k) {
    int v = span.values[k];
    Node get = marker(names.create("getitem"), "getitem", where, {Arg::node(end), Arg::integer(int64_t(k))});
    get.outputs = g.nodes[size_t(v)].outputs;
    if (!remapped[size_t(v)]) {
      to[size_t(v)] = int64_t(out.nodes.size());
      remapped[size_t(v)] = true;
    }
    out.nodes.push_back(std::move(get));
  }
  for (size_t i = size_t(span.end); i < g.nodes.size(); ++i) keep(i);
  g = std::move(out);
  return "";
}

void nameBranchesInOrder(Graph& g) {
  auto renamed = [&](const Node& n) {
    if (record::isIfMarker(n.target)) return true;
    return n.target == "getitem" && n.args.size() == 2 && n.args[0].kind == Arg::Kind::Node &&
           g.nodes[size_t(n.args[0].i)].target == record::kIfEnd;
  };
  record::Namespace names;
  for (const Node& n : g.nodes)
    if (!renamed(n)) names.reserve(n.name);
  for (Node& n : g.nodes)
    if (renamed(n)) n.name = names.create(n.target == record::kIf ? "if" : n.target == record::kIfElse ? "if_else"
                                        : n.target == record::kIfEnd ? "if_end" : "getitem");
}

namespace {

struct Apart {
  std::string why;
};

// The if_else and if_end of the branch at `start` (regions in its sides nest).
std::pair<size_t, size_t> partsOf(const Graph& g, size_t start) {
  size_t depth = 0, otherwise = 0;
  for (size_t i = start + 1; i < g.nodes.size(); ++i) {
    const std::string& t = g.nodes[i].target;
    if (t == record::kIf || t == record::kLoop) ++depth;
    if (t == record::kIfEnd || t == record::kLoopEnd) {
      if (depth == 0) return {otherwise, i};
      --depth;
    }
    if (t == record::kIfElse && depth == 0) otherwise = i;
  }
  throw Apart{"a branch never ends"};
}

// Joins two graphs that run the same operators but in the sides of their
// branches (mergeBranches). Inputs are matched by what they read; other
// nodes in order. A value a later node takes from a branch (getitem of its
// end) is matched with the value the other graph's node takes there: the
// joined branch gives, for each side, the value of the graph that saw it.
class GraphJoin {
 public:
  GraphJoin(const Graph& a, const Graph& b) : g_{&a, &b} {
    for (int t = 0; t < 2; ++t) map_[t].assign(g_[t]->nodes.size(), -1);
    for (const Node& n : a.nodes) names_.reserve(n.name);
  }

  Graph run() {
    for (int t = 0; t < 2; ++t)
      for (const Node& n : g_[t]->nodes)
        for (const record::TensorMeta& m : n.outputs)
          if (m.dynamic()) throw Apart{"a record with dynamic sizes joins no other"};
    inputs();
    size_t i = 0, j = 0;
    sequence(i, g_[0]->nodes.size() - 1, j, g_[1]->nodes.size() - 1);
    node(g_[0]->nodes.size() - 1, g_[1]->nodes.size() - 1);  // the output
    return std::move(out_);
  }

 private:
  struct Branch {
    int64_t start = -1;                                  // its magpy.if in the joined graph
    bool seen[2][2] = {{false, false}, {false, false}};  // [graph][side]: then, else
    std::vector<int64_t> values[2][2];                   // [graph][side]: its list, as joined nodes
  };

  static std::string inputKey(const Node& n) {
    return std::string(record::toString(n.kind)) + " " + record::toString(n.source) + " " + n.number + " " +
           std::to_string(n.blob);
  }

  void inputs() {
    std::map<std::string, int64_t> byKey;
    for (int t = 0; t < 2; ++t)
      for (size_t i = 0; i < g_[t]->nodes.size(); ++i) {
        const Node& n = g_[t]->nodes[i];
        if (!n.isInput()) continue;
        auto [it, fresh] = byKey.emplace(inputKey(n), int64_t(out_.nodes.size()));
        if (!fresh && !(out_.nodes[size_t(it->second)].outputs == n.outputs))
          throw Apart{"input %" + n.name + " has other metadata"};
        map_[t][i] = it->second;
        if (fresh) emit(t, n);
      }
  }

  int64_t emit(int t, Node n) {
    n.name = t == 0 ? n.name : names_.create(n.name);
    out_.nodes.push_back(std::move(n));
    return int64_t(out_.nodes.size()) - 1;
  }

  // A getitem of a branch's end: a branch value, matched where it is used.
  bool branchValue(int t, size_t i) const {
    const Node& n = g_[t]->nodes[i];
    return n.target == "getitem" && n.args.size() == 2 && n.args[0].kind == Arg::Kind::Node &&
           g_[t]->nodes[size_t(n.args[0].i)].target == record::kIfEnd;
  }

  bool skipped(int t, size_t i) const { return g_[t]->nodes[i].isInput() || branchValue(t, i); }

  // Nodes [i, endA) of the first graph with [j, endB) of the second.
  void sequence(size_t& i, size_t endA, size_t& j, size_t endB) {
    for (;;) {
      while (i < endA && skipped(0, i)) ++i;
      while (j < endB && skipped(1, j)) ++j;
      if (i == endA && j == endB) return;
      if (i == endA || j == endB) throw Apart{"the graphs run other operators"};
      bool ifA = g_[0]->nodes[i].target == record::kIf, ifB = g_[1]->nodes[j].target == record::kIf;
      if (ifA != ifB) throw Apart{"the graphs differ at %" + g_[0]->nodes[i].name};
      if (ifA) {
        branch(i, j);
      } else {
        node(i, j);
        ++i, ++j;
      }
    }
  }

  // One graph's side alone: its nodes as they are.
  void copy(int t, size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) {
      Node n = g_[t]->nodes[i];
      record::forEachNodeArg(n, [&](int64_t& r) { r = ref(t, r); });
      map_[t][i] = emit(t, std::move(n));
    }
  }

  int64_t ref(int t, int64_t r) const {
    if (map_[t][size_t(r)] < 0) throw Apart{"%" + g_[t]->nodes[size_t(r)].name + " is used where the other graph has none"};
    return map_[t][size_t(r)];
  }

  void branch(size_t& i, size_t& j) {
    const Node *x = &g_[0]->nodes[i], *y = &g_[1]->nodes[j];
    if (ref(0, x->args[0].i) != ref(1, y->args[0].i)) throw Apart{"branch %" + x->name + " decides on another condition"};
    if (!(x->args[3] == y->args[3])) throw Apart{"the sides of branch %" + x->name + " leave tensors in other variables"};
    size_t bounds[2][3];  // per graph: its if, if_else, if_end
    bounds[0][0] = i, bounds[1][0] = j;
    std::tie(bounds[0][1], bounds[0][2]) = partsOf(*g_[0], i);
    std::tie(bounds[1][1], bounds[1][2]) = partsOf(*g_[1], j);
    Branch b;
    for (int side = 0; side < 2; ++side) {
      b.seen[0][side] = x->args[size_t(1 + side)].i != 0;
      b.seen[1][side] = y->args[size_t(1 + side)].i != 0;
    }
    Node start = *x;
    start.args = {Arg::node(ref(0, x->args[0].i)), Arg::boolean(b.seen[0][0] || b.seen[1][0]),
                  Arg::boolean(b.seen[0][1] || b.seen[1][1]), x->args[3]};
    b.start = map_[0][i] = map_[1][j] = emit(0, start);
    std::vector<int64_t> lists[2];  // per side: the joined list
    for (int side = 0; side < 2; ++side) {
      size_t a = bounds[0][side] + 1, c = bounds[1][side] + 1;
      if (b.seen[0][side] && b.seen[1][side]) sequence(a, bounds[0][side + 1], c, bounds[1][side + 1]);
      else if (b.seen[0][side]) copy(0, a, bounds[0][side + 1]);
      else if (b.seen[1][side]) copy(1, c, bounds[1][side + 1]);
      const std::vector<int64_t>* given[2] = {&g_[0]->nodes[bounds[0][side + 1]].args[1].ints,
                                              &g_[1]->nodes[bounds[1][side + 1]].args[1].ints};
      for (int t = 0; t < 2; ++t)
        if (b.seen[t][side])
          for (int64_t v : *given[t]) b.values[t][side].push_back(ref(t, v));
      if (b.seen[0][side] && b.seen[1][side]) {  // the same variables, their values joined as uses are
        if (given[0]->size() != given[1]->size()) throw Apart{"branch %" + x->name + " has other variables on its sides"};
        for (size_t k = 0; k < given[0]->size(); ++k)
          lists[side].push_back(join((*given[0])[k], (*given[1])[k], "branch %" + x->name));
      } else {
        for (int t = 0; t < 2; ++t)
          if (b.seen[t][side]) lists[side] = b.values[t][side];
      }
      Node bound = g_[0]->nodes[bounds[0][side + 1]];
      bound.args = {Arg::node(b.start), Arg()};
      bound.args[1].kind = Arg::Kind::NodeList;
      bound.args[1].ints = lists[side];
      emit(0, bound);
    }
    size_t count = std::max(lists[0].size(), lists[1].size());
    if (!lists[0].empty() && !lists[1].empty() && lists[0].size() != lists[1].size())
      throw Apart{"branch %" + x->name + " has other variables on its sides"};
    int64_t end = int64_t(out_.nodes.size()) - 1;
    for (size_t k = 0; k < count; ++k) {
      const Node& thenValue = out_.nodes[size_t(lists[0].empty() ? lists[1][k] : lists[0][k])];
      const Node& elseValue = out_.nodes[size_t(lists[1].empty() ? lists[0][k] : lists[1][k])];
      if (!(thenValue.outputs == elseValue.outputs))
        throw Apart{"the sides of branch %" + x->name + " leave tensors of other kinds in a variable"};
      Node get;
      get.name = names_.create("getitem");
      get.target = "getitem";
      get.where = x->where;
      get.args = {Arg::node(end), Arg::integer(int64_t(k))};
      get.outputs = thenValue.outputs;
      int64_t at = emit(0, std::move(get));
      valueOf_[at] = {branches_.size(), k};
    }
    for (int t = 0; t < 2; ++t)  // the graph's own getitems of the branch stand for the joined ones
      for (size_t n = bounds[t][2] + 1; n < g_[t]->nodes.size(); ++n)
        if (branchValue(t, n) && g_[t]->nodes[n].args[0].i == int64_t(bounds[t][2])) {
          size_t k = size_t(g_[t]->nodes[n].args[1].i);
          if (k >= count) throw Apart{"a getitem takes a value branch %" + x->name + " does not give"};
          map_[t][n] = end + 1 + int64_t(k);
        }
    branches_.push_back(std::move(b));
    i = bounds[0][2] + 1, j = bounds[1][2] + 1;
  }

  void node(size_t i, size_t j) {
    const Node &x = g_[0]->nodes[i], &y = g_[1]->nodes[j];
    std::string at = "%" + x.name;
    if (x.kind != y.kind || x.target != y.target || x.overload != y.overload || x.number != y.number ||
        x.grad != y.grad || !(x.outputs == y.outputs) || !(x.seen == y.seen) || x.args.size() != y.args.size())
      throw Apart{"the graphs differ at " + at};
    Node n = x;
    for (size_t k = 0; k < x.args.size(); ++k) {
      const Arg &p = x.args[k], &q = y.args[k];
      Arg& r = n.args[k];
      if (p.kind != q.kind) throw Apart{at + " takes other arguments"};
      switch (p.kind) {
        case Arg::Kind::Node: r.i = join(p.i, q.i, at); break;
        case Arg::Kind::NodeList:
        case Arg::Kind::NumberList:
          if (p.ints.size() != q.ints.size() || p.floats != q.floats) throw Apart{at + " takes other lists"};
          for (size_t e = 0; e < p.ints.size(); ++e)
            if ((p.ints[e] < 0) != (q.ints[e] < 0)) throw Apart{at + " takes other lists"};
            else if (p.ints[e] >= 0) r.ints[e] = join(p.ints[e], q.ints[e], at);
          break;
        case Arg::Kind::SizeList:
          if (p.ints.size() != q.ints.size()) throw Apart{at + " takes other sizes"};
          for (size_t e = 0; e + 1 < p.ints.size(); e += 2)
            if (p.ints[e] != q.ints[e] || (p.ints[e] == 0 && p.ints[e + 1] != q.ints[e + 1])) throw Apart{at + " takes other sizes"};
            else if (p.ints[e] == 1) r.ints[e + 1] = join(p.ints[e + 1], q.ints[e + 1], at);
          break;
        default:
          if (!(p == q)) throw Apart{at + " takes other arguments"};
      }
    }
    map_[0][i] = map_[1][j] = emit(0, std::move(n));
  }

  // The joined value node p of the first graph and q of the second take:
  // one value, or a branch's value (a variable's where its sides meet) in
  // one graph where the other takes, on the sides it saw, what that
  // variable held there.
  int64_t join(int64_t p, int64_t q, const std::string& at) {
    int64_t m[2] = {ref(0, p), ref(1, q)};
    if (m[0] == m[1]) return m[0];
    for (int t = 0; t < 2; ++t) {
      auto v = valueOf_.find(m[t]);
      if (v == valueOf_.end()) continue;
      const Branch& b = branches_[v->second.first];
      bool holds = true;
      for (int side = 0; side < 2; ++side)
        if (b.seen[1 - t][side]) holds = holds && b.values[1 - t][side].at(v->second.second) == m[1 - t];
      if (holds) return m[t];
    }
    throw Apart{at + " takes other values"};
  }

  const Graph* g_[2];
  std::vector<int64_t> map_[2];  // per graph: node -> joined node
  Graph out_;
  record::Namespace names_;
  std::vector<Branch> branches_;
  std::map<int64_t, std::pair<size_t, size_t>> valueOf_;  // a joined getitem -> (its branch, its index)
};

}  // namespace

std::string stopsCleanly(const Graph& g) {
  // Ordering moves nodes, and makes or drops no effect: a graph without
  // one (most inference graphs) needs no ordered copy.
  if (replay::firstEffect(g) == g.nodes.size()) return "";
  Graph planned = replay::planOrder(g);
  size_t effect = replay::firstEffect(planned);  // a branch there decides before its sides' effects
  for (size_t i = effect; i < planned.nodes.size(); ++i) {
    const Node& n = planned.nodes[i];
    bool check = record::isCheck(n.target) && !record::decidesOnSizesOnly(planned, n);
    bool unseen = i > effect && record::hasUnseenSide(n);
    if (check || unseen)
      return "%" + n.name + " may stop a call after " + record::nameAndSource(planned.nodes[effect]) +
             " wrote its inputs in place or drew random numbers";
  }
  return "";
}

Joined mergeBranches(const record::Record& earlier, const record::Record& later) {
  Joined out;
  try {
    if (!earlier.breaks.empty() || !later.breaks.empty()) throw Apart{"a record with graph breaks runs as Python"};
    if (!earlier.forwardOnly.empty() || !later.forwardOnly.empty()) throw Apart{"a forward-only record runs as Python"};
    if (!record::hasBranches(earlier.graph) || !record::hasBranches(later.graph)) throw Apart{"a record has no branch"};
    if (!record::sameMock(earlier.mock, later.mock)) throw Apart{"the records return or write different things"};
    record::Record r = earlier;
    // Both records' guards: two that check one path the same way must agree
    // (else no call would meet both).
    for (const record::Guard& g : later.guards) {
      auto same = std::find(r.guards.begin(), r.guards.end(), g);
      auto conflict = [&](const record::Guard& h) { return h.path == g.path && h.check.kind == g.check.kind; };
      if (same == r.guards.end() && std::any_of(r.guards.begin(), r.guards.end(), conflict))
        throw Apart{"guard " + record::toString(g) + " differs from the other record's on that path"};
      out.laterGuards.push_back(size_t(same - r.guards.begin()));
      if (same == r.guards.end()) r.guards.push_back(g);
    }
    r.graph = GraphJoin(earlier.graph, later.graph).run();
    if (std::string why = stopsCleanly(r.graph); !why.empty()) throw Apart{why};
    out.record = std::move(r);
  } catch (const Apart& a) {
    out.why = a.why;
    out.laterGuards.clear();
  }
  return out;
}

}  // namespace magpy::capture

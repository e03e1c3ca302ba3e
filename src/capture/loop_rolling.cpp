#include "capture/loop_rolling.h"

#include <map>
#include <optional>
#include <set>

#include "magpy/record/graph_utils.h"

namespace magpy::capture {
namespace {

using record::Arg;
using record::Graph;
using record::Node;

// What a node argument of an iteration refers to.
struct Ref {
  enum class Kind : uint8_t { Outer, Index, Local, Previous, Other };
  Kind kind = Kind::Other;
  int64_t at = -1;  // Outer: the node; Local, Previous: the body position
  bool operator==(const Ref& o) const { return kind == o.kind && at == o.at; }
};

// A value of the loop as the rest of the graph uses it.
struct Use {
  enum class Kind : uint8_t { Carried, Scan };
  Kind kind;
  int64_t at;  // Carried: its number; Scan: the body position
  bool operator<(const Use& o) const { return kind != o.kind ? kind < o.kind : at < o.at; }
};

class Roller {
 public:
  Roller(const Graph& g, const LoopSpan& span) : g_(g), span_(span) {}  // a copy: numberArguments() edits it

  // The rolled graph, or "" in why.
  std::string roll(Graph& out) {
    if (std::string why = iterations(); !why.empty()) return why;
    if (std::string why = numberArguments(); !why.empty()) return why;
    if (std::string why = matchIterations(); !why.empty()) return why;
    if (std::string why = usesAfter(); !why.empty()) return why;
    build(out);
    return "";
  }

 private:
  size_t count() const { return span_.starts.size(); }
  int64_t begin() const { return span_.starts.front(); }

  // Splits the span into iterations. Inputs and sizes of values from
  // before the loop that the first iteration read first are the loop's
  // invariants: they move before it.
  std::string iterations() {
    if (count() < 2) return "it ran fewer than two iterations";
    if (span_.trip < 0 || span_.trip >= begin()) return "its trip count is not computed before it";
    iterationOf_.assign(g_.nodes.size(), -1);
    position_.assign(g_.nodes.size(), -1);
    hoisted_.assign(g_.nodes.size(), false);
    body_.resize(count());
    for (size_t k = 0; k < count(); ++k) {
      int64_t from = span_.starts[k], to = k + 1 < count() ? span_.starts[k + 1] : span_.end;
      if (to <= from || to > int64_t(g_.nodes.size())) return "its iterations are out of order";
      const Node& index = g_.nodes[size_t(from)];
      if (index.target != "builtins.int" || index.args.size() != 1 || index.args[0].kind != Arg::Kind::Int ||
          index.args[0].i != int64_t(k))
        return "iteration " + std::to_string(k) + " does not begin with its index";
      iterationOf_[size_t(from)] = int(k);
      for (int64_t i = from + 1; i < to; ++i) {
        const Node& n = g_.nodes[size_t(i)];
        if (k == 0 && invariant(n)) {
          hoisted_[size_t(i)] = true;
          continue;
        }
        if (n.isInput()) return "iteration " + std::to_string(k) + " reads state no iteration before it read";
        if (n.kind != record::NodeKind::CallFunction) return "a " + std::string(toString(n.kind)) + " node is in it";
        if (record::isCheck(n.target)) return "it decides on a value it computes (" + record::nameAndSource(n) + ")";
        if (record::isRegionMarker(n.target)) return "it holds another loop or a branch";
        iterationOf_[size_t(i)] = int(k);
        position_[size_t(i)] = int(body_[k].size());
        body_[k].push_back(i);
      }
      if (body_[k].size() != body_[0].size())
        return "iteration " + std::to_string(k) + " records " + std::to_string(body_[k].size()) +
               " operators and the first " + std::to_string(body_[0].size());
    }
    return "";
  }

  bool outer(int64_t r) const { return r < begin() || hoisted_[size_t(r)]; }

  // Where an iteration passed its index (or a number computed from it)
  // as a number equal to another of the operator's (select(x, 0, t) at
  // t = 0; x[:, t] at t = 1), the monitor could not tell which it was and
  // recorded a constant. An argument that is that number in some
  // iteration and equal to its value in each other one is that number in
  // all: the program's numbers are the same in every iteration unless the
  // graph computes them. Each such number must then be used.
  std::string numberArguments() {
    for (size_t q = 0; q < body_[0].size(); ++q)
      for (size_t j = 0; j < g_.nodes[size_t(body_[0][q])].args.size(); ++j) numberArgument(q, j);
    for (int u : span_.untaken) {
      size_t k = 0;
      while (k + 1 < count() && span_.starts[k + 1] <= u) ++k;
      bool used = false;
      for (int64_t i : body_[k])
        record::forEachNodeArg(g_.nodes[size_t(i)], [&](int64_t r) { used = used || r == u; });
      if (!used) return "a number computed from its index is used where the graph cannot compute with it";
    }
    return "";
  }

  void numberArgument(size_t q, size_t j) {
    auto arg = [&](size_t k) {
      auto& args = g_.nodes[size_t(body_[k][q])].args;
      return j < args.size() ? &args[j] : nullptr;
    };
    Ref number;  // the index, or the body position of a number computed from it
    for (size_t k = 0; k < count() && number.kind == Ref::Kind::Other; ++k) {
      if (!arg(k) || arg(k)->kind != Arg::Kind::Node) continue;
      Ref r = refOf(arg(k)->i, k);
      bool computed = r.kind == Ref::Kind::Local && !g_.nodes[size_t(body_[k][size_t(r.at)])].number.empty();
      if (r.kind == Ref::Kind::Index || computed) number = r;
    }
    if (number.kind == Ref::Kind::Other) return;
    auto node = [&](size_t k) { return number.kind == Ref::Kind::Index ? span_.starts[k] : body_[k][size_t(number.at)]; };
    auto value = [&](size_t k) -> std::optional<int64_t> {
      if (number.kind == Ref::Kind::Index) return int64_t(k);
      const record::Atom& seen = g_.nodes[size_t(node(k))].seen;
      return seen.kind == record::Atom::Kind::Int ? std::optional<int64_t>(seen.i) : std::nullopt;
    };
    // A constant where the number has another value: the program passed
    // that constant in every iteration, and an operator took the number
    // for it where their values met (slice(x, 0, 0, end, 1) at t = 1).
    std::optional<int64_t> constant;
    for (size_t k = 0; k < count() && !constant; ++k)
      if (arg(k) && arg(k)->kind == Arg::Kind::Int && value(k) != arg(k)->i) constant = arg(k)->i;
    for (size_t k = 0; k < count(); ++k) {
      Arg* a = arg(k);
      if (!a) continue;
      if (constant && a->kind == Arg::Kind::Node && a->i == node(k) && value(k) == constant) *a = Arg::integer(*constant);
      if (!constant && a->kind == Arg::Kind::Int && value(k) == a->i) *a = Arg::node(node(k));
    }
  }

  bool invariant(const Node& n) const {
    if (n.isInput()) return true;
    bool size = n.target == "aten::size" && !n.args.empty() && n.args[0].kind == Arg::Kind::Node;
    return size && outer(n.args[0].i);
  }

  Ref refOf(int64_t r, size_t k) const {
    if (r < 0 || r >= int64_t(g_.nodes.size())) return {};
    if (outer(r)) return {Ref::Kind::Outer, r};
    if (r == span_.starts[k]) return {Ref::Kind::Index, -1};
    int it = iterationOf_[size_t(r)];
    if (it < 0 || position_[size_t(r)] < 0) return {};
    if (size_t(it) == k) return {Ref::Kind::Local, position_[size_t(r)]};
    if (size_t(it) + 1 == k) return {Ref::Kind::Previous, position_[size_t(r)]};
    return {};
  }

  // The node with its references cleared: what iterations must share.
  static Node shape(Node n) {
    record::forEachNodeArg(n, [](int64_t& r) { r = 0; });
    n.name.clear();
    n.seen = record::Atom();  // an index's arithmetic sees another value in each iteration
    return n;
  }

  static std::vector<int64_t> refsOf(const Node& n) {
    std::vector<int64_t> refs;
    record::forEachNodeArg(n, [&](int64_t r) { refs.push_back(r); });
    return refs;
  }

  // Reference j of the body's node at position q in iteration k, against
  // the same reference in the first iteration.
  bool sameRef(size_t q, size_t j, int64_t first, int64_t r, size_t k) {
    Ref f = refOf(first, 0), now = refOf(r, k);
    if (f.kind == Ref::Kind::Other || now.kind == Ref::Kind::Other) return false;
    int& slot = carriedAt_[q][j];
    if (k == 1 && f.kind == Ref::Kind::Outer && now.kind == Ref::Kind::Previous) {
      // A carried value: the same value before the loop, then the same
      // position of the iteration before in every later iteration.
      auto [it, added] = carriedByPair_.emplace(std::make_pair(f.at, now.at), int(carried_.size()));
      if (added) carried_.push_back({f.at, now.at});
      slot = it->second;
      return true;
    }
    if (slot >= 0) return now.kind == Ref::Kind::Previous && now.at == carried_[size_t(slot)].second;
    return f == now;
  }

  std::string matchIterations() {
    carriedAt_.resize(body_[0].size());
    for (size_t q = 0; q < body_[0].size(); ++q) carriedAt_[q].assign(refsOf(g_.nodes[size_t(body_[0][q])]).size(), -1);
    for (size_t k = 1; k < count(); ++k)
      for (size_t q = 0; q < body_[0].size(); ++q) {
        const Node& first = g_.nodes[size_t(body_[0][q])];
        const Node& n = g_.nodes[size_t(body_[k][q])];
        Node a = shape(first), b = shape(n);
        bool same = a.target == b.target && a.overload == b.overload && a.number == b.number && a.grad == b.grad &&
                    a.where == b.where && a.outputs == b.outputs && a.args == b.args;
        std::vector<int64_t> r0 = refsOf(first), rk = refsOf(n);
        same = same && r0.size() == rk.size();
        for (size_t j = 0; same && j < rk.size(); ++j) same = sameRef(q, j, r0[j], rk[j], k);
        if (!same)
          return "iteration " + std::to_string(k) + " differs from the first at " + record::nameAndSource(first);
      }
    for (auto& [init, next] : carried_)
      if (!g_.nodes[size_t(init)].number.empty()) return "it carries a number from one iteration to the next";
    return "";
  }

  // After the loop: the last iteration's carried values and whole scans.
  std::string usesAfter() {
    size_t last = count() - 1;
    for (int64_t i = span_.end; i < int64_t(g_.nodes.size()); ++i) {
      const Node& n = g_.nodes[size_t(i)];
      bool ok = true;
      for (const Arg& a : n.args)
        if (a.kind == Arg::Kind::NodeList && scanOf(a) >= 0) {
          if (n.kind == record::NodeKind::Output) return "the list it appended to is a result of the call";
        } else {
          Node one;
          one.args = {a};
          record::forEachNodeArg(one, [&](int64_t r) { ok = ok && useAfter(r, last); });
        }
      for (const record::TensorMeta& m : n.outputs)
        for (const auto& d : m.sym) ok = ok && (d.node < 0 || useAfter(d.node, last));
      if (!ok) return whyNot(n);
    }
    return "";
  }

  static std::string whyNot(const Node& n) {
    return record::nameAndSource(n) + " after it uses a value of one iteration that it does not carry";
  }

  bool useAfter(int64_t r, size_t last) {
    if (r < begin() || hoisted_[size_t(r)] || r >= span_.end) return true;
    Ref ref = refOf(r, last);
    if (ref.kind != Ref::Kind::Local) return false;
    for (size_t j = 0; j < carried_.size(); ++j)
      if (carried_[j].second == ref.at) {
        uses_.insert({Use::Kind::Carried, int64_t(j)});
        return true;
      }
    return false;
  }

  // The body position whose values the list holds, one per iteration in
  // order; -1 if it is no such list.
  int64_t scanOf(const Arg& a) {
    if (a.ints.size() != count() || a.ints.empty() || a.ints[0] < 0) return -1;
    Ref first = refOf(a.ints[0], 0);
    if (first.kind != Ref::Kind::Local) return -1;
    for (size_t k = 1; k < count(); ++k)
      if (a.ints[k] < 0 || !(refOf(a.ints[k], k) == first)) return -1;
    uses_.insert({Use::Kind::Scan, first.at});
    return first.at;
  }

  void build(Graph& out) {
    record::Namespace names;
    for (const Node& n : g_.nodes) names.reserve(n.name);
    to_.assign(g_.nodes.size(), -1);
    out.nodes.clear();
    auto keep = [&](int64_t i) {
      to_[size_t(i)] = int64_t(out.nodes.size());
      out.nodes.push_back(g_.nodes[size_t(i)]);
    };
    for (int64_t i = 0; i < begin(); ++i) keep(i);
    for (int64_t i = begin(); i < span_.end; ++i)
      if (hoisted_[size_t(i)]) keep(i);
    for (Node& n : out.nodes) record::forEachNodeArg(n, [&](int64_t& r) { r = to_[size_t(r)]; });

    const std::string& where = g_.nodes[size_t(begin())].where;
    int64_t loop = int64_t(out.nodes.size());
    Node loopNode = marker(names.create("loop"), record::kLoop, where);
    loopNode.args = {Arg::node(to_[size_t(span_.trip)]), nodeList({})};
    for (auto& [init, next] : carried_) loopNode.args[1].ints.push_back(to_[size_t(init)]);
    loopNode.number = "int";
    out.nodes.push_back(std::move(loopNode));
    for (size_t j = 0; j < carried_.size(); ++j) {
      Node c = marker(names.create("carried"), record::kCarried, where);
      c.args = {Arg::node(loop), Arg::integer(int64_t(j))};
      c.outputs = g_.nodes[size_t(carried_[j].first)].outputs;
      out.nodes.push_back(std::move(c));
    }
    int64_t bodyStart = int64_t(out.nodes.size());
    for (size_t q = 0; q < body_[0].size(); ++q) out.nodes.push_back(bodyNode(q, loop, bodyStart));

    int64_t end = int64_t(out.nodes.size());
    Node endNode = marker(names.create("loop_end"), record::kLoopEnd, where);
    endNode.args = {Arg::node(loop), nodeList({}), nodeList({})};
    for (auto& [init, next] : carried_) endNode.args[1].ints.push_back(bodyStart + next);
    for (const Use& u : uses_)
      if (u.kind == Use::Kind::Scan) endNode.args[2].ints.push_back(bodyStart + u.at);
    out.nodes.push_back(std::move(endNode));
    int64_t scanNumber = int64_t(carried_.size());
    for (const Use& u : uses_) {
      Node get = marker(names.create("getitem"), "getitem", where);
      get.args = {Arg::node(end), Arg::integer(u.kind == Use::Kind::Carried ? u.at : scanNumber++)};
      if (u.kind == Use::Kind::Carried)
        get.outputs = g_.nodes[size_t(body_.back()[size_t(carried_[size_t(u.at)].second)])].outputs;
      useNode_[u] = int64_t(out.nodes.size());
      out.nodes.push_back(std::move(get));
    }
    for (int64_t i = span_.end; i < int64_t(g_.nodes.size()); ++i) {
      keep(i);
      remapAfter(out.nodes.back());
    }
  }

  static Arg nodeList(std::vector<int64_t> ints) {
    Arg a;
    a.kind = Arg::Kind::NodeList;
    a.ints = std::move(ints);
    return a;
  }

  static Node marker(std::string name, const char* target, const std::string& where) {
    Node n;
    n.name = std::move(name);
    n.target = target;
    n.where = where;
    return n;
  }

  // The first iteration's node at body position q as the body's: the
  // carried value where it read a value from before the loop that later
  // iterations read from the iteration before.
  Node bodyNode(size_t q, int64_t loop, int64_t bodyStart) const {
    Node b = g_.nodes[size_t(body_[0][q])];
    size_t j = 0;
    record::forEachNodeArg(b, [&](int64_t& r) {
      Ref ref = refOf(r, 0);
      int carried = carriedAt_[q][j++];
      if (carried >= 0) r = loop + 1 + carried;
      else if (ref.kind == Ref::Kind::Index) r = loop;
      else if (ref.kind == Ref::Kind::Local) r = bodyStart + ref.at;
      else r = to_[size_t(r)];
    });
    return b;
  }

  // A node after the loop: scans become their getitem, and other uses of
  // the body the last iteration's carried values.
  void remapAfter(Node& n) {
    for (Arg& a : n.args) {
      if (int64_t scan = a.kind == Arg::Kind::NodeList ? scanOf(a) : -1; scan >= 0) {
        a = Arg::node(useNode_.at({Use::Kind::Scan, scan}));
        continue;
      }
      Node one;
      one.args = {std::move(a)};
      record::forEachNodeArg(one, [&](int64_t& r) { r = afterRef(r); });
      a = std::move(one.args[0]);
    }
    for (record::TensorMeta& m : n.outputs)
      for (auto& d : m.sym)
        if (d.node >= 0) d.node = int32_t(afterRef(d.node));
  }

  int64_t afterRef(int64_t r) const {
    if (r < begin() || hoisted_[size_t(r)] || r >= span_.end) return to_[size_t(r)];
    Ref ref = refOf(r, count() - 1);
    for (size_t j = 0; j < carried_.size(); ++j)
      if (carried_[j].second == ref.at) return useNode_.at({Use::Kind::Carried, int64_t(j)});
    return -1;  // usesAfter() admitted none
  }

  Graph g_;
  const LoopSpan& span_;
  std::vector<int> iterationOf_;   // by node: its iteration, or -1
  std::vector<int> position_;      // by node: its position in its iteration's body
  std::vector<bool> hoisted_;      // by node: an invariant of the first iteration, moved before the loop
  std::vector<std::vector<int64_t>> body_;  // per iteration: its nodes, index excluded
  std::vector<std::pair<int64_t, int64_t>> carried_;  // (value before the loop, body position of the next)
  std::vector<std::vector<int>> carriedAt_;  // per body position, per reference: its carried value, or -1
  std::map<std::pair<int64_t, int64_t>, int> carriedByPair_;
  std::set<Use> uses_;
  std::map<Use, int64_t> useNode_;  // its getitem node
  std::vector<int64_t> to_;         // by node of the unrolled graph: its node in the rolled one
};

}  // namespace

std::string rollLoop(record::Graph& g, const LoopSpan& span) {
  Roller roller(g, span);
  record::Graph out;
  std::string why = roller.roll(out);
  if (why.empty()) g = std::move(out);
  return why;
}

}  // namespace magpy::capture

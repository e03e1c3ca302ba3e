#include <gtest/gtest.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/neg.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/scalar_tensor.h>

#include "capture/branches.h"
#include "magpy/record/graph_utils.h"
#include "magpy/replay/passes.h"
#include "magpy/replay/plan.h"
#include "sample.h"

namespace magpy {
namespace {

using capture::BranchSpan;
using record::Arg;
using record::Graph;
using record::Node;

// What the monitor records of
//   if c1: x = relu(x)
//   if c2: x = x * 2
//   return -x
// at a call that took the sides `took`: after each condition, the check
// of it, then the side that ran; where the sides meet, x, c1 and c2 hold
// the branch's values.
struct Trace {
  Graph graph;
  std::vector<BranchSpan> spans;
};

Trace trace(bool took1, bool took2) {
  using sample::opNode;
  Trace t;
  auto& nodes = t.graph.nodes;
  auto add = [&](Node n) {
    n.outputs = {sample::meta({3}, {1})};
    nodes.push_back(std::move(n));
    return int(nodes.size() - 1);
  };
  auto input = [&](const char* name, int64_t index) {
    Node n;
    n.kind = record::NodeKind::Placeholder;
    n.name = n.target = name;
    n.source = record::AccessPath::arg(index);
    return add(n);
  };
  int x = input("x", 0), c[2] = {input("c1", 1), input("c2", 2)};
  bool took[2] = {took1, took2};
  for (int k = 0; k < 2; ++k) {
    Node seen;
    seen.kind = record::NodeKind::GetAttr;
    seen.name = seen.target = "seen_" + std::to_string(k);
    seen.blob = 0;
    int s = add(seen);
    BranchSpan span;
    span.check = add(opNode("check_" + std::to_string(k), record::kExpectEqual, "", {Arg::node(c[k]), Arg::node(s)}));
    span.taken = took[k];
    span.begin = int(nodes.size());
    if (took[k] && k == 0) x = add(opNode("relu", "aten::relu", "", {Arg::node(x)}));
    if (took[k] && k == 1) x = add(opNode("mul", "aten::mul", "Scalar", {Arg::node(x), Arg::floating(2)}));
    span.end = int(nodes.size());
    span.places = {0, 1, 2};
    span.values = {x, c[0], c[1]};
    t.spans.push_back(span);
  }
  int neg = add(opNode("neg", "aten::neg", "", {Arg::node(x)}));
  nodes.push_back(sample::output({Arg::node(neg)}));
  return t;
}

// The graph the record builder makes of a trace: its branches, the latest
// first, then dead code removed.
Graph branched(Trace t) {
  for (size_t k = t.spans.size(); k-- > 0;) EXPECT_EQ(capture::makeBranch(t.graph, t.spans[k]), "");
  replay::eliminateDeadCode(t.graph);
  return t.graph;
}

record::Record recordOf(Graph g) {
  record::Record r;
  r.graph = std::move(g);
  return r;
}

at::Tensor eager(const at::Tensor& x, bool c1, bool c2) {
  at::Tensor y = c1 ? x.relu() : x;
  return (c2 ? y.mul(2) : y).neg();
}

std::vector<c10::IValue> call(const at::Tensor& x, bool c1, bool c2) {
  return {x, at::scalar_tensor(c1, at::kBool), at::scalar_tensor(c2, at::kBool)};
}

// A branch keeps the side capture saw and leaves the other unseen: calls
// on that side run it, the others miss the record as the check did.
TEST(Branches, ChecksBecomeBranchesWithTheSideTheRunTook) {
  Graph g = branched(trace(true, false));
  std::string text;
  for (auto& n : g.nodes)
    if (n.target == record::kIf) text += n.args[1].i ? "then " : "else ";
  EXPECT_EQ(text, "then else ");
  for (auto& n : g.nodes) EXPECT_FALSE(record::isCheck(n.target)) << n.name;
  replay::Plan plan(g, {});
  at::Tensor x = at::randn({3});
  EXPECT_TRUE(at::equal(plan.runWith(call(x, true, false))[0].toTensor(), eager(x, true, false)));
  for (auto [c1, c2] : {std::pair{false, false}, std::pair{true, true}}) {
    try {
      plan.runWith(call(x, c1, c2));
      ADD_FAILURE() << "an unseen side ran";
    } catch (const replay::SizeMismatch& e) {
      EXPECT_TRUE(e.decidedOtherwise);
    }
  }
}

// Two records that took other sides join into one whose branches have
// both: it runs every combination, those no capture ran included, and
// the value a variable kept through a side is the one the other side's
// record would pass on.
TEST(Branches, JoinedRecordsRunEveryCombinationOfSides) {
  capture::Joined j = capture::mergeBranches(recordOf(branched(trace(true, false))), recordOf(branched(trace(false, true))));
  ASSERT_TRUE(j.record) << j.why;
  for (auto& n : j.record->graph.nodes)
    if (n.target == record::kIf) {
      EXPECT_TRUE(n.args[1].i && n.args[2].i) << n.name;
    }
  replay::Plan plan(j.record->graph, {});
  at::Tensor x = at::randn({3});
  for (bool c1 : {false, true})
    for (bool c2 : {false, true})
      EXPECT_TRUE(at::equal(plan.runWith(call(x, c1, c2))[0].toTensor(), eager(x, c1, c2))) << c1 << c2;
  // Joined again with a third run: nothing new, the same record.
  capture::Joined again = capture::mergeBranches(*j.record, recordOf(branched(trace(true, true))));
  ASSERT_TRUE(again.record) << again.why;
  EXPECT_EQ(again.record->graph.nodes.size(), j.record->graph.nodes.size());
}

// Records that differ otherwise stay apart: other operators, another
// result, a guard that checks a path otherwise.
TEST(Branches, RecordsThatDifferOutsideTheirSidesStayApart) {
  record::Record a = recordOf(branched(trace(true, false)));
  record::Record b = recordOf(branched(trace(false, true)));
  record::Record other = b;
  for (auto& n : other.graph.nodes)
    if (n.target == "aten::neg") n.target = "aten::relu";
  EXPECT_FALSE(capture::mergeBranches(a, other).record);
  record::Guard g;
  g.path = record::AccessPath::arg(3);
  g.check.kind = record::Check::Kind::Equals;
  g.check.atom = record::Atom::integer(1);
  a.guards.push_back(g);
  g.check.atom = record::Atom::integer(2);
  b.guards.push_back(g);
  capture::Joined j = capture::mergeBranches(a, b);
  EXPECT_FALSE(j.record);
  EXPECT_NE(j.why.find("differs from the other record's"), std::string::npos) << j.why;
  b.guards.back().path = record::AccessPath::arg(4);
  j = capture::mergeBranches(a, b);
  ASSERT_TRUE(j.record) << j.why;
  EXPECT_EQ(j.record->guards.size(), 2u);
  EXPECT_EQ(j.laterGuards, std::vector<size_t>{1});
}

// A side whose value later nodes take otherwise than through a variable,
// or a branch after the graph's first effect, stays a check.
TEST(Branches, SidesSeenOtherwiseStayChecks) {
  Trace t = trace(true, false);
  BranchSpan hidden = t.spans[0];
  hidden.values = {0, 1, 2};  // x no longer holds relu's value, but neg takes it
  Graph g = t.graph;
  EXPECT_EQ(capture::makeBranch(g, t.spans[0]), "");
  Graph h = t.graph;
  EXPECT_NE(capture::makeBranch(h, hidden), "");
  Graph written = t.graph;
  written.nodes[3] = sample::opNode("relu_", "aten::relu_", "", {Arg::node(0)});  // an effect before the first check
  written.nodes[3].outputs = {sample::meta({3}, {1})};
  EXPECT_NE(capture::makeBranch(written, t.spans[0]), "");
}

}  // namespace
}  // namespace magpy

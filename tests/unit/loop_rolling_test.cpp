#include <gtest/gtest.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/stack.h>

#include "capture/loop_rolling.h"
#include "magpy/record/graph_utils.h"
#include "magpy/replay/plan.h"
#include "sample.h"

namespace magpy {
namespace {

using capture::LoopSpan;
using capture::rollLoop;
using record::Arg;
using record::Graph;
using record::Node;

// What the monitor records of
//   for t in range(x.size(0)): h = (h + x[t]) * 2; ys.append(h)
//   return h, torch.stack(ys)
// over `rows` rows: each iteration starts with its index builtins.int(t);
// the first reads self.w (an input that belongs before the loop).
struct Unrolled {
  Graph graph;
  LoopSpan span;
  std::vector<int64_t> last;  // per iteration: its h
};

Unrolled unrolled(int rows, bool scaleFirstOnly = false) {
  using sample::opNode;
  Unrolled u;
  auto& nodes = u.graph.nodes;
  auto add = [&](Node n) {
    nodes.push_back(std::move(n));
    return int64_t(nodes.size() - 1);
  };
  Node x;
  x.kind = record::NodeKind::Placeholder;
  x.name = x.target = "x";
  x.source = record::AccessPath::arg(0);
  int64_t xs = add(x);
  Node h0 = x;
  h0.name = h0.target = "h0";
  h0.source = record::AccessPath::arg(1);
  int64_t h = add(h0);
  u.span.trip = int(add(opNode("size", "aten::size", "int", {Arg::node(xs), Arg::integer(0)})));
  for (int t = 0; t < rows; ++t) {
    Node index = opNode("int_" + std::to_string(t), "builtins.int", "", {Arg::integer(t)});
    index.number = "int";
    int64_t i = add(index);
    u.span.starts.push_back(int(i));
    int64_t row = add(opNode("select_" + std::to_string(t), "aten::select", "int", {Arg::node(xs), Arg::integer(0), Arg::node(i)}));
    int64_t sum = add(opNode("add_" + std::to_string(t), "aten::add", "Tensor", {Arg::node(h), Arg::node(row), Arg::integer(1)}));
    double scale = scaleFirstOnly && t > 0 ? 3 : 2;
    h = add(opNode("mul_" + std::to_string(t), "aten::mul", "Scalar", {Arg::node(sum), Arg::floating(scale)}));
    u.last.push_back(h);
  }
  u.span.end = int(nodes.size());
  Node stack = opNode("stack", "aten::stack", "", {Arg::none(), Arg::integer(0)});
  stack.args[0].kind = Arg::Kind::NodeList;
  stack.args[0].ints = u.last;
  int64_t ys = add(stack);
  add(sample::output({Arg::node(h), Arg::node(ys)}));
  return u;
}

std::vector<c10::IValue> run(const Graph& g, const at::Tensor& x, const at::Tensor& h0) {
  return replay::Plan(g, {}).runWith({x, h0});
}

TEST(LoopRolling, RolledLoopsEqualTheUnrolledGraphAndRunAnyLength) {
  Unrolled u = unrolled(4);
  Graph rolled = u.graph;
  ASSERT_EQ(rollLoop(rolled, u.span), "");
  EXPECT_TRUE(record::hasLoops(rolled));
  EXPECT_EQ(rolled.numOps(), 5u) << "one body: size, select, add, mul, stack";
  at::Tensor x = at::randn({4, 3}), h0 = at::randn({3});
  auto want = run(u.graph, x, h0), got = run(rolled, x, h0);
  EXPECT_TRUE(at::equal(want[0].toTensor(), got[0].toTensor()));
  EXPECT_TRUE(at::equal(want[1].toTensor(), got[1].toTensor()));
  for (int64_t rows : {1, 9}) {  // lengths no capture saw
    at::Tensor xr = at::randn({rows, 3});
    auto out = run(rolled, xr, h0);
    at::Tensor hr = h0;
    std::vector<at::Tensor> ys;
    for (int64_t t = 0; t < rows; ++t) ys.push_back(hr = hr.add(xr.select(0, t)).mul(2));
    EXPECT_TRUE(at::equal(out[0].toTensor(), hr)) << rows;
    EXPECT_TRUE(at::equal(out[1].toTensor(), at::stack(ys))) << rows;
  }
}

TEST(LoopRolling, LoopsThatDifferOrLeakStayUnrolled) {
  auto why = [](Unrolled u) {
    Graph g = u.graph;
    std::string reason = rollLoop(g, u.span);
    EXPECT_EQ(g.nodes.size(), u.graph.nodes.size()) << "a loop that does not roll leaves the graph as it was";
    return reason;
  };
  EXPECT_NE(why(unrolled(1)).find("fewer than two iterations"), std::string::npos);
  EXPECT_NE(why(unrolled(3, true)).find("iteration 1 differs from the first at %mul_0"), std::string::npos)
      << why(unrolled(3, true));

  Unrolled middle = unrolled(3);  // the second iteration's h used after the loop
  middle.graph.nodes.back().args[0] = Arg::node(middle.last[1]);
  EXPECT_NE(why(middle).find("does not carry"), std::string::npos);

  Unrolled partial = unrolled(3);  // torch.stack(ys[1:])
  auto& list = partial.graph.nodes[size_t(partial.span.end)].args[0].ints;
  list.erase(list.begin());
  EXPECT_NE(why(partial).find("does not carry"), std::string::npos);

  Unrolled returned = unrolled(3);  // the list itself as the call's result
  Arg all;
  all.kind = Arg::Kind::NodeList;
  all.ints = returned.last;
  returned.graph.nodes.back().args[1] = all;
  EXPECT_NE(why(returned).find("is a result of the call"), std::string::npos);

  Unrolled skipped = unrolled(3);  // an iteration whose index node is missing
  skipped.span.starts[1] += 1;
  EXPECT_NE(why(skipped).find("does not begin with its index"), std::string::npos);

  Unrolled state = unrolled(3);  // a later iteration reads state first: the unrolled graph is not one body
  Node input = state.graph.nodes[1];
  input.name = "late";
  state.graph.nodes[size_t(state.span.starts[2]) + 1].args[0] = Arg::node(0);
  state.graph.nodes.insert(state.graph.nodes.begin() + state.span.starts[2] + 1, input);
  for (auto& n : state.graph.nodes)
    record::forEachNodeArg(n, [&](int64_t& r) { r += r > state.span.starts[2] ? 1 : 0; });
  state.span.end += 1;
  EXPECT_NE(why(state).find("reads state no iteration before it read"), std::string::npos);

  Unrolled check = unrolled(3);  // a decision in the body
  check.graph.nodes[size_t(check.span.starts[0]) + 2].target = record::kExpectTrue;
  EXPECT_NE(why(check).find("decides on a value it computes"), std::string::npos);
}

// Inputs and sizes the first iteration read first move before the loop;
// a value that every iteration reads as it was before the loop stays outer
// even where another argument carries it.
TEST(LoopRolling, FirstReadsMoveBeforeTheLoop) {
  Unrolled u = unrolled(3);
  Graph& g = u.graph;
  // the first iteration reads self.w, then every iteration adds it: h = (h + x[t]) * 2 + w
  Node w = g.nodes[1];
  w.kind = record::NodeKind::GetAttr;
  w.name = w.target = "w";
  w.source = record::AccessPath::self();
  g.nodes.insert(g.nodes.begin() + u.span.starts[0] + 1, w);
  int64_t wAt = u.span.starts[0] + 1;
  for (auto& n : g.nodes) record::forEachNodeArg(n, [&](int64_t& r) { r += r >= wAt ? 1 : 0; });
  for (size_t k = 1; k < u.span.starts.size(); ++k) u.span.starts[k] += 1;
  u.span.end += 1;
  for (auto& l : u.last) l += 1;
  // each iteration's mul then adds w and h0 (h0 is also the carried value's start)
  Graph out;
  std::vector<int64_t> to(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    to[i] = int64_t(out.nodes.size());
    Node n = g.nodes[i];
    record::forEachNodeArg(n, [&](int64_t& r) { r = to[size_t(r)]; });
    out.nodes.push_back(n);
    if (n.target == "aten::mul") {
      out.nodes.push_back(sample::opNode(n.name + "_w", "aten::add", "Tensor", {Arg::node(to[i]), Arg::node(to[size_t(wAt)]), Arg::integer(1)}));
      out.nodes.push_back(sample::opNode(n.name + "_h0", "aten::add", "Tensor", {Arg::node(int64_t(out.nodes.size() - 1)), Arg::node(1), Arg::integer(1)}));
      to[i] = int64_t(out.nodes.size() - 1);
    }
  }
  LoopSpan span = u.span;
  span.trip = int(to[size_t(span.trip)]);
  // starts shift by two nodes per earlier iteration
  for (size_t k = 0; k < span.starts.size(); ++k) span.starts[k] += int(2 * k);
  span.end += int(2 * span.starts.size());
  Graph rolled = out;
  ASSERT_EQ(rollLoop(rolled, span), "");
  size_t loop = 0;
  while (rolled.nodes[loop].target != record::kLoop) ++loop;
  EXPECT_EQ(rolled.nodes[loop - 1].name, "w") << "the first read of self.w comes before the loop";
  at::Tensor x = at::randn({3, 3}), h0 = at::randn({3}), wv = at::randn({3});
  auto want = replay::Plan(out, {}).runWith({x, h0, wv});
  auto got = replay::Plan(rolled, {}).runWith({x, h0, wv});
  EXPECT_TRUE(at::equal(want[0].toTensor(), got[0].toTensor()));
  EXPECT_TRUE(at::equal(want[1].toTensor(), got[1].toTensor()));
}

}  // namespace
}  // namespace magpy

namespace magpy {
namespace {

// select(x, 0, t) at t = 0 passes 0 twice: the monitor records a constant
// where the index was. Where a later iteration shows the index, the
// constant equal to the index is the index; where an operator took the
// index for a constant it only met once (slice's step of 1 at t = 1), the
// constant is kept; any other constant keeps the loop unrolled.
TEST(LoopRolling, IndicesRecordedAsConstantsAreFoundAgain) {
  auto rolledEqual = [](Unrolled u) {
    Graph rolled = u.graph;
    std::string why = rollLoop(rolled, u.span);
    if (!why.empty()) return why;
    at::Tensor x = at::randn({int64_t(u.span.starts.size()), 3}), h0 = at::randn({3});
    auto want = replay::Plan(u.graph, {}).runWith({x, h0});
    auto got = replay::Plan(rolled, {}).runWith({x, h0});
    return at::equal(want[1].toTensor(), got[1].toTensor()) ? std::string() : std::string("differs from unrolled");
  };
  auto select = [](Unrolled& u, size_t k) -> Node& { return u.graph.nodes[size_t(u.span.starts[k]) + 1]; };

  Unrolled first = unrolled(4);
  select(first, 0).args[2] = Arg::integer(0);
  EXPECT_EQ(rolledEqual(first), "");

  // iteration 1's index taken for add's alpha of 1, its select index a constant
  Unrolled misTaken = unrolled(4);
  select(misTaken, 1).args[2] = Arg::integer(1);
  misTaken.graph.nodes[size_t(misTaken.span.starts[1]) + 2].args[2] = Arg::node(misTaken.span.starts[1]);
  misTaken.span.untaken.push_back(misTaken.span.starts[1]);
  EXPECT_EQ(rolledEqual(misTaken), "") << "alpha is 1 in every other iteration: a constant; the index of 1 is select's";

  Unrolled other = unrolled(4);  // a constant that is not the index's value
  select(other, 2).args[2] = Arg::integer(7);
  EXPECT_NE(rolledEqual(other).find("iteration 2 differs"), std::string::npos);

  Unrolled unused = unrolled(3);  // an index no operator takes in the end
  select(unused, 1).args[2] = Arg::integer(1);
  select(unused, 0).args[2] = Arg::integer(0);
  select(unused, 2).args[2] = Arg::integer(2);
  unused.span.untaken.push_back(unused.span.starts[1]);
  Graph h = unused.graph;
  EXPECT_NE(rollLoop(h, unused.span).find("computed from its index is used where the graph cannot"), std::string::npos);
}

}  // namespace
}  // namespace magpy

namespace magpy {
namespace {

// return torch.stack(ys) alone: the list holds the carried value's next
// in every iteration, and nothing after the loop uses h itself.
TEST(LoopRolling, ScansOfCarriedValuesNeedNotUseThemAfter) {
  Unrolled u = unrolled(4);
  u.graph.nodes.back().args = {Arg::node(u.span.end)};
  Graph rolled = u.graph;
  ASSERT_EQ(rollLoop(rolled, u.span), "");
  at::Tensor x = at::randn({4, 3}), h0 = at::randn({3});
  EXPECT_TRUE(at::equal(run(u.graph, x, h0)[0].toTensor(), run(rolled, x, h0)[0].toTensor()));
}

}  // namespace
}  // namespace magpy

// The compiled backend of a plan (src/replay/compiled_graph.*): lowering,
// the first call's check against operator-by-operator replay, frozen state,
// fallbacks, and the operator profile.
#include <gtest/gtest.h>

#include <ATen/ops/add.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/batch_norm.h>
#include <ATen/ops/conv2d.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/sub.h>

#include "magpy/replay/guards.h"
#include "magpy/replay/plan.h"
#include "magpy/replay/profile.h"
#include "magpy/support/error.h"
#include "replay/page_out.h"
#include "sample.h"

using namespace magpy;
using namespace magpy::record;
using sample::opNode;
using sample::output;

namespace {

Node input(NodeKind kind, const std::string& name, AccessPath source, std::vector<int64_t> shape) {
  Node n;
  n.kind = kind;
  n.name = n.target = name;
  n.source = std::move(source);
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  n.outputs = {sample::meta(shape, strides)};
  return n;
}

replay::PlanOptions compiled(replay::Backend backend = replay::Backend::Compiled) {
  replay::PlanOptions o;
  o.inference = true;
  o.backend = backend;
  return o;
}

std::string lines(const replay::Plan& plan) {
  std::string out;
  for (auto& l : plan.optimizations()) out += l + "\n";
  return out;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

Arg ints(std::vector<int64_t> values) {
  Arg a;
  a.kind = Arg::Kind::IntList;
  a.ints = std::move(values);
  return a;
}

// relu(x @ w.t() + b): a linear layer whose weight and bias are state.
Graph linearGraph() {
  Graph g;
  g.nodes = {input(NodeKind::Placeholder, "x", AccessPath::arg(0), {2, 3}),
             input(NodeKind::GetAttr, "w", AccessPath::self().attr("w"), {4, 3}),
             input(NodeKind::GetAttr, "b", AccessPath::self().attr("b"), {4}),
             opNode("linear", "aten::linear", "", {Arg::node(0), Arg::node(1), Arg::node(2)}),
             opNode("relu", "aten::relu", "", {Arg::node(3)}),
             output({Arg::node(4)})};
  return g;
}

}  // namespace

TEST(Compiled, RunsTheGraphAfterCheckingItOnTheFirstCall) {
  replay::Plan plan(linearGraph(), {}, compiled());
  at::Tensor x = at::randn({2, 3}), w = at::randn({4, 3}), b = at::randn({4});
  at::Tensor want = at::relu(at::linear(x, w, b));
  EXPECT_TRUE(at::allclose(plan.runWith({x, w, b})[0].toTensor(), want));
  EXPECT_FALSE(plan.ranCompiled()) << "the first call's results come from operator-by-operator replay";
  EXPECT_TRUE(contains(lines(plan), "backend: compiled (")) << lines(plan);
  EXPECT_TRUE(at::allclose(plan.runWith({x, w, b})[0].toTensor(), want));
  EXPECT_TRUE(plan.ranCompiled());
}

TEST(Compiled, AtenBackendNeverCompiles) {
  replay::Plan plan(linearGraph(), {}, compiled(replay::Backend::Aten));
  at::Tensor x = at::randn({2, 3}), w = at::randn({4, 3}), b = at::randn({4});
  plan.runWith({x, w, b});
  plan.runWith({x, w, b});
  EXPECT_FALSE(plan.ranCompiled());
  EXPECT_FALSE(contains(lines(plan), "backend:")) << lines(plan);
  EXPECT_THROW(replay::parseBackend("jit"), Error);
}

TEST(Compiled, StateFrozenIntoTheGraphIsFollowedWhenItChanges) {
  replay::Plan plan(linearGraph(), {}, compiled());
  at::Tensor x = at::randn({2, 3}), w = at::randn({4, 3}), b = at::randn({4});
  plan.runWith({x, w, b});
  for (int k = 0; k < 6; ++k) {
    w.add_(1.0);                    // in place: the same tensor, a new version
    if (k == 2) b = at::randn({4});  // replaced: another tensor
    at::Tensor want = at::relu(at::linear(x, w, b));
    EXPECT_TRUE(at::allclose(plan.runWith({x, w, b})[0].toTensor(), want, 1e-5, 1e-6)) << "after change " << k;
  }
  EXPECT_TRUE(contains(lines(plan), "changed between calls 4 times")) << lines(plan);
  EXPECT_FALSE(plan.ranCompiled()) << "state that keeps changing runs operator by operator";
}

TEST(Compiled, AFrozenTensorReachedThroughAnotherInputIsNotTrusted) {
  // x aliases w: the graph may see w through x, so w is not a constant in that call.
  replay::Plan plan(linearGraph(), {}, compiled());
  at::Tensor w = at::randn({4, 3}), b = at::randn({4});
  plan.runWith({at::randn({2, 3}), w, b});
  at::Tensor x = w.narrow(0, 0, 2);
  EXPECT_TRUE(at::allclose(plan.runWith({x, w, b})[0].toTensor(), at::relu(at::linear(x, w, b))));
}

TEST(Compiled, ResultsComputedOnceAreTheCallersOwnInEveryCall) {
  // relu(w) depends only on state: libtorch's passes compute it at compile
  // time, yet each call must return a tensor of its own.
  Graph g;
  g.nodes = {input(NodeKind::Placeholder, "x", AccessPath::arg(0), {3}),
             input(NodeKind::GetAttr, "w", AccessPath::self().attr("w"), {3}),
             opNode("relu", "aten::relu", "", {Arg::node(1)}),
             opNode("add", "aten::add", "Tensor", {Arg::node(0), Arg::node(0), Arg::integer(1)}),
             output({Arg::node(2), Arg::node(3)})};
  replay::Plan plan(g, {}, compiled());
  at::Tensor x = at::randn({3}), w = at::randn({3});
  plan.runWith({x, w});
  at::Tensor first = plan.runWith({x, w})[0].toTensor();
  ASSERT_TRUE(plan.ranCompiled());
  first.fill_(42.0f);  // the caller writes the result it got
  at::Tensor second = plan.runWith({x, w})[0].toTensor();
  EXPECT_TRUE(at::equal(second, at::relu(w)));
}

// x + relu(w): the passes compute relu(w) once, and the graph no longer
// holds w itself.
TEST(Compiled, StateTheGraphReplacedIsPagedOutAndStaysTheStates) {
  Graph g;
  g.nodes = {input(NodeKind::Placeholder, "x", AccessPath::arg(0), {4096}),
             input(NodeKind::GetAttr, "w", AccessPath::self().attr("w"), {4096}),
             opNode("relu", "aten::relu", "", {Arg::node(1)}),
             opNode("add", "aten::add", "Tensor", {Arg::node(0), Arg::node(2), Arg::integer(1)}),
             output({Arg::node(3)})};
  replay::PlanOptions options = compiled();
  options.pageOutReplacedState = true;
  replay::Plan plan(g, {}, options);
  at::Tensor x = at::randn({4096}), w = at::randn({4096}), before = w.clone();
  plan.runWith({x, w});
  EXPECT_TRUE(replay::pagedOut(w));
  EXPECT_TRUE(at::equal(w, before));
  EXPECT_TRUE(at::equal(plan.runWith({x, w})[0].toTensor(), at::add(x, at::relu(before))));
  ASSERT_TRUE(plan.ranCompiled());
  w.sub_(1.0f);  // the state written in place: frozen anew from the written values
  EXPECT_TRUE(at::equal(plan.runWith({x, w})[0].toTensor(), at::add(x, at::relu(at::sub(before, 1)))));
  EXPECT_TRUE(at::equal(w, at::sub(before, 1)));

  replay::Plan live(g, {}, compiled());  // a live process's tensors stay where they are
  at::Tensor v = at::randn({4096});
  live.runWith({x, v});
  EXPECT_FALSE(replay::pagedOut(v));
}

// conv2d then eval-mode batch norm: the freeze passes fold the norm into
// new weights, which the inference passes convert to oneDNN's layout while
// they are paged out (page_out.h's PagesReadGoBack).
TEST(Compiled, WeightsFoldedThenConvertedWhilePagedOutGiveTheSameResults) {
  auto ints = [](std::vector<int64_t> v) {
    Arg a;
    a.kind = Arg::Kind::IntList;
    a.ints = std::move(v);
    return a;
  };
  Graph g;
  g.nodes = {input(NodeKind::Placeholder, "x", AccessPath::arg(0), {1, 16, 12, 12}),
             input(NodeKind::GetAttr, "w", AccessPath::self().attr("w"), {32, 16, 3, 3}),
             input(NodeKind::GetAttr, "gamma", AccessPath::self().attr("gamma"), {32}),
             input(NodeKind::GetAttr, "beta", AccessPath::self().attr("beta"), {32}),
             input(NodeKind::GetAttr, "mean", AccessPath::self().attr("mean"), {32}),
             input(NodeKind::GetAttr, "var", AccessPath::self().attr("var"), {32}),
             opNode("conv", "aten::conv2d", "",
                    {Arg::node(0), Arg::node(1), Arg::none(), ints({1, 1}), ints({1, 1}), ints({1, 1}), Arg::integer(1)}),
             opNode("bn", "aten::batch_norm", "",
                    {Arg::node(6), Arg::node(2), Arg::node(3), Arg::node(4), Arg::node(5), Arg::boolean(false),
                     Arg::floating(0.1), Arg::floating(1e-5), Arg::boolean(false)}),
             opNode("relu", "aten::relu", "", {Arg::node(7)}),
             output({Arg::node(8)})};
  replay::PlanOptions options = compiled();
  options.pageOutReplacedState = true;
  replay::Plan plan(g, {}, options);
  at::Tensor x = at::randn({1, 16, 12, 12}), w = at::randn({32, 16, 3, 3}), gamma = at::add(at::rand({32}), 0.5),
             beta = at::randn({32}), mean = at::randn({32}), var = at::add(at::rand({32}), 0.5);
  std::vector<at::Tensor> state = {w, gamma, beta, mean, var}, before;
  for (auto& t : state) before.push_back(t.clone());
  auto eager = [&] { return at::relu(at::batch_norm(at::conv2d(x, w, {}, 1, 1), gamma, beta, mean, var, false, 0.1, 1e-5, false)); };
  at::Tensor want = eager();
  for (int call = 0; call < 3; ++call)
    EXPECT_TRUE(at::allclose(plan.runWith({x, w, gamma, beta, mean, var})[0].toTensor(), want, 1e-4, 1e-5)) << call;
  ASSERT_TRUE(plan.ranCompiled()) << lines(plan);
  for (size_t i = 0; i < state.size(); ++i) EXPECT_TRUE(at::equal(state[i], before[i])) << "state " << i;
  w.mul_(-1.0f);  // the state written: frozen, folded and converted anew
  want = eager();
  EXPECT_TRUE(at::allclose(plan.runWith({x, w, gamma, beta, mean, var})[0].toTensor(), want, 1e-4, 1e-5));
  EXPECT_TRUE(at::allclose(plan.runWith({x, w, gamma, beta, mean, var})[0].toTensor(), want, 1e-4, 1e-5));
}

TEST(Compiled, WrittenStateAndRandomDrawsAgreeWithOperatorByOperator) {
  // b.add_(x) then dropout(b, 0.5, train=True): the first call runs the
  // compiled graph on a copy of b with the same draws, then the steps on b.
  Graph g;
  g.nodes = {input(NodeKind::Placeholder, "x", AccessPath::arg(0), {64}),
             input(NodeKind::GetAttr, "b", AccessPath::self().attr("b"), {64}),
             opNode("add_", "aten::add_", "Tensor", {Arg::node(1), Arg::node(0), Arg::integer(1)}),
             opNode("dropout", "aten::dropout", "", {Arg::node(2), Arg::floating(0.5), Arg::boolean(true)}),
             output({Arg::node(3)})};
  at::Tensor x = at::ones({64}), b1 = at::randn({64}), b2 = b1.clone();
  replay::Plan plan(g, {}, compiled()), steps(g, {}, compiled(replay::Backend::Aten));
  for (int call = 0; call < 3; ++call) {
    at::manual_seed(7 + call);
    at::Tensor got = plan.runWith({x, b1})[0].toTensor();
    at::manual_seed(7 + call);
    at::Tensor want = steps.runWith({x, b2})[0].toTensor();
    EXPECT_TRUE(at::equal(got, want)) << "call " << call;
    EXPECT_TRUE(at::equal(b1, b2)) << "the state is written once per call, call " << call;
  }
  EXPECT_TRUE(plan.ranCompiled()) << lines(plan);
}

TEST(Compiled, GraphsItCannotLowerRunOperatorByOperatorAndSayWhy) {
  // as_strided's geometry comes from the record and is checked per call.
  Graph g;
  g.nodes = {input(NodeKind::Placeholder, "x", AccessPath::arg(0), {6}),
             opNode("as_strided", "aten::as_strided", "", {Arg::node(0), ints({2, 2}), ints({2, 1})}),
             output({Arg::node(1)})};
  g.nodes[1].where = "model.py:9";
  replay::Plan plan(g, {}, compiled(replay::Backend::Auto));
  at::Tensor x = at::randn({6});
  EXPECT_TRUE(at::equal(plan.runWith({x})[0].toTensor(), x.as_strided({2, 2}, {2, 1})));
  EXPECT_TRUE(contains(lines(plan), "backend: operator by operator, not compiled: %as_strided (model.py:9) makes a view "
                                    "whose geometry the record gives"))
      << lines(plan);
  EXPECT_FALSE(plan.ranCompiled());
}

TEST(Compiled, DynamicGraphsCompilePerBindingAndStillMiss) {
  auto dynamicMeta = [] {
    TensorMeta m = sample::meta({4, 3}, {3, 1});
    m.sym = {{0, 1, 0}, {-1, 1, 3}};
    return m;
  };
  Graph g;
  g.nodes = {input(NodeKind::Placeholder, "x", AccessPath::arg(0), {4, 3}),
             opNode("relu", "aten::relu", "", {Arg::node(0)}), output({Arg::node(1)})};
  g.nodes[0].outputs = g.nodes[1].outputs = {dynamicMeta()};
  replay::Plan plan(g, {}, compiled());
  for (int64_t rows : {5, 5, 7, 7, 5}) {
    replay::SymbolValues s;
    ASSERT_TRUE(s.unify(0, rows));
    at::Tensor x = at::randn({rows, 3});
    EXPECT_TRUE(at::equal(plan.runWith({x}, &s)[0].toTensor(), at::relu(x)));
  }
  EXPECT_TRUE(plan.ranCompiled());
  g.nodes[1].outputs[0].sym[0].scale = 2;  // a wrong size rule: every binding's first call misses
  replay::Plan wrong(g, {}, compiled());
  replay::SymbolValues s;
  ASSERT_TRUE(s.unify(0, 7));
  for (int k = 0; k < 2; ++k) EXPECT_THROW(wrong.runWith({at::randn({7, 3})}, &s), replay::SizeMismatch);
}

TEST(Compiled, ProfileCountsTopLevelOperatorsOfBothBackends) {
  for (auto backend : {replay::Backend::Aten, replay::Backend::Compiled}) {
    replay::Plan plan(linearGraph(), {}, compiled(backend));
    at::Tensor x = at::randn({2, 3}), w = at::randn({4, 3}), b = at::randn({4});
    plan.runWith({x, w, b});
    replay::OperatorProfile profile;
    for (int k = 0; k < 5; ++k) plan.runWith({x, w, b});
    size_t relus = 0;
    for (auto& op : profile.operators()) {
      EXPECT_NE(op.name, "aten::addmm") << "linear's own addmm counts in linear's time";
      if (op.name == "aten::relu") relus = op.count;
    }
    EXPECT_EQ(relus, 5u);
    std::string report = profile.report(5, 1.0);
    EXPECT_TRUE(contains(report, "aten::relu")) << report;
    EXPECT_TRUE(contains(report, "per call: 200000.00 us, of which operators")) << report;
    EXPECT_THROW(replay::OperatorProfile(), Error) << "one profile per thread";
  }
}

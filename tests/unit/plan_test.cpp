#include <gtest/gtest.h>

#include <ATen/ops/allclose.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/neg.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/split.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/tensor.h>

#include "magpy/record/graph_utils.h"
#include "magpy/replay/guards.h"
#include "magpy/replay/plan.h"
#include "replay/memory_budget.h"
#include "magpy/support/error.h"
#include "sample.h"

using namespace magpy;
using namespace magpy::record;

namespace {

// A placeholder for args[0].
Node argument(std::vector<TensorMeta> outputs = {}) {
  Node x;
  x.kind = NodeKind::Placeholder;
  x.name = x.target = "x";
  x.source = AccessPath::arg(0);
  x.outputs = std::move(outputs);
  return x;
}

using sample::opNode;
using sample::output;

}  // namespace

TEST(Plan, RunsTheSampleGraph) {
  RecordFile f = sample::sampleFile();
  replay::Plan plan(f.functions[0].records[0].graph, f.blobs);
  ASSERT_EQ(plan.inputPaths().size(), 2u);
  EXPECT_EQ(toString(plan.inputPaths()[1]), "self.w");
  at::Tensor x = at::randn({2}), w = at::randn({2});
  auto out = plan.runWith({x, w});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(at::allclose(out[0].toTensor(), at::relu(at::mul(x, w))));
}

TEST(Plan, UnpacksListResults) {
  // split returns a Tensor[]; getitem picks elements.
  Graph g;
  Node x;
  x.kind = NodeKind::Placeholder;
  x.name = x.target = "x";
  x.source = AccessPath::arg(0);
  Node split;
  split.name = "split";
  split.target = "aten::split";
  split.overload = "Tensor";
  split.args = {Arg::node(0), Arg::integer(2), Arg::integer(0)};
  split.outputs = {sample::meta({2}, {1}), sample::meta({2}, {1})};
  split.where = "model.py:3";
  Node second;
  second.name = "getitem";
  second.target = "getitem";
  second.args = {Arg::node(1), Arg::integer(1)};
  Node out;
  out.kind = NodeKind::Output;
  out.args = {Arg::node(2)};
  g.nodes = {x, split, second, out};
  replay::Plan plan(g, {});
  at::Tensor t = at::randn({4});
  auto result = plan.runWith({t});
  EXPECT_TRUE(at::allclose(result[0].toTensor(), t.split(2)[1]));
  try {
    plan.runWith({at::randn({6})});  // three pieces where the record saw two
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "while running %split (model.py:3): aten::split.Tensor returned 3 tensors, the record expects 2");
  }
}

TEST(Plan, RunErrorsNameTheNodeAndItsSourceLine) {
  RecordFile f = sample::sampleFile();
  replay::Plan plan(f.functions[0].records[0].graph, f.blobs);
  try {
    plan.runWith({at::randn({3}), at::randn({2})});  // x * w with sizes that do not broadcast
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("while running %mul (sample.py:7): ", 0), 0u) << e.what();
  }
}

// A time budget stops a run between operators, naming where it stopped.
TEST(Plan, TimeBudgetStopsARunBetweenOperators) {
  RecordFile f = sample::sampleFile();
  replay::PlanOptions options;
  options.timeBudget = 1e-9;
  replay::Plan plan(f.functions[0].records[0].graph, f.blobs, options);
  try {
    plan.runWith({at::randn({2}), at::randn({2})});
    FAIL() << "ran past its time budget";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ran past its time budget of 1e-09 s before %"), std::string::npos) << e.what();
  }
  options.timeBudget = 60;
  replay::Plan generous(f.functions[0].records[0].graph, f.blobs, options);
  EXPECT_EQ(generous.runWith({at::randn({2}), at::randn({2})}).size(), 1u);
  options.backend = replay::Backend::Compiled;
  options.inference = true;
  EXPECT_THROW(replay::Plan(f.functions[0].records[0].graph, f.blobs, options), Error);
}

TEST(Plan, UnknownOperatorsAreClearErrors) {
  Graph g = sample::sampleFile().functions[0].records[0].graph;
  g.nodes[3].target = "aten::no_such_op";
  try {
    replay::Plan plan(g, {});
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("aten::no_such_op does not exist in this libtorch"), std::string::npos) << m;
    EXPECT_NE(m.find("node %relu"), std::string::npos) << m;
  }
}

TEST(Plan, FillsArgumentsANewerLibtorchAdded) {
  // A record made where relu... took fewer arguments still runs: missing
  // trailing arguments take the schema's defaults (softmax's dtype).
  Graph g;
  Node x = argument();
  Node sm = opNode("softmax", "aten::softmax", "int", {Arg::node(0), Arg::integer(0)});
  Node out;
  out.kind = NodeKind::Output;
  out.args = {Arg::node(1)};
  g.nodes = {x, sm, out};
  replay::Plan plan(g, {});
  at::Tensor t = at::randn({5});
  EXPECT_TRUE(at::allclose(plan.runWith({t})[0].toTensor(), t.softmax(0)));
}

TEST(Plan, DynamicGraphsCheckEachResultAgainstTheCallsSizes) {
  // relu(x) for x of sizes [s0, 3]; the record says the result is [s0, 3].
  auto dynamicMeta = [](std::vector<SymDim> sym) {
    TensorMeta m = sample::meta({4, 3}, {3, 1});
    m.sym = std::move(sym);
    return m;
  };
  Graph g;
  Node x = argument({dynamicMeta({{0, 1, 0}, {-1, 1, 3}})});
  Node relu = opNode("relu", "aten::relu", "", {Arg::node(0)});
  relu.outputs = x.outputs;
  Node out;
  out.kind = NodeKind::Output;
  out.args = {Arg::node(1)};
  g.nodes = {x, relu, out};
  replay::Plan plan(g, {});
  EXPECT_TRUE(plan.dynamic());
  EXPECT_TRUE(plan.stopsCleanly());
  replay::SymbolValues s;
  ASSERT_TRUE(s.unify(0, 7));
  EXPECT_EQ(plan.runWith({at::randn({7, 3})}, &s)[0].toTensor().size(0), 7);
  EXPECT_THROW(plan.runWith({at::randn({7, 3})}), Error) << "a dynamic graph needs the call's sizes";
  // A record whose size rule is wrong (2*s0 where relu keeps s0): the call misses, it is not answered.
  g.nodes[1].outputs[0].sym[0].scale = 2;
  replay::Plan wrong(g, {});
  EXPECT_THROW(wrong.runWith({at::randn({7, 3})}, &s), replay::SizeMismatch);
}

TEST(Plan, SymbolsBindOnceAndAreAtLeastTwo) {
  replay::SymbolValues s;
  EXPECT_FALSE(s.unify(0, 1)) << "sizes 0 and 1 keep records of their own";
  EXPECT_TRUE(s.unify(0, 5));
  EXPECT_TRUE(s.unify(0, 5));
  EXPECT_FALSE(s.unify(0, 6)) << "a symbol has one size per call";
  EXPECT_EQ(*s.evaluate(SymDim{0, 2, 1}), 11);
  EXPECT_FALSE(s.evaluate(SymDim{1, 1, 0})) << "unbound";
  // A record's own scale: 2^32 * s0 wrapped to 0 and matched an empty result before.
  ASSERT_TRUE(s.unify(2, int64_t(1) << 32));
  EXPECT_FALSE(s.evaluate(SymDim{2, int64_t(1) << 32, 0})) << "beyond 64 bits";
  EXPECT_FALSE(s.evaluate(SymDim{2, 1, INT64_MAX})) << "beyond 64 bits";
}

TEST(Plan, SizeListsReadSizesFromTheCallsTensors) {
  // x.view(x.size(0), 2, -1): the first size is read from x on every call.
  Graph g;
  Node x = argument({sample::meta({3, 4}, {4, 1})});
  Node size = opNode("size", "aten::size", "int", {Arg::node(0), Arg::integer(0)});
  Arg shape;
  shape.kind = Arg::Kind::SizeList;
  shape.ints = {1, 1, 0, 2, 0, -1};
  Node view = opNode("view", "aten::view", "", {Arg::node(0), shape});
  Node out;
  out.kind = NodeKind::Output;
  out.args = {Arg::node(2)};
  g.nodes = {x, size, view, out};
  replay::Plan plan(g, {});
  for (int64_t rows : {3, 5}) {
    auto result = plan.runWith({at::randn({rows, 4})})[0].toTensor();
    EXPECT_EQ(result.sizes(), (std::vector<int64_t>{rows, 2, 2}));
  }
}

namespace {

// A lifted number read from the state: G['k'] of the given type.
Node numberInput(const std::string& type) {
  Node n;
  n.kind = NodeKind::GetAttr;
  n.name = n.target = "k";
  n.source = AccessPath::global("", "k");
  n.number = type;
  n.seen = type == "int" ? Atom::integer(2) : Atom::floating(0.5);
  return n;
}

Node numberOp(const std::string& target, std::vector<Arg> args, const std::string& type) {
  Node n = opNode(target.substr(9), target, "", std::move(args));
  n.number = type;
  return n;
}

}  // namespace

TEST(Plan, NumberOperatorsDoPythonsArithmetic) {
  // k // 2, k / 2, k * 3 - 1.5 for ints k, as Python computes them.
  Graph g;
  g.nodes = {numberInput("int"),
             numberOp("operator.floordiv", {Arg::node(0), Arg::integer(2)}, "int"),
             numberOp("operator.truediv", {Arg::node(0), Arg::integer(2)}, "float"),
             numberOp("operator.mul", {Arg::node(0), Arg::integer(3)}, "int"),
             numberOp("operator.sub", {Arg::node(3), Arg::floating(1.5)}, "float"),
             output({Arg::node(1), Arg::node(2), Arg::node(4)})};
  replay::Plan plan(g, {});
  for (int64_t k : {-7, -1, 0, 5}) {
    auto out = plan.runWith({c10::IValue(k)});
    int64_t floored = k >= 0 ? k / 2 : -((-k + 1) / 2);
    EXPECT_EQ(out[0].toInt(), floored) << k;
    EXPECT_DOUBLE_EQ(out[1].toDouble(), double(k) / 2) << k;
    EXPECT_DOUBLE_EQ(out[2].toDouble(), double(k * 3) - 1.5) << k;
  }
  // Float floor division as Python's: -7.5 // 2 == -4.0, 7.5 // -2 == -4.0.
  Graph h;
  h.nodes = {numberInput("float"), numberOp("operator.floordiv", {Arg::node(0), Arg::floating(2)}, "float"),
             numberOp("operator.floordiv", {Arg::node(0), Arg::floating(-2)}, "float"), output({Arg::node(1), Arg::node(2)})};
  replay::Plan floats(h, {});
  auto out = floats.runWith({c10::IValue(-7.5)});
  EXPECT_EQ(out[0].toDouble(), -4.0);
  EXPECT_EQ(out[1].toDouble(), 3.0);
  // An int input must be an int: a float is refused before anything runs.
  EXPECT_THROW(plan.runWith({c10::IValue(2.0)}), Error);
  // Division by zero is an error, as in Python; so is leaving 64 bits.
  Graph z;
  z.nodes = {numberInput("int"), numberOp("operator.floordiv", {Arg::integer(1), Arg::node(0)}, "int"),
             numberOp("operator.mul", {Arg::node(0), Arg::node(0)}, "int"), output({Arg::node(1), Arg::node(2)})};
  replay::Plan zero(z, {});
  EXPECT_THROW(zero.runWith({c10::IValue(int64_t(0))}), Error);
  EXPECT_THROW(zero.runWith({c10::IValue(int64_t(1) << 40)}), Error);
}

// n = t.item() after t.add_(1), then x * (1 - 0.9 ** n): the graph reads
// the number after the write, at every call (an optimizer's step count).
TEST(Plan, ItemReadsANumberAfterTheWritesBeforeIt) {
  Graph g;
  Node t = argument({sample::meta({}, {})});
  Node x = argument({sample::meta({3}, {1})});
  x.name = x.target = "y";
  x.source = AccessPath::arg(1);
  Node add = opNode("add_", "aten::add_", "Scalar", {Arg::node(0), Arg::integer(1), Arg::integer(1)});
  add.outputs = {sample::meta({}, {})};
  Node item = opNode("item", kItem, "", {Arg::node(2)});
  item.number = "float";
  item.seen = record::Atom::floating(1.0);
  Node power = numberOp("operator.pow", {Arg::floating(0.9), Arg::node(3)}, "float");
  Node rest = numberOp("operator.sub", {Arg::integer(1), Arg::node(4)}, "float");
  Node mul = opNode("mul", "aten::mul", "Scalar", {Arg::node(1), Arg::node(5)});
  g.nodes = {t, x, add, item, power, rest, mul, output({Arg::node(6)})};
  replay::Plan plan(g, {});
  at::Tensor count = at::zeros({}), in = at::ones({3});
  for (int step = 1; step <= 3; ++step) {
    auto out = plan.runWith({count, in})[0].toTensor();
    EXPECT_EQ(count.item<float>(), float(step));
    EXPECT_TRUE(at::allclose(out, at::mul(in, 1 - std::pow(0.9, step)))) << step;
  }
  // An int from a float tensor is not what item() gives: refused when built.
  g.nodes[3].number = "int";
  g.nodes[3].seen = record::Atom::integer(1);
  EXPECT_THROW(replay::Plan(g, {}), Error);
}

// The foreach optimizers' step sizes: a Scalar[] whose entries are float
// numbers the graph computes (lr / (1 - 0.9 ** k)) and constants, boxed as
// Scalars for a Scalar[] and as floats for a float[].
TEST(Plan, NumberListsPassTheGraphsFloats) {
  Graph g;
  Node a = argument({sample::meta({2}, {1})});
  Node b = argument({sample::meta({3}, {1})});
  b.name = b.target = "b";
  b.source = AccessPath::arg(1);
  Node k = numberInput("float");
  Node half = numberOp("operator.truediv", {Arg::node(2), Arg::integer(2)}, "float");
  Arg scalars;
  scalars.kind = Arg::Kind::NumberList;
  scalars.ints = {2, -1};
  scalars.floats = {0, 3.0};
  Arg halves = scalars;
  halves.ints = {3, 3};
  halves.floats = {0, 0};
  Node mul = opNode("_foreach_mul_", "aten::_foreach_mul_", "ScalarList", {Arg{Arg::Kind::NodeList, 0, 0, "", {0, 1}, {}}, scalars});
  Node div = opNode("_foreach_div", "aten::_foreach_div", "ScalarList", {Arg{Arg::Kind::NodeList, 0, 0, "", {0, 1}, {}}, halves});
  div.outputs = {sample::meta({2}, {1}), sample::meta({3}, {1})};
  Node first;
  first.name = "getitem";
  first.target = "getitem";
  first.args = {Arg::node(5), Arg::integer(0)};
  first.outputs = {sample::meta({2}, {1})};
  g.nodes = {a, b, k, half, mul, div, first, output({Arg::node(6)})};
  replay::Plan plan(g, {});
  at::Tensor x = at::ones({2}), y = at::ones({3});
  auto out = plan.runWith({x, y, c10::IValue(0.5)})[0].toTensor();
  EXPECT_TRUE(at::allclose(x, at::mul(at::ones({2}), 0.5))) << x;
  EXPECT_TRUE(at::allclose(y, at::mul(at::ones({3}), 3.0))) << y;
  EXPECT_TRUE(at::allclose(out, at::mul(at::ones({2}), 2.0))) << out;  // 0.5 / (0.5 / 2)
  // An int entry is not a float: refused when built.
  g.nodes[3] = numberOp("operator.floordiv", {Arg::integer(7), Arg::integer(2)}, "int");
  EXPECT_THROW(replay::Plan(g, {}), Error);
}

TEST(Plan, OperatorsTakeLiftedNumbersAndCheckTheSizesTheyGive) {
  // x * k (k wrapped as Python wraps it), and x[:, k : k + 2] whose sizes
  // must stay those seen at capture.
  Graph g;
  Node x = argument({sample::meta({2, 8}, {8, 1})});
  Node k = numberInput("int");
  Node end = numberOp("operator.add", {Arg::node(1), Arg::integer(2)}, "int");
  Node mul = opNode("mul", "aten::mul", "Tensor", {Arg::node(0), Arg::node(1)});
  Node slice = opNode("slice", "aten::slice", "Tensor", {Arg::node(3), Arg::integer(1), Arg::node(1), Arg::node(2), Arg::integer(1)});
  slice.outputs = {sample::meta({2, 2}, {8, 1})};
  g.nodes = {x, k, end, mul, slice, output({Arg::node(4)})};
  replay::Plan plan(g, {});
  at::Tensor in = at::randn({2, 8});
  for (int64_t start : {0, 3, 6}) {
    auto out = plan.runWith({in, c10::IValue(start)})[0].toTensor();
    EXPECT_TRUE(at::allclose(out, at::mul(in.slice(1, start, start + 2), double(start)))) << start;
  }
  // At k = 7 the slice clamps to one column: the record does not describe that call.
  EXPECT_THROW(plan.runWith({in, c10::IValue(int64_t(7))}), replay::SizeMismatch);
}

// An operator of a grad mode region runs in that mode and the caller's
// mode is back after it, also when it fails; a plan without autograd
// (inference) runs it as any other.
TEST(Plan, GradModeRegionsSwitchAroundTheirOperatorsOnly) {
  Graph g;
  g.nodes.push_back(argument());
  g.nodes.push_back(opNode("frozen", "aten::mul", "Tensor", {Arg::node(0), Arg::node(0)}));
  g.nodes.back().grad = GradMode::Off;
  g.nodes.push_back(opNode("trained", "aten::mul", "Tensor", {Arg::node(0), Arg::node(0)}));
  g.nodes.push_back(output({Arg::node(1), Arg::node(2)}));
  at::Tensor x = at::randn({3}).requires_grad_();
  c10::AutoGradMode on(true);

  auto out = replay::Plan(g, {}).runWith({x});
  EXPECT_FALSE(out[0].toTensor().requires_grad());
  EXPECT_TRUE(out[1].toTensor().requires_grad());
  EXPECT_TRUE(c10::GradMode::is_enabled());

  replay::PlanOptions inference;
  inference.inference = true;
  EXPECT_TRUE(replay::Plan(g, {}, inference).runWith({x})[0].toTensor().requires_grad());

  g.nodes[1] = opNode("frozen", "aten::mm", "", {Arg::node(0), Arg::node(0)});  // a 1-d mm fails
  g.nodes[1].grad = GradMode::Off;
  EXPECT_THROW(replay::Plan(g, {}).runWith({x}), Error);
  EXPECT_TRUE(c10::GradMode::is_enabled());
}

// magpy.backward runs libtorch's autograd over the graph the plan's own
// operators built (with autograd even where the options say inference):
// d/dw sum(w * x) = x, a tensor of its own; the node stores no .grad. A
// leaf that has a hook stops the call before its first step (a miss).
TEST(Plan, BackwardGivesEachLeafItsGradient) {
  Graph g = sample::backwardGraph();
  at::Tensor w = at::randn({3}).requires_grad_(), x = at::randn({3});
  replay::PlanOptions inference;
  inference.inference = true;
  replay::Plan plan(g, {}, inference);
  EXPECT_TRUE(plan.differentiates());
  c10::AutoGradMode on(true);
  auto out = plan.runWith({w, x});
  EXPECT_TRUE(at::equal(out[1].toTensor(), x));
  EXPECT_FALSE(out[1].toTensor().is_same(x));
  EXPECT_FALSE(w.grad().defined());

  EXPECT_EQ(replay::autogradHooks(w), "");
  w.register_hook([](at::Tensor grad) { return at::mul(grad, at::scalar_tensor(2.0)); });
  EXPECT_NE(replay::autogradHooks(w), "");
  try {
    plan.runWith({w, x});
    FAIL() << "a leaf with a hook ran";
  } catch (const replay::SizeMismatch& e) {
    EXPECT_TRUE(e.changedNothing);
    EXPECT_NE(std::string(e.what()).find("args[0] is a leaf"), std::string::npos) << e.what();
  }
  at::Tensor fixed = at::randn({3});  // no autograd: a clear error naming the node
  EXPECT_THROW(plan.runWith({fixed, x}), Error);
}

// Checks of what the program read into Python: the sum of x (a constant
// holding 3) and the sizes of nonzero's result. A call where either
// differs stops at its check with SizeMismatch (a miss); the checks are
// never dead code, though nothing uses them, and the graph still stops
// cleanly.
TEST(Plan, ChecksStopCallsThatReadOtherValues) {
  Graph g;
  g.nodes.push_back(argument());
  Node seen;
  seen.kind = NodeKind::GetAttr;
  seen.name = seen.target = "_tensor_constant";
  seen.blob = 0;
  seen.outputs.push_back(sample::meta({}, {}));
  seen.outputs.back().dtype = "float32";
  g.nodes.push_back(seen);
  g.nodes.push_back(opNode("sum", "aten::sum", "", {Arg::node(0), Arg::none()}));
  g.nodes.push_back(opNode("expect_equal", kExpectEqual, "", {Arg::node(2), Arg::node(1)}));
  g.nodes.push_back(opNode("nonzero", "aten::nonzero", "", {Arg::node(0)}));
  Arg sizes;
  sizes.kind = Arg::Kind::IntList;
  sizes.ints = {2, 1};
  g.nodes.push_back(opNode("expect_sizes", kExpectSizes, "", {Arg::node(4), sizes}));
  g.nodes.push_back(output({Arg::node(0)}));
  std::vector<TensorBlob> blobs{sample::floatBlob({}, {3.0f})};
  for (bool optimized : {false, true}) {
    replay::PlanOptions options;
    if (optimized) options.passes = replay::PassOptions::all();
    options.inference = optimized;
    replay::Plan plan(g, blobs, options);
    EXPECT_TRUE(plan.stopsCleanly());
    auto x = [](std::vector<float> v) { return at::tensor(v); };
    EXPECT_NO_THROW(plan.runWith({x({1, 2, 0})}));
    EXPECT_NO_THROW(plan.runWith({x({2, 1, 0})}));                     // other data, the same reads
    EXPECT_THROW(plan.runWith({x({1, 1, 1})}), replay::SizeMismatch);  // sum 3, three nonzeros
    EXPECT_THROW(plan.runWith({x({3, 0, 0})}), replay::SizeMismatch);  // sum 3, one nonzero
    EXPECT_THROW(plan.runWith({x({0, 2, 0})}), replay::SizeMismatch);  // sum 2
  }
}

// A check takes a tensor: one of a lifted number cannot be built.
TEST(Plan, RefusesChecksOfNumbers) {
  Graph g;
  Node n = argument();
  n.number = "int";
  n.seen = Atom::integer(2);
  g.nodes.push_back(n);
  Arg sizes;
  sizes.kind = Arg::Kind::IntList;
  g.nodes.push_back(opNode("expect_sizes", kExpectSizes, "", {Arg::node(0), sizes}));
  g.nodes.push_back(output({}));
  EXPECT_THROW(replay::Plan(g, {}), Error);
}

// A check that reads only what the graph never writes runs before the
// graph's first random draw, so a call that fails it stops cleanly; one
// that reads a tensor the graph writes in place stays where it was.
TEST(Plan, ChecksMoveBeforeTheFirstEffectWhereTheyReadTheSame) {
  auto graph = [](bool readsWritten) {
    Graph g;
    g.nodes.push_back(argument());
    Node noise = opNode("rand_like", "aten::rand_like", "", {Arg::node(0), Arg::none(), Arg::none(), Arg::none(),
                                                             Arg::none(), Arg::none()});
    g.nodes.push_back(noise);
    g.nodes.push_back(opNode("add_", "aten::add_", "Tensor", {Arg::node(1), Arg::node(0), Arg::integer(1)}));
    g.nodes.push_back(opNode("sum", "aten::sum", "", {Arg::node(readsWritten ? 1 : 0), Arg::none()}));
    Arg sizes;
    sizes.kind = Arg::Kind::IntList;
    sizes.ints = {3};
    g.nodes.push_back(opNode("expect_sizes", kExpectSizes, "", {Arg::node(3), sizes}));
    g.nodes.push_back(output({Arg::node(2)}));
    return g;
  };
  for (bool readsWritten : {false, true}) {
    replay::Plan plan(graph(readsWritten), {});
    try {
      plan.runWith({at::randn({3})});  // the sum has no sizes: the check fails
      FAIL() << "the check passed";
    } catch (const replay::SizeMismatch& e) {
      EXPECT_EQ(e.changedNothing, !readsWritten) << e.what();
    }
  }
}

// _pad_packed_sequence trusts its batch sizes: replay checks they are what
// packing makes (positive, never growing, covering the data's rows).
TEST(Plan, PackedBatchSizesAreCheckedBeforeThePadding) {
  Graph g;
  g.nodes.push_back(argument());
  Node sizes = argument();
  sizes.name = sizes.target = "batch_sizes";
  sizes.source = AccessPath::arg(1);
  g.nodes.push_back(sizes);
  g.nodes.push_back(opNode("pad", "aten::_pad_packed_sequence", "",
                           {Arg::node(0), Arg::node(1), Arg::boolean(false), Arg::floating(0), Arg::integer(-1)}));
  g.nodes.push_back(opNode("padded", "getitem", "", {Arg::node(2), Arg::integer(0)}));
  g.nodes.push_back(output({Arg::node(3)}));
  replay::Plan plan(g, {});
  at::Tensor data = at::randn({3, 4});
  auto longs = [](std::vector<int64_t> v) { return at::tensor(v); };
  EXPECT_EQ(plan.runWith({data, longs({2, 1})})[0].toTensor().sizes(), (std::vector<int64_t>{2, 2, 4}));
  for (auto bad : {longs({1, 2}), longs({2, 2}), longs({3, 0}), longs({})})
    EXPECT_THROW(plan.runWith({data, bad}), Error) << bad;
}

namespace {

// target(a[, b]) on constants, as a plan computes it.
c10::IValue computed(const std::string& target, std::vector<Arg> args, const std::string& type) {
  Graph g;
  Node n = opNode("n", target, "", std::move(args));
  n.number = type;
  g.nodes = {n, output({Arg::node(0)})};
  return replay::Plan(g, {}).runWith({})[0];
}

}  // namespace

// Each number operator as Python computes it (the values are Python's).
TEST(Plan, NumberOperatorsAndComparisonsAreThoseOfPython) {
  EXPECT_EQ(computed("operator.mod", {Arg::integer(-7), Arg::integer(3)}, "int").toInt(), 2);
  EXPECT_EQ(computed("operator.mod", {Arg::integer(7), Arg::integer(-3)}, "int").toInt(), -2);
  EXPECT_EQ(computed("operator.mod", {Arg::floating(-7.5), Arg::floating(2)}, "float").toDouble(), 0.5);
  EXPECT_EQ(computed("builtins.min", {Arg::integer(3), Arg::integer(2)}, "int").toInt(), 2);
  EXPECT_EQ(computed("builtins.max", {Arg::floating(2.5), Arg::floating(-1)}, "float").toDouble(), 2.5);
  EXPECT_EQ(computed("operator.neg", {Arg::integer(5)}, "int").toInt(), -5);
  EXPECT_EQ(computed("builtins.abs", {Arg::integer(-3)}, "int").toInt(), 3);
  EXPECT_EQ(computed("builtins.int", {Arg::floating(-2.7)}, "int").toInt(), -2);
  EXPECT_EQ(computed("builtins.float", {Arg::integer(3)}, "float").toDouble(), 3.0);
  EXPECT_EQ(computed("math.sqrt", {Arg::integer(16)}, "float").toDouble(), 4.0);
  EXPECT_EQ(computed("math.ceil", {Arg::floating(2.1)}, "int").toInt(), 3);
  EXPECT_EQ(computed("math.floor", {Arg::floating(-2.1)}, "int").toInt(), -3);
  EXPECT_TRUE(computed("operator.lt", {Arg::integer(2), Arg::integer(3)}, "bool").toBool());
  EXPECT_FALSE(computed("operator.ge", {Arg::integer(2), Arg::integer(3)}, "bool").toBool());
  EXPECT_TRUE(computed("operator.eq", {Arg::integer(2), Arg::floating(2.0)}, "bool").toBool());
  EXPECT_EQ(computed("operator.pow", {Arg::integer(-3), Arg::integer(3)}, "int").toInt(), -27);
  EXPECT_EQ(computed("operator.pow", {Arg::integer(0), Arg::integer(0)}, "int").toInt(), 1);
  EXPECT_EQ(computed("operator.pow", {Arg::floating(0.9), Arg::integer(2)}, "float").toDouble(), 0.9 * 0.9);
  EXPECT_EQ(computed("operator.pow", {Arg::floating(-8), Arg::floating(2)}, "float").toDouble(), 64.0);
  // Where Python raises, the call is not the record's: a miss.
  EXPECT_THROW(computed("operator.mod", {Arg::integer(1), Arg::integer(0)}, "int"), replay::SizeMismatch);
  EXPECT_THROW(computed("operator.pow", {Arg::integer(2), Arg::integer(63)}, "int"), replay::SizeMismatch);
  EXPECT_THROW(computed("operator.pow", {Arg::integer(2), Arg::integer(-1)}, "int"), replay::SizeMismatch);  // a float
  EXPECT_THROW(computed("operator.pow", {Arg::floating(0), Arg::integer(-1)}, "float"), replay::SizeMismatch);
  EXPECT_THROW(computed("operator.pow", {Arg::floating(-8), Arg::floating(0.5)}, "float"), replay::SizeMismatch);  // complex
  EXPECT_THROW(computed("operator.pow", {Arg::floating(10), Arg::floating(400)}, "float"), replay::SizeMismatch);
  EXPECT_THROW(computed("math.sqrt", {Arg::integer(-1)}, "float"), replay::SizeMismatch);
  EXPECT_THROW(computed("operator.neg", {Arg::integer(INT64_MIN)}, "int"), replay::SizeMismatch);
  // Types Python's arithmetic would not give are refused when the plan is built.
  EXPECT_THROW(computed("builtins.min", {Arg::integer(3), Arg::floating(2)}, "int"), Error);
  EXPECT_THROW(computed("math.sqrt", {Arg::integer(4)}, "int"), Error);
  EXPECT_THROW(computed("operator.neg", {Arg::integer(4), Arg::integer(1)}, "int"), Error);
}

// if x.size(0) > 3: a call whose rows go the other way stops before any
// operator, and says the program decided otherwise (not that the record
// computes wrong sizes).
TEST(Plan, DecisionsStopCallsThatGoTheOtherWay) {
  Graph g;
  g.nodes = {argument({sample::meta({4, 2}, {2, 1})}), opNode("size", "aten::size", "int", {Arg::node(0), Arg::integer(0)}),
             numberOp("operator.gt", {Arg::node(1), Arg::integer(3)}, "bool"),
             opNode("expect_true", kExpectTrue, "", {Arg::node(2)}),
             opNode("mul", "aten::mul", "Scalar", {Arg::node(0), Arg::floating(2)}), output({Arg::node(4)})};
  replay::Plan plan(g, {});
  EXPECT_NO_THROW(plan.runWith({at::randn({5, 2})}));
  try {
    plan.runWith({at::randn({3, 2})});
    ADD_FAILURE() << "3 rows ran the record of more than 3";
  } catch (const replay::SizeMismatch& e) {
    EXPECT_TRUE(e.decidedOtherwise);
    EXPECT_TRUE(e.changedNothing);
  }
  // A predicate takes a comparison; an int is refused when the plan is built.
  g.nodes[3].args = {Arg::node(1)};
  EXPECT_THROW(replay::Plan(g, {}), Error);
}

// x.view(x.size(0) // 2, -1): the result's rows are the value of the
// floordiv node, checked on every call.
TEST(Plan, ResultSizesMayBeTheValueOfANode) {
  Graph g;
  Node view = opNode("view", "aten::view", "", {Arg::node(0), Arg::none()});
  view.args[1].kind = Arg::Kind::SizeList;
  view.args[1].ints = {1, 2, 0, -1};
  view.outputs = {sample::meta({2, 6}, {6, 1})};
  view.outputs[0].sym = {SymDim{}, SymDim{-1, 1, 6, -1}};
  view.outputs[0].sym[0].node = 2;
  Node sum = opNode("sum", "aten::sum", "dim_IntList", {Arg::node(0), Arg::none(), Arg::boolean(false), Arg::none()});
  sum.args[1].kind = Arg::Kind::IntList;
  sum.args[1].ints = {1};
  sum.outputs = {sample::meta({4}, {1})};
  sum.outputs[0].sym = {SymDim{}};
  sum.outputs[0].sym[0].node = 2;  // wrong: x.sum(1) has x's rows, not half of them
  g.nodes = {argument({sample::meta({4, 3}, {3, 1})}), opNode("size", "aten::size", "int", {Arg::node(0), Arg::integer(0)}),
             numberOp("operator.floordiv", {Arg::node(1), Arg::integer(2)}, "int"), view, sum,
             output({Arg::node(3), Arg::node(4)})};
  g.nodes[3].args[0] = Arg::node(0);
  replay::Plan plan(g, {});
  replay::SymbolValues none;
  try {
    plan.runWith({at::randn({8, 3})}, &none);
    ADD_FAILURE() << "the sum's rule should fail";
  } catch (const replay::SizeMismatch& e) {
    EXPECT_FALSE(e.decidedOtherwise);
    EXPECT_NE(std::string(e.what()).find("[4 (computed by the graph)]"), std::string::npos) << e.what();
  }
  g.nodes[4].outputs[0].sym.clear();
  replay::Plan right(g, {});
  EXPECT_EQ(right.runWith({at::randn({8, 3})}, &none)[0].toTensor().sizes(), (std::vector<int64_t>{4, 6}));
}

// A loop region runs its body once per row of x, whatever their number:
// carried values start from their initial ones, scans collect a value per
// iteration for the operator after the loop. A call that would not enter
// the loop misses the record; one that would run it past the limit is an
// error; a scan list is no output.
TEST(Plan, LoopsRunTheirBodyOncePerIteration) {
  Graph g = sample::loopGraph();
  for (auto& n : g.nodes) n.outputs.clear();  // sizes unchecked: rows vary
  replay::Plan plan(g, {});
  for (int64_t rows : {5, 2, 1, 40}) {
    at::Tensor x = at::randn({rows, 3}), h0 = at::randn({3});
    auto out = plan.runWith({x, h0});
    at::Tensor h = h0;  // the program, in the same order: results are equal, not close
    std::vector<at::Tensor> ys;
    for (int64_t t = 0; t < rows; ++t) {
      h = h.add(x.select(0, t));
      ys.push_back(h.mul(2));
    }
    EXPECT_TRUE(at::equal(out[0].toTensor(), h)) << rows << " rows";
    EXPECT_TRUE(at::equal(out[1].toTensor(), at::stack(ys))) << rows << " rows";
  }
  try {
    plan.runWith({at::randn({0, 3}), at::randn({3})});
    ADD_FAILURE() << "no iteration ran the record of at least one";
  } catch (const replay::SizeMismatch& e) {
    EXPECT_TRUE(e.decidedOtherwise);
    EXPECT_TRUE(e.changedNothing);
  }
  Graph fixed = g;
  fixed.nodes[3].args[0] = Arg::integer(kMaxTripCount + 1);
  EXPECT_THROW(replay::Plan(fixed, {}).runWith({at::randn({5, 3}), at::randn({3})}), Error);
  Graph escaping = g;
  escaping.nodes.back().args[1] = Arg::node(10);
  EXPECT_THROW(replay::Plan(escaping, {}), Error);
}

// A branch runs the side its condition picks, as Python's bool() of a
// one-element tensor would; a side capture never saw misses the record
// (another path through the program) and a condition of several elements
// misses it too (Python would raise). Sides give values the same slots.
TEST(Plan, BranchesRunTheSideTheirConditionPicks) {
  Graph g = sample::branchGraph();
  replay::Plan plan(g, {});
  at::Tensor x = at::randn({2, 3});
  for (double keep : {1.0, 0.0, -0.5, std::nan("")}) {
    at::Tensor out = plan.runWith({x, at::scalar_tensor(keep)})[0].toTensor();
    bool taken = keep != 0.0;  // NaN is true, as in Python
    EXPECT_TRUE(at::equal(out, (taken ? x.relu().mul(2) : x.neg()).add(x))) << keep;
  }
  EXPECT_TRUE(at::equal(plan.runWith({x, at::ones({1, 1}, at::kBool)})[0].toTensor(), x.relu().mul(2).add(x)));
  try {
    plan.runWith({x, at::ones({2})});
    ADD_FAILURE() << "a condition of two elements ran";
  } catch (const replay::SizeMismatch& e) {
    EXPECT_FALSE(e.decidedOtherwise);
    EXPECT_TRUE(e.changedNothing);
  }
  Graph thenOnly = g;
  thenOnly.nodes[2].args[2] = Arg::boolean(false);
  thenOnly.nodes.erase(thenOnly.nodes.begin() + 6);  // the else side's node
  thenOnly.nodes[6].args[1].ints = {};
  for (size_t i = 7; i < thenOnly.nodes.size(); ++i)
    record::forEachNodeArg(thenOnly.nodes[i], [](int64_t& j) { j = j >= 6 ? j - 1 : j; });
  replay::Plan oneSide(thenOnly, {});
  EXPECT_TRUE(at::equal(oneSide.runWith({x, at::scalar_tensor(1.0)})[0].toTensor(), x.relu().mul(2).add(x)));
  try {
    oneSide.runWith({x, at::scalar_tensor(0.0)});
    ADD_FAILURE() << "an unseen side ran";
  } catch (const replay::SizeMismatch& e) {
    EXPECT_TRUE(e.decidedOtherwise);
    EXPECT_TRUE(e.changedNothing);
    EXPECT_NE(std::string(e.what()).find("takes its else side, which capture never saw"), std::string::npos) << e.what();
  }
  Graph uneven = g;
  uneven.nodes[7].args[1].ints = {6, 6};
  EXPECT_THROW(replay::Plan(uneven, {}), Error);
}

// Loops nest; values from outside are read by every iteration, and the
// inner loop starts again in each outer one: acc + 3 * x.sum(0).
TEST(Plan, NestedLoopsKeepOuterValuesForEveryIteration) {
  Graph g = sample::loopGraph();
  // outer: for _ in range(3): (h = inner loop over x's rows from h)
  std::vector<Node> nodes(g.nodes.begin(), g.nodes.begin() + 3);
  Node outer = sample::opNode("outer", kLoop, "", {Arg::integer(3), Arg::none()});
  outer.args[1].kind = Arg::Kind::NodeList;
  outer.args[1].ints = {1};
  outer.number = "int";
  nodes.push_back(outer);                                                                // 3
  nodes.push_back(sample::opNode("acc", kCarried, "", {Arg::node(3), Arg::integer(0)}));  // 4
  nodes.back().outputs = {sample::meta({3}, {1})};
  for (size_t i = 3; i <= 8; ++i) {  // the inner loop, shifted by 2
    Node n = g.nodes[i];
    record::forEachNodeArg(n, [](int64_t& j) { j = j >= 3 ? j + 2 : j; });
    nodes.push_back(n);
  }
  nodes[5].args[1].ints = {4};  // the inner loop starts from the outer's carried value
  nodes[10].args[2].ints = {};  // no scan
  nodes.push_back(sample::opNode("inner_last", "getitem", "", {Arg::node(10), Arg::integer(0)}));  // 11
  Node end = sample::opNode("outer_end", kLoopEnd, "", {Arg::node(3), Arg::none(), Arg::none()});
  end.args[1].kind = end.args[2].kind = Arg::Kind::NodeList;
  end.args[1].ints = {11};
  nodes.push_back(end);                                                                   // 12
  nodes.push_back(sample::opNode("last", "getitem", "", {Arg::node(12), Arg::integer(0)}));  // 13
  nodes.push_back(sample::output({Arg::node(13)}));
  g.nodes = nodes;
  for (auto& n : g.nodes) n.outputs.clear();
  replay::Plan plan(g, {});
  at::Tensor x = at::randn({4, 3}), h = at::randn({3});
  at::Tensor out = plan.runWith({x, h})[0].toTensor();
  for (int round = 0; round < 3; ++round)
    for (int64_t t = 0; t < 4; ++t) h = h.add(x.select(0, t));
  EXPECT_TRUE(at::equal(out, h));
}

// A body whose scan keeps 4 MiB per iteration, for as many iterations as
// a loop may run: the call's memory budget stops it.
TEST(Plan, LoopsThatKeepMemoryMeetTheBudget) {
  Graph g = sample::loopGraph();
  g.nodes[3].args[0] = Arg::integer(kMaxTripCount);
  g.nodes[5].args[2] = Arg::integer(0);  // x[0], whatever the index
  g.nodes[7] = sample::opNode("ones", "aten::ones", "", {Arg::none()});
  g.nodes[7].args[0].kind = Arg::Kind::IntList;
  g.nodes[7].args[0].ints = {int64_t(1) << 20};
  for (auto& n : g.nodes) n.outputs.clear();
  replay::Plan plan(g, {});
  replay::MemoryBudgetScope budget(64 << 20);
  try {
    plan.runWith({at::randn({5, 3}), at::randn({3})});
    ADD_FAILURE() << "the loop kept more than its budget";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("memory budget"), std::string::npos) << e.what();
  }
}

#include <gtest/gtest.h>

#include <algorithm>

#include <ATen/ATen.h>

#include "magpy/replay/passes.h"
#include "magpy/replay/plan.h"
#include "magpy/support/error.h"
#include "sample.h"

using namespace magpy;
using namespace magpy::record;
using replay::PassOptions;

namespace {

// Builds graphs node by node; values are node indices.
struct Builder {
  Graph g;
  int64_t input(NodeKind kind, const std::string& name) {
    Node n;
    n.kind = kind;
    n.name = n.target = name;
    n.source = kind == NodeKind::Placeholder ? AccessPath::arg(int64_t(g.nodes.size())) : AccessPath::self().attr(name);
    return add(n);
  }
  int64_t op(const std::string& target, const std::string& overload, std::vector<Arg> args) {
    Node n;
    n.name = target.substr(6) + std::to_string(g.nodes.size());
    n.target = target;
    n.overload = overload;
    n.args = std::move(args);
    return add(n);
  }
  void output(std::vector<int64_t> values) {
    Node n;
    n.kind = NodeKind::Output;
    n.name = "output";
    for (auto v : values) n.args.push_back(Arg::node(v));
    add(n);
  }
  int64_t add(Node n) {
    g.nodes.push_back(std::move(n));
    return int64_t(g.nodes.size() - 1);
  }
  size_t ops() const { return g.numOps(); }
};

Arg ints(std::vector<int64_t> v) {
  Arg a;
  a.kind = Arg::Kind::IntList;
  a.ints = std::move(v);
  return a;
}

replay::PassOptions only(const char* names) { return PassOptions::parse(names); }

}  // namespace

TEST(Passes, DeadCodeKeepsWritesAndOutputs) {
  Builder b;
  auto x = b.input(NodeKind::Placeholder, "x");
  b.op("aten::relu", "", {Arg::node(x)});                       // unused: dropped
  b.op("aten::add_", "Scalar", {Arg::node(x), Arg::floating(1), Arg::integer(1)});  // writes x: kept
  auto y = b.op("aten::neg", "", {Arg::node(x)});
  b.output({y});
  auto out = replay::optimize(b.g, only("dce"), true);
  EXPECT_EQ(out.graph.numOps(), 2u);
  EXPECT_EQ(out.applied, std::vector<std::string>{"dce: 1 unused nodes removed"});
  at::Tensor t = at::zeros({2});
  replay::Plan plan(b.g, {}, {only("dce"), true});
  auto r = plan.runWith({t});
  EXPECT_TRUE(at::allclose(t, at::ones({2})));  // the write happened
  EXPECT_TRUE(at::allclose(r[0].toTensor(), -at::ones({2})));
}

// The foreach operators write every tensor of their Tensor(a!)[] list: an
// operator on a parameter one of them updates is not computed once.
TEST(Passes, ForeachWritesKeepWhatTheyWriteFromFolding) {
  Builder b;
  auto x = b.input(NodeKind::Placeholder, "x");
  auto w = b.input(NodeKind::GetAttr, "w");
  auto v = b.input(NodeKind::GetAttr, "v");
  auto before = b.op("aten::exp", "", {Arg::node(v)});  // v is never written: folded
  b.op("aten::_foreach_add_", "Scalar", {Arg{Arg::Kind::NodeList, 0, 0, "", {w, x}, {}}, Arg::floating(1)});
  auto after = b.op("aten::exp", "", {Arg::node(w)});
  b.output({b.op("aten::add", "Tensor", {Arg::node(before), Arg::node(after), Arg::integer(1)})});  // the caller gets neither
  auto out = replay::optimize(b.g, only("fold"), true);
  EXPECT_TRUE(out.folded[size_t(before)]);
  EXPECT_FALSE(out.folded[size_t(after)]) << "w is written by the foreach add";
}

// A state that may be written without a new version (the JIT's state
// without --freeze-state) caches no parameter-only result.
TEST(Passes, NothingFoldsWhereTheStateIsNotCached) {
  Builder b;
  auto x = b.input(NodeKind::Placeholder, "x");
  auto v = b.input(NodeKind::GetAttr, "v");
  auto e = b.op("aten::exp", "", {Arg::node(v)});
  b.output({b.op("aten::add", "Tensor", {Arg::node(e), Arg::node(x), Arg::integer(1)})});
  EXPECT_TRUE(replay::optimize(b.g, only("fold"), true).folded[size_t(e)]);
  auto out = replay::optimize(b.g, only("fold"), true, /*cachesState=*/false);
  for (bool f : out.folded) EXPECT_FALSE(f);
  for (const std::string& a : out.applied) EXPECT_EQ(a.rfind("fold:", 0), std::string::npos) << a;
}

TEST(Passes, CommonSubexpressionsStopAtWrites) {
  Builder b;
  auto x = b.input(NodeKind::Placeholder, "x");
  auto a = b.op("aten::exp", "", {Arg::node(x)});
  auto a2 = b.op("aten::exp", "", {Arg::node(x)});              // same as a, used only inside: merged
  auto sum = b.op("aten::add", "Tensor", {Arg::node(a), Arg::node(a2), Arg::integer(1)});
  b.op("aten::mul_", "Scalar", {Arg::node(x), Arg::floating(2)});  // x changes
  auto a3 = b.op("aten::exp", "", {Arg::node(x)});              // not the same as a any more
  auto r1 = b.op("aten::rand_like", "", {Arg::node(x), Arg::none(), Arg::none(), Arg::none(), Arg::none(), Arg::none()});
  auto r2 = b.op("aten::rand_like", "", {Arg::node(x), Arg::none(), Arg::none(), Arg::none(), Arg::none(), Arg::none()});
  b.output({sum, a3, r1, r2});
  auto out = replay::optimize(b.g, only("cse"), true);
  EXPECT_EQ(out.graph.numOps(), 6u) << "one exp merged, random ops never";
  at::Tensor t = at::randn({3});
  at::Tensor t0 = t.clone();
  auto r = replay::Plan(b.g, {}, {only("cse"), true}).runWith({t});
  EXPECT_TRUE(at::allclose(r[0].toTensor(), t0.exp() * 2));
  EXPECT_TRUE(at::allclose(r[1].toTensor(), (t0 * 2).exp()));
  EXPECT_FALSE(at::allclose(r[2].toTensor(), r[3].toTensor()));
}

// Identical operators give distinct tensors in eager mode: when the graph
// writes one in place, or the caller gets both (and may write one), they
// stay two operators and two tensors.
TEST(Passes, CommonSubexpressionsKeepFreshTensorsDistinct) {
  Builder b;
  auto x = b.input(NodeKind::Placeholder, "x");
  auto none = Arg::none();
  auto h = b.op("aten::zeros", "", {ints({3}), none, none, none, none});
  auto c = b.op("aten::zeros", "", {ints({3}), none, none, none, none});
  b.op("aten::add_", "Tensor", {Arg::node(h), Arg::node(x), Arg::integer(1)});  // h written
  auto c1 = b.op("aten::clone", "", {Arg::node(x), none});
  auto c2 = b.op("aten::clone", "", {Arg::node(x), none});  // both returned
  b.output({h, c, c1, c2});
  auto out = replay::optimize(b.g, PassOptions(), true);
  EXPECT_EQ(out.graph.numOps(), 5u);
  at::Tensor t = at::ones({3});
  auto r = replay::Plan(b.g, {}, {PassOptions(), true}).runWith({t});
  EXPECT_TRUE(at::equal(r[0].toTensor(), at::ones({3})));
  EXPECT_TRUE(at::equal(r[1].toTensor(), at::zeros({3})));
  EXPECT_FALSE(r[2].toTensor().is_same(r[3].toTensor()));
}

// A random draw nobody uses still advances the generator.
TEST(Passes, DeadCodeKeepsRandomDraws) {
  Builder b;
  auto x = b.input(NodeKind::Placeholder, "x");
  b.op("aten::rand_like", "", {Arg::node(x), Arg::none(), Arg::none(), Arg::none(), Arg::none(), Arg::none()});
  auto y = b.op("aten::rand_like", "", {Arg::node(x), Arg::none(), Arg::none(), Arg::none(), Arg::none(), Arg::none()});
  b.output({y});
  EXPECT_EQ(replay::optimize(b.g, PassOptions(), true).graph.numOps(), 2u);
}

// A constant the graph writes, or returns, is a fresh copy in every run.
TEST(Plan, ConstantsWrittenOrReturnedAreFreshEachRun) {
  Builder b;
  auto x = b.input(NodeKind::Placeholder, "x");
  Node k;
  k.kind = NodeKind::GetAttr;
  k.name = k.target = "_tensor_constant";
  k.blob = 0;
  TensorMeta m;
  m.shape = {2};
  m.strides = {1};
  k.outputs = {m};
  auto acc = b.add(k);
  b.op("aten::add_", "Tensor", {Arg::node(acc), Arg::node(x), Arg::integer(1)});
  b.output({acc});
  TensorBlob zeros;
  zeros.dtype = "float32";
  zeros.shape = {2};
  zeros.bytes.assign(8, '\0');
  replay::Plan plan(b.g, {zeros}, {PassOptions(), true});
  for (int call = 0; call < 3; ++call) {
    auto r = plan.runWith({at::ones({2})});
    EXPECT_TRUE(at::equal(r[0].toTensor(), at::ones({2}))) << "call " << call;
    r[0].toTensor().add_(10);  // the caller writes the result
  }
}

TEST(Passes, EvalDropoutIsIdentity) {
  Builder b;
  auto x = b.input(NodeKind::Placeholder, "x");
  auto d = b.op("aten::dropout", "", {Arg::node(x), Arg::floating(0.5), Arg::boolean(false)});
  auto t = b.op("aten::dropout", "", {Arg::node(d), Arg::floating(0.5), Arg::boolean(true)});
  b.output({d, t});
  auto out = replay::optimize(b.g, only("dropout"), true);
  EXPECT_EQ(out.graph.numOps(), 1u);  // the training-mode one stays
}

TEST(Passes, ConvBatchNormFolding) {
  Builder b;
  auto x = b.input(NodeKind::Placeholder, "x");
  auto w = b.input(NodeKind::GetAttr, "w");
  auto gamma = b.input(NodeKind::GetAttr, "gamma");
  auto beta = b.input(NodeKind::GetAttr, "beta");
  auto mean = b.input(NodeKind::GetAttr, "mean");
  auto var = b.input(NodeKind::GetAttr, "var");
  auto conv = b.op("aten::conv2d", "", {Arg::node(x), Arg::node(w), Arg::none(), ints({1, 1}), ints({1, 1}), ints({1, 1}), Arg::integer(1)});
  auto bn = b.op("aten::batch_norm", "", {Arg::node(conv), Arg::node(gamma), Arg::node(beta), Arg::node(mean), Arg::node(var),
                                          Arg::boolean(false), Arg::floating(0.1), Arg::floating(1e-5), Arg::boolean(false)});
  auto r = b.op("aten::relu", "", {Arg::node(bn)});
  b.output({r});

  auto out = replay::optimize(b.g, PassOptions::all(), true);
  for (auto& n : out.graph.nodes) EXPECT_NE(n.target, "aten::batch_norm");
  size_t folded = 0;
  for (bool f : out.folded) folded += f;
  EXPECT_GE(folded, 5u);  // the new weight and bias are parameter-only

  at::Tensor tx = at::randn({2, 3, 8, 8}), tw = at::randn({4, 3, 3, 3}), tg = at::rand({4}) + 0.5, tb = at::randn({4}),
             tm = at::randn({4}), tv = at::rand({4}) + 0.5;
  auto expected = at::batch_norm(at::conv2d(tx, tw, {}, 1, 1), tg, tb, tm, tv, false, 0.1, 1e-5, false).relu();
  replay::Plan plan(b.g, {}, {PassOptions::all(), true});
  EXPECT_TRUE(at::allclose(plan.runWith({tx, tw, tg, tb, tm, tv})[0].toTensor(), expected, 1e-4, 1e-5));
  // The folded weights are cached, and recomputed when a parameter changes.
  EXPECT_TRUE(at::allclose(plan.runWith({tx, tw, tg, tb, tm, tv})[0].toTensor(), expected, 1e-4, 1e-5));
  tg.mul_(2);
  auto changed = at::batch_norm(at::conv2d(tx, tw, {}, 1, 1), tg, tb, tm, tv, false, 0.1, 1e-5, false).relu();
  EXPECT_TRUE(at::allclose(plan.runWith({tx, tw, tg, tb, tm, tv})[0].toTensor(), changed, 1e-4, 1e-5));
  at::Tensor other = tw.clone().neg_();
  auto replaced = at::batch_norm(at::conv2d(tx, other, {}, 1, 1), tg, tb, tm, tv, false, 0.1, 1e-5, false).relu();
  EXPECT_TRUE(at::allclose(plan.runWith({tx, other, tg, tb, tm, tv})[0].toTensor(), replaced, 1e-4, 1e-5));
}

TEST(Passes, LinearOnAMatrixIsAddmmOnACachedTranspose) {
  Builder b;
  auto meta = [](std::vector<int64_t> shape) {
    TensorMeta m;
    m.shape = std::move(shape);
    return std::vector<TensorMeta>{m};
  };
  auto x = b.input(NodeKind::Placeholder, "x");
  auto x3 = b.input(NodeKind::Placeholder, "x3");
  auto w = b.input(NodeKind::GetAttr, "w");
  auto bias = b.input(NodeKind::GetAttr, "bias");
  b.g.nodes[size_t(x)].outputs = meta({2, 5});
  b.g.nodes[size_t(x3)].outputs = meta({2, 4, 5});
  b.g.nodes[size_t(w)].outputs = meta({3, 5});
  b.g.nodes[size_t(bias)].outputs = meta({3});
  auto matrix = b.op("aten::linear", "", {Arg::node(x), Arg::node(w), Arg::node(bias)});
  auto batched = b.op("aten::linear", "", {Arg::node(x3), Arg::node(w), Arg::node(bias)});  // matmul inside linear
  auto unbiased = b.op("aten::linear", "", {Arg::node(x), Arg::node(w), Arg::none()});   // mm inside linear
  b.output({matrix, batched, unbiased});

  auto count = [](const replay::OptimizedGraph& o, const std::string& target) {
    return std::count_if(o.graph.nodes.begin(), o.graph.nodes.end(), [&](const Node& n) { return n.target == target; });
  };
  auto out = replay::optimize(b.g, PassOptions(), true);
  EXPECT_EQ(count(out, "aten::addmm"), 1);
  EXPECT_EQ(count(out, "aten::linear"), 2);
  for (size_t i = 0; i < out.graph.nodes.size(); ++i)
    if (out.graph.nodes[i].target == "aten::t") EXPECT_TRUE(out.folded[i]);
  // Without cached state (the JIT) the transpose would be made per call: linear stays.
  EXPECT_EQ(count(replay::optimize(b.g, PassOptions(), true, /*cachesState=*/false), "aten::addmm"), 0);
  EXPECT_EQ(count(replay::optimize(b.g, PassOptions(), /*inference=*/false), "aten::addmm"), 0);

  // The same bits as linear, also after the weight is written or replaced.
  at::Tensor tx = at::randn({2, 5}), tx3 = at::randn({2, 4, 5}), tw = at::randn({3, 5}), tb = at::randn({3});
  replay::Plan plan(b.g, {}, {PassOptions(), true});
  auto check = [&](const at::Tensor& weight) {
    auto r = plan.runWith({tx, tx3, weight, tb});
    EXPECT_TRUE(at::equal(r[0].toTensor(), at::linear(tx, weight, tb)));
    EXPECT_TRUE(at::equal(r[1].toTensor(), at::linear(tx3, weight, tb)));
    EXPECT_TRUE(at::equal(r[2].toTensor(), at::linear(tx, weight)));
  };
  check(tw);
  check(tw);
  tw.mul_(2);
  check(tw);
  check(at::randn({3, 5}));
}

TEST(Passes, PythonNumbersAreCastOnceToTheirOperatorsDtype) {
  Builder b;
  auto meta = [](const char* dtype) {
    TensorMeta m;
    m.dtype = dtype;
    m.shape = {64};
    return std::vector<TensorMeta>{m};
  };
  auto number = [](double v) {
    Arg a = Arg::floating(v);
    a.kind = Arg::Kind::WrappedScalar;
    a.s = "float64";
    return a;
  };
  auto x = b.input(NodeKind::Placeholder, "x"), xd = b.input(NodeKind::Placeholder, "xd");
  b.g.nodes[size_t(x)].outputs = meta("float32");
  b.g.nodes[size_t(xd)].outputs = meta("float64");
  // Values float32 does not hold exactly, so a wrong cast shows.
  auto mul = b.op("aten::mul", "Tensor", {Arg::node(x), number(0.1)});
  auto div = b.op("aten::div", "Tensor", {Arg::node(mul), number(3.3)});
  auto sub = b.op("aten::sub", "Tensor", {number(1e-40), Arg::node(div), Arg::integer(1)});
  auto inDouble = b.op("aten::mul", "Tensor", {Arg::node(xd), number(0.1)});
  auto pow = b.op("aten::pow", "Tensor_Scalar", {Arg::node(x), Arg::floating(0.7)});
  for (auto n : {mul, div, sub}) b.g.nodes[size_t(n)].outputs = meta("float32");
  b.g.nodes[size_t(inDouble)].outputs = meta("float64");
  b.g.nodes[size_t(pow)].outputs = meta("float32");
  b.output({sub, inDouble, pow});

  auto out = replay::optimize(b.g, PassOptions(), true);
  std::vector<std::string> dtypes;
  for (auto& n : out.graph.nodes)
    for (auto& a : n.args)
      if (a.kind == Arg::Kind::WrappedScalar) dtypes.push_back(n.target + ":" + a.s);
  EXPECT_EQ(dtypes, (std::vector<std::string>{"aten::mul:float32", "aten::div:float32", "aten::sub:float32",
                                              "aten::mul:float64"}));
  auto untouched = replay::optimize(b.g, PassOptions(), /*inference=*/false);
  for (auto& n : untouched.graph.nodes)
    for (auto& a : n.args)
      if (a.kind == Arg::Kind::WrappedScalar) EXPECT_EQ(a.s, "float64");

  // The same bits as the kernels' own cast of Python's float64 number.
  auto wrapped = [](double v) {  // as Python passes a float where a Tensor goes
    at::Tensor t = at::scalar_tensor(v, at::kDouble);
    t.unsafeGetTensorImpl()->set_wrapped_number(true);
    return t;
  };
  at::Tensor tx = at::randn({64}), txd = at::randn({64}, at::kDouble);
  replay::Plan plan(b.g, {}, {PassOptions(), true});
  auto r = plan.runWith({tx, txd});
  EXPECT_TRUE(at::equal(r[0].toTensor(), at::sub(wrapped(1e-40), at::div(at::mul(tx, wrapped(0.1)), wrapped(3.3)))));
  EXPECT_TRUE(at::equal(r[1].toTensor(), at::mul(txd, wrapped(0.1))));
}

TEST(Passes, TrainingBatchNormIsNotFolded) {
  Builder b;
  auto x = b.input(NodeKind::Placeholder, "x");
  auto mean = b.input(NodeKind::GetAttr, "mean");
  auto var = b.input(NodeKind::GetAttr, "var");
  auto doubled = b.op("aten::mul", "Scalar", {Arg::node(mean), Arg::floating(2)});
  auto bn = b.op("aten::batch_norm", "", {Arg::node(x), Arg::none(), Arg::none(), Arg::node(mean), Arg::node(var),
                                          Arg::boolean(true), Arg::floating(0.1), Arg::floating(1e-5), Arg::boolean(false)});
  b.output({bn, doubled});
  auto out = replay::optimize(b.g, PassOptions::all(), true);
  for (bool f : out.folded) EXPECT_FALSE(f) << "mean is written by the batch norm: nothing read from it is constant";
}

TEST(Passes, Parse) {
  EXPECT_FALSE(PassOptions::parse("none").deadCode);
  PassOptions o = PassOptions::parse("cse,fold");
  EXPECT_TRUE(o.commonSubexpr);
  EXPECT_TRUE(o.foldConstants);
  EXPECT_FALSE(o.deadCode);
  EXPECT_THROW(PassOptions::parse("cse,fast"), Error);
  EXPECT_FALSE(PassOptions::parse("default").foldConvBatchNorm);
  EXPECT_TRUE(PassOptions::parse("default").foldConstants);
  EXPECT_TRUE(PassOptions::parse("all").foldConvBatchNorm);
}

// resize_ reads nothing of its tensor; growing it leaves the new elements
// unwritten until an operator writes all of it.
TEST(Passes, ResizeThatGrowsLeavesUnwrittenMemory) {
  auto sized = [](Builder& b, int64_t node, int64_t n) {
    b.g.nodes[size_t(node)].outputs.push_back(TensorMeta{"float32", {n}, {1}});
    return node;
  };
  auto none = Arg::none();
  {
    Builder b;
    auto x = sized(b, b.input(NodeKind::Placeholder, "x"), 3);
    auto z = sized(b, b.op("aten::zeros", "", {ints({2}), none, none, none, none}), 2);
    auto grown = sized(b, b.op("aten::resize_", "", {Arg::node(z), ints({3}), none}), 3);
    b.output({sized(b, b.op("aten::add", "Tensor", {Arg::node(grown), Arg::node(x), Arg::integer(1)}), 3)});
    std::string why = replay::readsUninitialized(b.g);
    EXPECT_NE(why.find("%resize_2 grows %zeros1 and %add3 reads it"), std::string::npos) << why;
  }
  {
    Builder b;
    auto x = sized(b, b.input(NodeKind::Placeholder, "x"), 3);
    auto e = sized(b, b.op("aten::empty", "memory_format", {ints({0}), none, none, none, none, none}), 0);
    auto grown = sized(b, b.op("aten::resize_as_", "", {Arg::node(e), Arg::node(x), none}), 3);
    auto filled = sized(b, b.op("aten::copy_", "", {Arg::node(grown), Arg::node(x), Arg::boolean(false)}), 3);
    b.output({filled});
    EXPECT_EQ(replay::readsUninitialized(b.g), "");
  }
  for (int64_t n : {0, 2}) {
    Builder b;  // an empty allocation has nothing to read (torchvision's NMS of no boxes)
    auto x = sized(b, b.input(NodeKind::Placeholder, "x"), 3);
    auto e = sized(b, b.op("aten::empty", "memory_format", {ints({n}), none, none, none, none, none}), n);
    Arg keep;
    keep.kind = Arg::Kind::NodeList;
    keep.ints = {e};
    b.output({sized(b, b.op("aten::index", "Tensor", {Arg::node(x), keep}), n)});
    EXPECT_EQ(replay::readsUninitialized(b.g).empty(), n == 0) << replay::readsUninitialized(b.g);
  }
  {
    Builder b;  // shrinking keeps what was written
    auto z = sized(b, b.op("aten::zeros", "", {ints({3}), none, none, none, none}), 3);
    b.output({sized(b, b.op("aten::resize_", "", {Arg::node(z), ints({2}), none}), 2)});
    EXPECT_EQ(replay::readsUninitialized(b.g), "");
  }
}

// In a record without symbols, sizes read from inputs, the arithmetic on
// them and the decisions they settle are constants: folded, so the graph
// lowers to TorchScript; a dynamic input keeps them.
TEST(Passes, SizesTheGuardsFixAreFolded) {
  for (bool dynamic : {false, true}) {
    Builder b;
    int64_t x = b.input(NodeKind::Placeholder, "x");
    b.g.nodes[size_t(x)].outputs = {TensorMeta{}};
    TensorMeta& m = b.g.nodes[size_t(x)].outputs[0];
    m.shape = {4, 3};
    m.strides = {3, 1};
    if (dynamic) m.sym = {SymDim{0, 1, 0, -1}, SymDim{-1, 1, 3, -1}};
    int64_t size = b.op("aten::size", "int", {Arg::node(x), Arg::integer(0)});
    int64_t half = b.op("operator.floordiv", "", {Arg::node(size), Arg::integer(2)});
    b.g.nodes[size_t(half)].number = "int";
    int64_t gt = b.op("operator.gt", "", {Arg::node(size), Arg::integer(2)});
    b.g.nodes[size_t(gt)].number = "bool";
    b.op("magpy.expect_true", "", {Arg::node(gt)});
    Arg shape;
    shape.kind = Arg::Kind::SizeList;
    shape.ints = {1, half, 0, -1};
    int64_t view = b.op("aten::view", "", {Arg::node(x), shape});
    int64_t scaled = b.op("aten::mul", "Tensor", {Arg::node(view), Arg::node(size)});
    b.output({scaled});
    auto out = replay::optimize(b.g, only("fold"), true);  // no dead-code pass: the fold removes what it folded
    size_t numbers = 0;
    for (auto& n : out.graph.nodes) numbers += !n.number.empty() || n.target == "aten::size" || isCheck(n.target);
    if (dynamic) {
      EXPECT_EQ(numbers, 4u);
      continue;
    }
    EXPECT_EQ(numbers, 0u);
    ASSERT_EQ(out.graph.nodes.size(), 4u);
    EXPECT_EQ(out.graph.nodes[1].args[1].kind, Arg::Kind::IntList);
    EXPECT_EQ(out.graph.nodes[1].args[1].ints, (std::vector<int64_t>{2, -1}));
    EXPECT_EQ(out.graph.nodes[2].args[1].kind, Arg::Kind::WrappedScalar);  // where mul takes a Tensor
    EXPECT_EQ(out.graph.nodes[2].args[1].i, 4);
    replay::Plan plan(b.g, {}, replay::PlanOptions{PassOptions(), true});
    EXPECT_EQ(plan.runWith({at::ones({4, 3})})[0].toTensor().sum().item<float>(), 48.0f);
  }
}

// A side of a branch runs only when its condition picks it: an operator
// after the branch is not merged with an identical one in a side, and a
// parameter-only operator in a side is not folded.
TEST(Passes, BranchSidesStayApart) {
  Graph g = sample::branchGraph();
  g.nodes[0].kind = NodeKind::GetAttr;  // x: a parameter
  g.nodes[0].source = AccessPath::self().attr("x");
  Node again = g.nodes[3];  // relu(x), after the branch
  again.name = "relu_again";
  g.nodes.insert(g.nodes.begin() + 9, again);  // 9
  g.nodes[10].args[1] = Arg::node(9);          // getitem + relu(x)
  g.nodes[11].args[0] = Arg::node(10);
  auto out = replay::optimize(g, PassOptions(), true);
  for (size_t i = 0; i < out.graph.nodes.size(); ++i) {
    if (out.graph.nodes[i].name == "relu") {
      EXPECT_FALSE(out.folded[i]);
    }
    if (out.graph.nodes[i].name == "relu_again") {
      EXPECT_TRUE(out.folded[i]);
    }
  }
  replay::Plan plan(g, {}, replay::PlanOptions{PassOptions(), true});
  at::Tensor x = at::randn({2, 3});
  for (double keep : {0.0, 1.0}) {
    at::Tensor want = (keep ? x.relu().mul(2) : x.neg()).add(x.relu());
    EXPECT_TRUE(at::allclose(plan.runWith({x, at::scalar_tensor(keep)})[0].toTensor(), want)) << keep;
  }
}

// A loop's body runs once per iteration: an operator in it that reads only
// parameters is not computed once per call (folded) but in each
// iteration, as the program runs it.
TEST(Passes, LoopBodiesAreNotFolded) {
  Graph g = sample::loopGraph();
  g.nodes[1].kind = NodeKind::GetAttr;  // h0: a parameter
  g.nodes[1].source = AccessPath::self().attr("h0");
  g.nodes[7].args[0] = Arg::node(1);  // the scan: h0 * 2, in the body
  auto out = replay::optimize(g, PassOptions(), true);
  bool seen = false;
  for (size_t i = 0; i < out.graph.nodes.size(); ++i)
    if (out.graph.nodes[i].name == "mul") {
      seen = true;
      EXPECT_FALSE(out.folded[i]);
    }
  EXPECT_TRUE(seen);
  replay::Plan plan(g, {});
  at::Tensor h0 = at::randn({3});
  EXPECT_TRUE(at::equal(plan.runWith({at::randn({4, 3}), h0})[1].toTensor(), at::stack({h0 * 2, h0 * 2, h0 * 2, h0 * 2})));
}

// A learning rate reaches only values: as alpha, in a foreach Scalar[]; a
// SizeList's constant entries are no uses of it, its node entries are.
TEST(Passes, OnlyScalesValuesFollowsTheNumbersUses) {
  auto graph = [](Arg use, const char* target, const char* overload) {
    Builder b;
    Node lr;
    lr.kind = NodeKind::GetAttr;
    lr.name = lr.target = "lr";
    lr.source = AccessPath::self().attr("lr");
    lr.number = "float";
    lr.seen = Atom::floating(0.1);
    b.add(lr);
    auto x = b.input(NodeKind::Placeholder, "x");
    if (std::string(target) == "aten::view")
      b.op(target, overload, {Arg::node(x), use});
    else
      b.op(target, overload, {Arg{Arg::Kind::NodeList, 0, 0, "", {x}, {}}, use});
    b.output({x});
    return b.g;
  };
  Arg scalars;
  scalars.kind = Arg::Kind::NumberList;
  scalars.ints = {0};
  scalars.floats = {0};
  EXPECT_TRUE(replay::onlyScalesValues(graph(scalars, "aten::_foreach_mul_", "ScalarList"), 0));
  EXPECT_TRUE(replay::onlyScalesValues(graph(Arg::node(0), "aten::_foreach_mul_", "Scalar"), 0));
  Arg sizes;
  sizes.kind = Arg::Kind::SizeList;
  sizes.ints = {0, 0, 0, 2};  // the constants 0 and 2: not node 0
  EXPECT_TRUE(replay::onlyScalesValues(graph(sizes, "aten::view", ""), 0));
  sizes.ints = {1, 0, 0, 2};  // node 0 as a size
  EXPECT_FALSE(replay::onlyScalesValues(graph(sizes, "aten::view", ""), 0));
}

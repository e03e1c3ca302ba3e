#include "magpy/record/generalize.h"

#include <gtest/gtest.h>

#include "magpy/record/format.h"
#include "magpy/support/error.h"
#include "sample.h"

using namespace magpy;
using namespace magpy::record;

namespace {

Check tensorCheck(std::vector<int64_t> shape, std::vector<int64_t> strides) {
  Check c;
  c.kind = Check::Kind::Tensor;
  c.meta = sample::meta(std::move(shape), std::move(strides));
  return c;
}

Node op(const std::string& name, const std::string& target, std::vector<Arg> args, TensorMeta out) {
  Node n = sample::opNode(name, target, "", std::move(args));
  n.outputs = {std::move(out)};
  return n;
}

// (x * self.w).sum(1) concatenated with x[:, 0] * 2 for x of shape [n, 3]:
// results of sizes n and 2n.
Record rowSums(int64_t n, std::vector<int64_t> xStrides = {3, 1}) {
  Record r;
  r.guards.push_back({AccessPath::arg(0), tensorCheck({n, 3}, xStrides)});
  r.guards.push_back({AccessPath::self().attr("w"), tensorCheck({3}, {1})});
  Node x;
  x.kind = NodeKind::Placeholder;
  x.name = "x";
  x.source = AccessPath::arg(0);
  x.outputs = {sample::meta({n, 3}, xStrides)};
  Node w = x;
  w.kind = NodeKind::GetAttr;
  w.name = "w";
  w.source = AccessPath::self().attr("w");
  w.outputs = {sample::meta({3}, {1})};
  Arg dims;
  dims.kind = Arg::Kind::IntList;
  dims.ints = {1};
  Node mul = op("mul", "aten::mul", {Arg::node(0), Arg::node(1)}, sample::meta({n, 3}, {3, 1}));
  Node sum = op("sum", "aten::sum", {Arg::node(2), dims}, sample::meta({n}, {1}));
  Node col = op("select", "aten::select", {Arg::node(0), Arg::integer(1), Arg::integer(0)}, sample::meta({n}, {3}));
  Arg both;
  both.kind = Arg::Kind::NodeList;
  both.ints = {3, 4};
  Node cat = op("cat", "aten::cat", {both, Arg::integer(0)}, sample::meta({2 * n}, {1}));
  Node out;
  out.kind = NodeKind::Output;
  out.name = "output";
  out.args = {Arg::node(5)};
  r.graph.nodes = {x, w, mul, sum, col, cat, out};
  r.mock.result = ValueExpr::output(0);
  return r;
}

}  // namespace

TEST(Generalize, ArgumentSizesBecomeOneSymbolAndResultsFollowIt) {
  Generalized g = generalize(rowSums(2), rowSums(5));
  ASSERT_TRUE(g.record) << g.why;
  EXPECT_TRUE(g.coversEarlier);
  const Record& r = *g.record;
  EXPECT_EQ(toString(r.guards[0]), "args[0]: tensor float32[s0, 3] contiguous cpu (sizes s >= 2)");
  EXPECT_FALSE(r.guards[1].check.meta.dynamic()) << "state keeps its sizes";
  EXPECT_EQ(typeText(r.graph.nodes[0].outputs[0]), "float32[s0, 3]");
  EXPECT_EQ(typeText(r.graph.nodes[3].outputs[0]), "float32[s0]");
  EXPECT_EQ(typeText(r.graph.nodes[5].outputs[0]), "float32[2*s0]");
  EXPECT_EQ(r.graph.nodes[5].outputs[0].shape, (std::vector<int64_t>{10})) << "the later capture's sizes stay as examples";
}

TEST(Generalize, SizeOneStaysARecordOfItsOwn) {
  Generalized g = generalize(rowSums(1), rowSums(4));
  ASSERT_TRUE(g.record) << g.why;
  EXPECT_FALSE(g.coversEarlier) << "every symbol is at least 2";
  EXPECT_FALSE(generalize(rowSums(4), rowSums(1)).record) << "a size that became 1 is not a symbol";
}

TEST(Generalize, RecordsThatDifferInMoreThanSizesStayApart) {
  Record other = rowSums(4);
  other.graph.nodes[3].args[1].ints = {0};
  EXPECT_NE(generalize(rowSums(2), other).why.find("takes other arguments"), std::string::npos);

  Record state = rowSums(4);
  state.guards[1].check.meta = sample::meta({4}, {1});
  EXPECT_NE(generalize(rowSums(2), state).why.find("only arguments' sizes may change"), std::string::npos);

  EXPECT_NE(generalize(rowSums(2, {1, 2}), rowSums(4, {1, 4})).why.find("not contiguous"), std::string::npos);

  Record mock = rowSums(4);
  mock.mock.result = ValueExpr::constant(Atom::integer(4));
  EXPECT_FALSE(generalize(rowSums(2), mock).record);

  Record odd = rowSums(4);
  odd.graph.nodes[5].outputs[0].shape = {9};  // 4 -> 9 while the argument went 2 -> 4: no scale * s + offset
  EXPECT_NE(generalize(rowSums(2), odd).why.find("which no argument size or number the graph computes explains"), std::string::npos);

  EXPECT_FALSE(generalize(rowSums(3), rowSums(3)).record) << "nothing to make dynamic";
}

TEST(Generalize, DimensionsThatChangeTogetherShareASymbol) {
  auto twoArgs = [](int64_t n, int64_t m) {
    Record r = rowSums(n);
    r.guards.push_back({AccessPath::arg(1), tensorCheck({m, 3}, {3, 1})});
    return r;
  };
  Generalized same = generalize(twoArgs(2, 2), twoArgs(4, 4));
  ASSERT_TRUE(same.record) << same.why;
  EXPECT_EQ(typeText(same.record->guards[2].check.meta), "float32[s0, 3]") << "equal sizes stay equal";
  Generalized apart = generalize(twoArgs(2, 3), twoArgs(4, 6));
  ASSERT_TRUE(apart.record) << apart.why;
  EXPECT_EQ(typeText(apart.record->guards[2].check.meta), "float32[s1, 3]");
}

TEST(Generalize, ADynamicRecordTakesANewDimension) {
  auto grid = [](int64_t n, int64_t k) {
    Record r = rowSums(n);
    r.guards[0].check.meta = sample::meta({n, k}, {k, 1});
    r.graph.nodes[0].outputs[0] = r.guards[0].check.meta;
    return r;
  };
  Generalized first = generalize(grid(2, 3), grid(4, 3));
  ASSERT_TRUE(first.record) << first.why;
  Generalized second = generalize(*first.record, grid(4, 5));
  ASSERT_TRUE(second.record) << second.why;
  EXPECT_TRUE(second.coversEarlier);
  EXPECT_EQ(typeText(second.record->guards[0].check.meta), "float32[s0, s1]");
  // A dynamic record's sizes must hold in the new capture too.
  Record broken = grid(6, 5);
  broken.graph.nodes[5].outputs[0].shape = {11};
  EXPECT_NE(generalize(*first.record, broken).why.find("does not hold"), std::string::npos);
}

TEST(Generalize, DynamicRecordsRoundTripAndHostileSizesAreRefused) {
  RecordFile f = sample::sampleFile();
  f.functions[0].records.push_back(*generalize(rowSums(2), rowSums(5)).record);
  RecordFile back = decode(encode(f));
  EXPECT_EQ(back.functions[0].records[1].graph.nodes[5].outputs[0].sym, f.functions[0].records[1].graph.nodes[5].outputs[0].sym);
  EXPECT_EQ(back.functions[0].records[1].guards[0], f.functions[0].records[1].guards[0]);

  auto refused = [&](auto mutate, const std::string& words) {
    RecordFile bad = f;
    mutate(bad.functions[0].records[1]);
    try {
      decode(encode(bad));
      ADD_FAILURE() << "accepted: " << words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  refused([](Record& r) { r.guards[0].check.meta.sym[0].symbol = 3; }, "no guard binds s0");
  refused([](Record& r) { r.guards[0].check.meta.sym[0].scale = 2; }, "not a symbol");
  refused([](Record& r) { r.graph.nodes[5].outputs[0].sym[0].symbol = kMaxSymbols; }, "size symbol");
  refused([](Record& r) { r.graph.nodes[5].outputs[0].sym.push_back({}); }, "dynamic sizes for");
  refused([](Record& r) { r.graph.nodes[5].outputs[0].sym[0].scale = int64_t(1) << 40; }, "out of the range");
  refused([](Record& r) { r.graph.nodes[1].outputs[0].sym = {SymDim{-1, 1, 7}}; }, "disagrees with its shape");
  refused([](Record& r) { r.graph.nodes[3].args[1] = Arg{Arg::Kind::SizeList, 0, 0, "", {1}, {}}; }, "size list");
  refused([](Record& r) { r.graph.nodes[3].args[1] = Arg{Arg::Kind::SizeList, 0, 0, "", {1, 5}, {}}; }, "not defined before");
  refused([](Record& r) { r.graph.nodes[3].args[1] = Arg{Arg::Kind::SizeList, 0, 0, "", {2, 0}, {}}; }, "size list");
}

namespace {

// x.view(x.size(0) // 2, -1) for x of shape [n, 3].
Record halves(int64_t n) {
  Record r;
  r.guards.push_back({AccessPath::arg(0), tensorCheck({n, 3}, {3, 1})});
  Node x;
  x.kind = NodeKind::Placeholder;
  x.name = "x";
  x.source = AccessPath::arg(0);
  x.outputs = {sample::meta({n, 3}, {3, 1})};
  Node size = sample::opNode("size", "aten::size", "int", {Arg::node(0), Arg::integer(0)});
  Node half = sample::opNode("floordiv", "operator.floordiv", "", {Arg::node(1), Arg::integer(2)});
  half.number = "int";
  half.seen = Atom::integer(n / 2);
  Arg shape;
  shape.kind = Arg::Kind::SizeList;
  shape.ints = {1, 2, 0, -1};
  Node view = op("view", "aten::view", {Arg::node(0), shape}, sample::meta({n / 2, 6}, {6, 1}));
  Node sum = op("sum", "aten::sum", {Arg::node(3)}, sample::meta({n / 2}, {1}));
  Node out;
  out.kind = NodeKind::Output;
  out.name = "output";
  out.args = {Arg::node(4)};
  r.graph.nodes = {x, size, half, view, sum, out};
  r.mock.result = ValueExpr::output(0);
  return r;
}

}  // namespace

// A result size the program's arithmetic gave is that node's value, in
// the size list's place and in the results computed from it; a later
// capture that follows no rule stays apart.
TEST(Generalize, SizesTheProgramComputedAreTheValuesOfTheirNodes) {
  Generalized g = generalize(halves(4), halves(8));
  ASSERT_TRUE(g.record) << g.why;
  const Graph& graph = g.record->graph;
  EXPECT_EQ(graph.nodes[3].outputs[0].sym[0].node, 2);
  EXPECT_EQ(graph.nodes[3].outputs[0].sym[1].symbol, -1);
  EXPECT_EQ(graph.nodes[4].outputs[0].sym[0].node, 2);  // propagated from the view's
  Record wrong = halves(8);
  wrong.graph.nodes[4].outputs[0].shape = {5};  // 2 -> 5: neither the view's rows nor any rule of 4 -> 8
  EXPECT_NE(generalize(halves(4), wrong).why.find("no argument size or number the graph computes explains"),
            std::string::npos);
}

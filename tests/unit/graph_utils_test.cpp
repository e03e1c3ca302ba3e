#include <gtest/gtest.h>

#include "magpy/record/graph_utils.h"
#include "magpy/support/error.h"

using namespace magpy::record;

namespace {

Node input(const std::string& name) {
  Node n;
  n.kind = NodeKind::Placeholder;
  n.name = n.target = name;
  return n;
}

Node op(const std::string& name, std::vector<Arg> args) {
  Node n;
  n.name = name;
  n.target = "aten::" + name;
  n.args = std::move(args);
  return n;
}

Node output(std::vector<Arg> args) {
  Node n;
  n.kind = NodeKind::Output;
  n.name = n.target = "output";
  n.args = std::move(args);
  return n;
}

Arg nodeList(std::vector<int64_t> indices) {
  Arg a;
  a.kind = Arg::Kind::NodeList;
  a.ints = std::move(indices);
  return a;
}

// x, y -> cat([x, None, y]) -> add(cat, x) -> output(add)
Graph catGraph() {
  Graph g;
  g.nodes = {input("x"), input("y"), op("cat", {nodeList({0, -1, 1}), Arg::integer(0)}),
             op("add", {Arg::node(2), Arg::node(0), Arg::integer(1)}), output({Arg::node(3)})};
  return g;
}

std::vector<std::string> names(const Graph& g) {
  std::vector<std::string> out;
  for (auto& n : g.nodes) out.push_back(n.name);
  return out;
}

}  // namespace

TEST(GraphUtils, ArgWalkVisitsNodesAndListEntriesButNotNone) {
  Graph g = catGraph();
  std::vector<int64_t> seen;
  forEachNodeArg(g.nodes[2], [&](int64_t i) { seen.push_back(i); });
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1}));
  seen.clear();
  forEachNodeArg(g.nodes[3], [&](int64_t i) { seen.push_back(i); });
  EXPECT_EQ(seen, (std::vector<int64_t>{2, 0}));  // the Int argument is no node
}

TEST(GraphUtils, MutableArgWalkRepointsUses) {
  Graph g = catGraph();
  forEachNodeArg(g.nodes[2], [](int64_t& i) { i += 10; });
  EXPECT_EQ(g.nodes[2].args[0].ints, (std::vector<int64_t>{10, -1, 11}));
}

TEST(GraphUtils, UseCountsCountEachUse) {
  Graph g = catGraph();
  g.nodes[3].args[1] = Arg::node(2);  // add(cat, cat)
  EXPECT_EQ(useCounts(g), (std::vector<size_t>{1, 1, 2, 1, 0}));
}

TEST(GraphUtils, NodesAreNamedWithTheirSourceLine) {
  Node n = op("conv2d", {});
  EXPECT_EQ(nameAndSource(n), "%conv2d");
  n.where = "model.py:41";
  EXPECT_EQ(nameAndSource(n), "%conv2d (model.py:41)");
}

TEST(GraphUtils, ReplacementsFollowChains) {
  Replacements r(4);
  r.replace(3, 2);
  r.replace(2, 1);
  EXPECT_EQ(r.resolve(3), 1);
  EXPECT_EQ(r.resolve(0), 0);
}

TEST(GraphUtils, RemovingNodesRenumbersTheRest) {
  Graph g = catGraph();
  g.nodes.insert(g.nodes.begin() + 1, op("unused", {Arg::node(0)}));  // x, unused, y, cat, add, output
  g.nodes[3].args[0].ints = {0, -1, 2};
  g.nodes[4].args[0] = Arg::node(3);
  g.nodes[5].args[0] = Arg::node(4);
  Graph out = removeNodes(g, {true, false, true, true, true, true});
  EXPECT_EQ(names(out), (std::vector<std::string>{"x", "y", "cat", "add", "output"}));
  EXPECT_EQ(out.nodes[2].args[0].ints, (std::vector<int64_t>{0, -1, 1}));
  EXPECT_EQ(out.nodes[3].args[0].i, 2);
  EXPECT_EQ(out.nodes[4].args[0].i, 3);
}

TEST(GraphUtils, RemovedNodesHandTheirUsesToTheirReplacement) {
  Graph g = catGraph();
  Replacements r(g.nodes.size());
  r.replace(3, 2);  // output(add) becomes output(cat)
  Graph out = removeNodes(g, {true, true, true, false, true}, r);
  EXPECT_EQ(names(out), (std::vector<std::string>{"x", "y", "cat", "output"}));
  EXPECT_EQ(out.nodes[3].args[0].i, 2);
}

TEST(GraphUtils, RemovingANodeStillUsedIsAnError) {
  EXPECT_THROW(removeNodes(catGraph(), {true, false, true, true, true}), magpy::Error);
}

TEST(GraphUtils, LiveNodesAreWhatOutputsAndSideEffectsNeed) {
  Graph g = catGraph();
  // x, y, cat, add, fill_(y), relu(x), output(add)
  g.nodes.insert(g.nodes.end() - 1, op("fill_", {nodeList({-1, 1})}));
  g.nodes.insert(g.nodes.end() - 1, op("relu", {Arg::node(0)}));
  auto pure = [](const Node&) { return false; };
  EXPECT_EQ(liveNodes(g, pure), (std::vector<bool>{true, true, true, true, false, false, true}));

  g.nodes[3].args[0] = Arg::node(0);  // add(x, x): cat and y are no longer needed...
  EXPECT_EQ(liveNodes(g, pure), (std::vector<bool>{true, false, false, true, false, false, true}));
  auto writes = [](const Node& n) { return n.name == "fill_"; };  // ...unless something with effects uses y
  EXPECT_EQ(liveNodes(g, writes), (std::vector<bool>{true, true, false, true, true, false, true}));
}

TEST(GraphUtils, NamespaceCountsUpPerName) {
  Namespace ns;
  EXPECT_EQ(ns.create("linear"), "linear");
  EXPECT_EQ(ns.create("linear"), "linear_1");
  EXPECT_EQ(ns.create("relu"), "relu");
  EXPECT_EQ(ns.create("linear"), "linear_2");
}

TEST(GraphUtils, NamespaceSkipsTakenNames) {
  Namespace ns({"output"});
  ns.reserve("x_1");
  EXPECT_EQ(ns.create("output"), "output_1");
  EXPECT_EQ(ns.create("x"), "x");
  EXPECT_EQ(ns.create("x"), "x_2");
  EXPECT_EQ(ns.create("x_2"), "x_2_1");  // a suffix is not parsed back out of a candidate
}

TEST(GraphUtils, NamespaceMakesIdentifiers) {
  Namespace ns;
  EXPECT_EQ(ns.create("fc1.weight"), "fc1_weight");
  EXPECT_EQ(ns.create("blocks.0.norm-1"), "blocks_0_norm_1");
  EXPECT_EQ(ns.create("0"), "_0");
  EXPECT_EQ(ns.create(""), "_");
  EXPECT_EQ(ns.create("caf\xc3\xa9"), "caf__");
}

TEST(GraphUtils, NamespaceAvoidsPythonKeywords) {
  Namespace ns;
  EXPECT_EQ(ns.create("lambda"), "lambda_1");
  EXPECT_EQ(ns.create("None"), "None_1");
  EXPECT_EQ(ns.create("lambda"), "lambda_2");
  EXPECT_EQ(ns.create("none"), "none");
}

TEST(GraphUtils, IdentifiersAreNamesPythonCanBind) {
  EXPECT_TRUE(isIdentifier("fc1_weight"));
  EXPECT_TRUE(isIdentifier("_0"));
  EXPECT_FALSE(isIdentifier("0a"));
  EXPECT_FALSE(isIdentifier(""));
  EXPECT_FALSE(isIdentifier("fc1.weight"));
  EXPECT_FALSE(isIdentifier("class"));
}

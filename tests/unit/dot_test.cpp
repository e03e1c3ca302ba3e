#include <gtest/gtest.h>

#include "magpy/record/dot.h"
#include "sample.h"

using namespace magpy::record;

TEST(Dot, OperatorGraphFollowsData) {
  const RecordFile f = magpy::sample::sampleFile();
  const Record& r = f.functions[0].records[0];
  std::string d = graphDot(r.graph, "Net");
  EXPECT_EQ(d.rfind("digraph magpy {", 0), 0u) << d;
  EXPECT_NE(d.find("n2 [label=\"mul = aten::mul.Tensor\\nfloat32[2]\", shape=box]"), std::string::npos) << d;
  EXPECT_NE(d.find("n0 -> n2;"), std::string::npos) << d;
  EXPECT_NE(d.find("n1 -> n2;"), std::string::npos) << d;
  EXPECT_NE(d.find("n4 -> n5;"), std::string::npos) << d;
}

// A loop's body is a cluster, from its carried values to its end.
TEST(Dot, LoopBodiesAreClusters) {
  std::string d = graphDot(magpy::sample::loopGraph(), "loop");
  size_t open = d.find("subgraph cluster_n3 {"), carried = d.find("  n4 ["), close = d.find("  }\n  n8 [");
  EXPECT_LT(d.find("  n3 ["), open) << d;
  EXPECT_LT(open, carried) << d;
  EXPECT_NE(close, std::string::npos) << d;
  EXPECT_LT(d.find("  n7 ["), close) << d;
}

// A branch's sides are clusters of their own.
TEST(Dot, BranchSidesAreClusters) {
  std::string d = graphDot(magpy::sample::branchGraph(), "branch");
  size_t then = d.find("subgraph cluster_n2 {"), otherwise = d.find("subgraph cluster_n5 {");
  EXPECT_LT(then, d.find("  n3 [")) << d;
  EXPECT_LT(d.find("  n4 ["), d.find("  }\n  n5 [")) << d;
  EXPECT_LT(otherwise, d.find("  n6 [")) << d;
  EXPECT_NE(d.find("label=\"else %if_else\""), std::string::npos) << d;
  EXPECT_LT(d.find("  n6 ["), d.find("  }\n  n7 [")) << d;
}

TEST(Dot, RefGraphMarksGuardsMockAndVersions) {
  const RecordFile f = magpy::sample::sampleFile();
  const Record& r = f.functions[0].records[0];
  std::string d = refGraphDot(r.refs, "Net");
  EXPECT_NE(d.find("r1 [label=\"Net\\nv0..v1\", shape=box, style=\"filled,striped\", fillcolor=\"#cfe2ff:#ffd8a8\"]"),
            std::string::npos)
      << d;
  EXPECT_NE(d.find("r1 -> r5 [label=\".calls (v1)\", style=dashed];"), std::string::npos) << d;
  EXPECT_NE(d.find("r6 [label=\"Tensor float32[2]\", shape=box, style=\"filled,rounded\", fillcolor=\"#d1e7dd\"]"),
            std::string::npos)
      << d;
}

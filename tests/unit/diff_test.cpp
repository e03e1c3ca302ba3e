#include <gtest/gtest.h>

#include "magpy/record/diff.h"
#include "sample.h"

using namespace magpy::record;

namespace {

const Change* find(const std::vector<Change>& changes, const std::string& what, const std::string& subject) {
  for (auto& c : changes)
    if (c.what == what && c.subject == subject) return &c;
  return nullptr;
}

}  // namespace

TEST(Diff, SameFileHasNoChanges) {
  RecordFile a = magpy::sample::sampleFile();
  EXPECT_TRUE(diffRecords(a, a).empty());
  EXPECT_EQ(printChanges({}, false), "records are the same\n");
}

TEST(Diff, GuardChangeNamesPathAndBothChecks) {
  RecordFile a = magpy::sample::sampleFile(), b = a;
  b.functions[0].records[0].guards[2].check.atom = Atom::floating(2.0);
  auto changes = diffRecords(a, b);
  const Change* c = find(changes, "guard changed", "self.scale");
  ASSERT_NE(c, nullptr) << printChanges(changes, false);
  EXPECT_EQ(c->before, "== 1.0");
  EXPECT_EQ(c->after, "== 2.0");
  EXPECT_EQ(c->function, "__main__.Net");
  EXPECT_EQ(c->record, 0);
  EXPECT_NE(printChanges(changes, false).find("guard changed: self.scale: == 1.0 -> == 2.0"), std::string::npos);
}

TEST(Diff, ParameterChangeShowsContentHash) {
  RecordFile a = magpy::sample::sampleFile(), b = a;
  b.blobs[0] = magpy::sample::floatBlob({2}, {1.5f, -3.0f});
  auto changes = diffRecords(a, b);
  const Change* c = find(changes, "parameter changed", "self.w");
  ASSERT_NE(c, nullptr) << printChanges(changes, false);
  EXPECT_NE(c->before.find("float32[2]"), std::string::npos);
  EXPECT_NE(c->before, c->after);
}

TEST(Diff, NodesAddedAndEnvironment) {
  RecordFile a = magpy::sample::sampleFile(), b = a;
  auto& nodes = b.functions[0].records[0].graph.nodes;
  Node neg = nodes[3];
  neg.name = "neg";
  neg.target = "aten::neg";
  nodes.insert(nodes.end() - 1, neg);
  b.env.torch_version = "2.1.0";
  auto changes = diffRecords(a, b);
  EXPECT_NE(find(changes, "node added", "%neg"), nullptr) << printChanges(changes, false);
  const Change* env = find(changes, "environment changed", "torch");
  ASSERT_NE(env, nullptr);
  EXPECT_EQ(env->before, "1.13.0");
  std::string json = printChanges(changes, true);
  EXPECT_NE(json.find("\"same\": false"), std::string::npos) << json;
  EXPECT_NE(json.find("\"what\": \"node added\""), std::string::npos) << json;
}

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

// A chain of 60 pairs, each holding the next one twice, reaches its end by
// 2^60 paths: the listing must name each object once and refer back after.
TEST(Diff, SharedObjectsAreListedOnceAndReferredBackTo) {
  RecordFile a = magpy::sample::sampleFile();
  Value chain = Value::ofAtom(Atom::integer(7));
  for (uint32_t id = 1; id <= 60; ++id) {
    Value pair;
    pair.kind = Value::Kind::List;
    Value ref;
    ref.kind = Value::Kind::Ref;
    ref.id = id;
    chain.id = id;
    pair.items = {std::move(chain), ref};
    chain = std::move(pair);
  }
  a.functions[0].self.names.push_back("chain");
  a.functions[0].self.items.push_back(chain);
  RecordFile b = a;
  b.functions[0].self.items.back().items[1] = Value::ofAtom(Atom::integer(8));
  auto changes = diffRecords(a, b);
  ASSERT_EQ(changes.size(), 1u) << printChanges(changes, false);
  EXPECT_EQ(changes[0].subject, "self.chain[1]");
  EXPECT_EQ(changes[0].before, "same object as self.chain[0]");
}

// mergeSnapshot (capture/live.h): what a later call's snapshot adds to the
// run's first state, and which of its aliasing survives.
#include <gtest/gtest.h>

#include "capture/live.h"

using namespace magpy;
using record::Atom;
using record::Value;

namespace {

Value list(uint32_t id, int64_t item) {
  Value v;
  v.kind = Value::Kind::List;
  v.id = id;
  v.items = {Value::ofAtom(Atom::integer(item))};
  return v;
}

Value ref(uint32_t id) {
  Value v;
  v.kind = Value::Kind::Ref;
  v.id = id;
  return v;
}

Value object(std::vector<std::string> names, std::vector<Value> items) {
  Value v;
  v.kind = Value::Kind::Object;
  v.names = std::move(names);
  v.items = std::move(items);
  return v;
}

const Value& attr(const Value& v, const std::string& name) {
  for (size_t i = 0; i < v.names.size(); ++i)
    if (v.names[i] == name) return v.items[i];
  throw std::out_of_range(name);
}

}  // namespace

// A later snapshot that agrees with the first state's aliasing: the
// attribute it adds names the object the first state holds.
TEST(SnapshotMerge, AgreeingAliasingJoinsTheObject) {
  Value first = object({"a", "b"}, {list(1, 1), list(2, 2)});
  Value later = object({"b", "c"}, {list(5, 2), ref(5)});
  capture::mergeSnapshot(first, later);
  const Value& b = attr(first, "b");
  const Value& c = attr(first, "c");
  ASSERT_EQ(c.kind, Value::Kind::Ref);
  EXPECT_NE(b.id, 0u);
  EXPECT_EQ(c.id, b.id);
  EXPECT_NE(attr(first, "a").id, b.id);
}

// After `self.a = self.b`: the later snapshot holds a, b and the new c as
// one object, and the first state held a and b apart. Joining ids by path
// would make them one object natively, and calls before the change would
// read the wrong values: the first state's objects stay apart, and c is a
// copy of what the later snapshot read.
TEST(SnapshotMerge, DisagreeingAliasingKeepsTheFirstStateApart) {
  Value first = object({"a", "b"}, {list(1, 1), list(2, 2)});
  Value later = object({"a", "b", "c"}, {list(7, 2), ref(7), ref(7)});
  capture::mergeSnapshot(first, later);
  const Value& a = attr(first, "a");
  const Value& b = attr(first, "b");
  const Value& c = attr(first, "c");
  ASSERT_EQ(a.kind, Value::Kind::List);
  ASSERT_EQ(b.kind, Value::Kind::List);
  EXPECT_TRUE(a.id == 0 || a.id != b.id);
  EXPECT_EQ(a.items.at(0).atom.i, 1);
  EXPECT_EQ(b.items.at(0).atom.i, 2);
  ASSERT_EQ(c.kind, Value::Kind::List);
  EXPECT_EQ(c.items.at(0).atom.i, 2);
}

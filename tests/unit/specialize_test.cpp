// The JIT's record-set policy on records alone (no interpreter).
#include "capture/specialize.h"

#include <gtest/gtest.h>

#include "sample.h"

using namespace magpy;
using namespace magpy::record;
using magpy::capture::RecordInUse;
using magpy::capture::RecordSetPolicy;

namespace {

const AccessPath kScale = AccessPath::global("", "SCALE");

Check tensorCheck(int64_t rows) {
  Check c;
  c.kind = Check::Kind::Tensor;
  c.meta = sample::meta({rows, 3}, {3, 1});
  return c;
}

Check equals(Atom a) {
  Check c;
  c.kind = Check::Kind::Equals;
  c.atom = a;
  return c;
}

// relu(x) for x of shape [rows, 3], guarded on G['SCALE'] by `scale`.
Record reluRecord(int64_t rows, Check scale) {
  Record r;
  r.guards = {{AccessPath::arg(0), tensorCheck(rows)}, {kScale, scale}};
  Node x;
  x.kind = NodeKind::Placeholder;
  x.name = "x";
  x.source = AccessPath::arg(0);
  x.outputs = {sample::meta({rows, 3}, {3, 1})};
  Node relu = sample::opNode("relu", "aten::relu", "", {Arg::node(0)});
  relu.outputs = {sample::meta({rows, 3}, {3, 1})};
  r.graph.nodes = {x, relu, sample::output({Arg::node(1)})};
  r.mock.result = ValueExpr::output(0);
  r.origin = "call";
  return r;
}

RecordInUse inUse(const Record& r) { return {&r, true, false, false, false}; }

}  // namespace

TEST(Specialize, NumbersThatChangeAreLearnedToVary) {
  RecordSetPolicy policy;
  Record r = reluRecord(4, equals(Atom::integer(3)));
  auto notes = policy.learnFromMiss(r, {1}, {Atom::integer(5)});
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], "G['SCALE'] changes between calls (was 3, now 5): lifting it into the graph");
  EXPECT_TRUE(policy.varyingNumbers().count(kScale));
  EXPECT_TRUE(policy.learnFromMiss(r, {1}, {Atom::integer(6)}).empty());  // known already
}

TEST(Specialize, OnlyAMissOnNumbersAloneTeachesAnything) {
  Record r = reluRecord(4, equals(Atom::integer(3)));
  RecordSetPolicy policy;
  // The tensor changed too: the call differs in more than the number.
  EXPECT_TRUE(policy.learnFromMiss(r, {0, 1}, {std::nullopt, Atom::integer(5)}).empty());
  // A float where an int was: another type, kept guarded.
  EXPECT_TRUE(policy.learnFromMiss(r, {1}, {Atom::floating(5.0)}).empty());
  EXPECT_TRUE(policy.varyingNumbers().empty());
  // Without dynamic records, nothing is lifted.
  RecordSetPolicy fixed(false);
  EXPECT_TRUE(fixed.learnFromMiss(r, {1}, {Atom::integer(5)}).empty());
}

TEST(Specialize, ALiftingRecordReplacesTheOneThatKeptTheValue) {
  RecordSetPolicy policy;
  Record earlier = reluRecord(4, equals(Atom::integer(3)));
  Record made = reluRecord(4, numberCheck(NumberType::Int));
  auto placed = policy.place({inUse(earlier)}, made, false, {kScale}, "");
  EXPECT_EQ(placed.replaces, 0u);
  ASSERT_FALSE(placed.notes.empty());
  EXPECT_EQ(placed.notes[0], "this record computes with G['SCALE'] in its graph, for any value; it replaces record 0");

  // Not a record that is retired, made for changed classes, or of a float.
  RecordInUse retired = inUse(earlier), stale = inUse(earlier);
  retired.retired = true;
  stale.definitionsChanged = true;
  EXPECT_EQ(policy.place({retired}, made, false, {kScale}, "").replaces, SIZE_MAX);
  EXPECT_EQ(policy.place({stale}, made, false, {kScale}, "").replaces, SIZE_MAX);
  Record floatEarlier = reluRecord(4, equals(Atom::floating(3.0)));
  EXPECT_EQ(policy.place({inUse(floatEarlier)}, made, false, {kScale}, "").replaces, SIZE_MAX);
}

TEST(Specialize, RecordsDifferingInSizesBecomeOneDynamicRecord) {
  RecordSetPolicy policy;
  Record earlier = reluRecord(4, equals(Atom::integer(3)));
  Record made = reluRecord(6, equals(Atom::integer(3)));
  auto placed = policy.place({inUse(earlier)}, made, false, {}, "");
  EXPECT_EQ(placed.replaces, 0u);
  EXPECT_TRUE(made.guards[0].check.meta.dynamic());
  EXPECT_EQ(made.origin, "call; sizes made dynamic with record 0");

  // A run that read sizes in Python keeps them; so does a record whose run did.
  Record again = reluRecord(6, equals(Atom::integer(3)));
  EXPECT_EQ(policy.place({inUse(earlier)}, again, true, {}, "").replaces, SIZE_MAX);
  RecordInUse readSizes = inUse(earlier);
  readSizes.readSizes = true;
  EXPECT_EQ(policy.place({readSizes}, again, false, {}, "").replaces, SIZE_MAX);
  EXPECT_FALSE(again.guards[0].check.meta.dynamic());
  EXPECT_EQ(RecordSetPolicy(false).place({inUse(earlier)}, again, false, {}, "").replaces, SIZE_MAX);
}

TEST(Specialize, NumbersThatChangeSizesStayGuarded) {
  RecordSetPolicy policy;
  Record kept = reluRecord(4, equals(Atom::integer(3)));
  policy.learnFromMiss(kept, {1}, {Atom::integer(5)});
  Record lifting = reluRecord(4, numberCheck(NumberType::Int));
  auto note = policy.retire(lifting);
  ASSERT_TRUE(note.has_value());
  EXPECT_EQ(*note, "computes other sizes for other values of G['SCALE']: they stay guarded from now on");
  EXPECT_TRUE(policy.varyingNumbers().empty());
  EXPECT_TRUE(policy.learnFromMiss(kept, {1}, {Atom::integer(7)}).empty());  // not lifted again
  EXPECT_FALSE(policy.retire(lifting).has_value());                          // nothing left to retire
}

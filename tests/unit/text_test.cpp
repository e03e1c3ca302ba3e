#include <gtest/gtest.h>

#include "magpy/record/text.h"
#include "magpy/support/error.h"
#include "sample.h"

using namespace magpy::record;

TEST(Text, CanonicalFormShowsEverySection) {
  std::string t = printCanonical(magpy::sample::sampleFile());
  for (const char* part : {"function __main__.Net", "self.scale = 1.0", "args[0]: tensor float32[2] strides=[1] cpu",
                           "self: type __main__.Net", "%mul = aten::mul.Tensor(%arg0, %w)", "%mul_1 = aten::mul.Tensor(%relu, 1.0)",
                           "# sample.py:7", "return out[0]", "self.calls = 1", "call 0: __main__.Net, record 0, monitored",
                           "blob 0: float32[2] hash="})
    EXPECT_NE(t.find(part), std::string::npos) << part << "\n" << t;
}

TEST(Text, SummaryCountsEachFunction) {
  EXPECT_EQ(printSummary(magpy::sample::sampleFile()),
            "function __main__.Net: records=1 graphs=1 breaks=0 nodes=6 guards=3\n");
}

TEST(Text, SectionsAreChosenByName) {
  RecordFile f = magpy::sample::sampleFile();
  ViewOptions guards;
  guards.sections = {parseSection("guards")};
  std::string t = printView(f, guards);
  EXPECT_NE(t.find("self.scale: == 1.0"), std::string::npos) << t;
  EXPECT_EQ(t.find("aten::mul"), std::string::npos) << t;
  EXPECT_EQ(t.find("magpy record"), std::string::npos) << t;
  EXPECT_THROW(parseSection("graphs"), magpy::Error);
}

TEST(Text, RefGraphIsShownOnlyWhenAsked) {
  RecordFile f = magpy::sample::sampleFile();
  EXPECT_EQ(printCanonical(f).find("refgraph"), std::string::npos);
  ViewOptions refs;
  refs.sections = {Section::RefGraph};
  std::string t = printView(f, refs);
  EXPECT_NE(t.find("refgraph (7 nodes, 5 edges)"), std::string::npos) << t;
  EXPECT_NE(t.find("n1: Net (2 versions) [guarded, written]"), std::string::npos) << t;
  EXPECT_NE(t.find("n1 v1 -.calls-> n5"), std::string::npos) << t;
}

TEST(Text, JsonViewKeepsKeyOrder) {
  RecordFile f = magpy::sample::sampleFile();
  ViewOptions o;
  o.json = true;
  o.sections = {Section::Guards, Section::Mock};
  std::string j = printView(f, o);
  EXPECT_NE(j.find("\"path\": \"self.scale\""), std::string::npos) << j;
  EXPECT_LT(j.find("\"guards\""), j.find("\"mock\"")) << j;
  EXPECT_EQ(j.find("\"graph\""), std::string::npos) << j;
  EXPECT_EQ(printView(f, o), j);  // stable
  EXPECT_NE(printSummary(f, true).find("\"guards\": 3"), std::string::npos) << printSummary(f, true);
}

TEST(Text, AtomsPrintAsPython) {
  EXPECT_EQ(toString(Atom::floating(0.1)), "0.1");
  EXPECT_EQ(toString(Atom::floating(2)), "2.0");
  EXPECT_EQ(toString(Atom::boolean(true)), "True");
  EXPECT_EQ(toString(Atom::string("it's")), "'it\\'s'");
  EXPECT_EQ(toString(Atom::named(Atom::Kind::DType, "float16")), "torch.float16");
  EXPECT_FALSE(Atom::integer(1) == Atom::boolean(true));  // True is not 1 to a guard
}

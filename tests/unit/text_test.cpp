#include <gtest/gtest.h>

#include "magpy/record/text.h"
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

TEST(Text, DiffNamesWhatChanged) {
  RecordFile a = magpy::sample::sampleFile(), b = a;
  EXPECT_EQ(diffCanonical(a, b), "");
  b.functions[0].records[0].guards[2].check.atom = Atom::floating(2.0);
  std::string d = diffCanonical(a, b);
  EXPECT_NE(d.find("-   self.scale: == 1.0"), std::string::npos) << d;
  EXPECT_NE(d.find("+   self.scale: == 2.0"), std::string::npos) << d;
}

TEST(Text, AtomsPrintAsPython) {
  EXPECT_EQ(toString(Atom::floating(0.1)), "0.1");
  EXPECT_EQ(toString(Atom::floating(2)), "2.0");
  EXPECT_EQ(toString(Atom::boolean(true)), "True");
  EXPECT_EQ(toString(Atom::string("it's")), "'it\\'s'");
  EXPECT_EQ(toString(Atom::named(Atom::Kind::DType, "float16")), "torch.float16");
  EXPECT_FALSE(Atom::integer(1) == Atom::boolean(true));  // True is not 1 to a guard
}

// Capture each bundled example, replay it natively, and compare with what
// Python computed.
#include <gtest/gtest.h>

#include "support.h"

using namespace magpy::e2e;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

class Example : public ::testing::TestWithParam<const char*> {};

}  // namespace

TEST_P(Example, CapturesAndReplaysNatively) {
  std::string name = GetParam();
  std::string stem = name.substr(0, name.find('.'));
  Scratch s("example_" + stem);
  Result cap = s.run("magpy-capture " + example(name));
  ASSERT_EQ(cap.status, 0) << cap.out << cap.err;
  EXPECT_TRUE(contains(cap.out, "results equal to eager")) << cap.out;  // the script's own check
  ASSERT_TRUE(s.exists(stem + ".mgp"));
  EXPECT_TRUE(contains(cap.err, "wrote " + stem + ".mgp")) << cap.err;

  Result run = s.run("magpy-run " + stem + ".mgp");
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_TRUE(contains(run.out, "no Python")) << run.out;
  EXPECT_TRUE(contains(run.out, "matched the captured results")) << run.out;
  EXPECT_FALSE(contains(run.out, "MISMATCH")) << run.out;

  Result summary = s.run("magpy-inspect --summary " + stem + ".mgp");
  ASSERT_EQ(summary.status, 0) << summary.err;
  EXPECT_EQ(summary.out, golden(stem + ".summary.txt", summary.out));
}

TEST_P(Example, CapturesAreByteIdentical) {
  std::string name = GetParam();
  Scratch s("determinism");
  ASSERT_EQ(s.run("magpy-capture -q -o a.mgp " + example(name)).status, 0);
  ASSERT_EQ(s.run("magpy-capture -q -o b.mgp " + example(name)).status, 0);
  EXPECT_EQ(s.read("a.mgp"), s.read("b.mgp"));
  Result diff = s.run("magpy-inspect diff a.mgp b.mgp");
  EXPECT_EQ(diff.status, 0) << diff.out << diff.err;
}

INSTANTIATE_TEST_SUITE_P(Bundled, Example, ::testing::Values("mlp.py", "containers.py"),
                         [](const auto& info) { return std::string(info.param).substr(0, std::string(info.param).find('.')); });

TEST(Examples, DifferentCapturesDiffer) {
  Scratch s("diff");
  ASSERT_EQ(s.run("magpy-capture -q -o one.mgp " + example("mlp.py") + " 1").status, 0);
  ASSERT_EQ(s.run("magpy-capture -q -o two.mgp " + example("mlp.py") + " 2").status, 0);
  Result diff = s.run("magpy-inspect diff one.mgp two.mgp");
  EXPECT_EQ(diff.status, 1) << diff.out << diff.err;
  EXPECT_TRUE(contains(diff.out, "-   args[0]: tensor float32[1, 16]")) << diff.out;
  EXPECT_TRUE(contains(diff.out, "+   args[0]: tensor float32[2, 16]")) << diff.out;
}

TEST(Examples, ReplaysInputsFromATensorFile) {
  Scratch s("inputs");
  ASSERT_EQ(s.run("magpy-capture -q " + example("mlp.py")).status, 0);
  s.write("make.py",
          "import sys, torch\n"
          "sys.path[:0] = ['" + sourceDir() + "/examples', '" + sourceDir() + "/python']\n"
          "from mlp import MLP\n"
          "torch.manual_seed(0)\n"
          "m = MLP().eval()\n"
          "x = torch.randn(1, 16)\n"
          "torch.save((x,), 'in.pt')\n"
          "torch.save(m(x).detach(), 'expected.pt')\n");
  s.write("check.py",
          "import torch\n"
          "assert torch.allclose(torch.load('out.pt'), torch.load('expected.pt'), atol=1e-6)\n"
          "print('same')\n");
  ASSERT_EQ(s.run("/usr/bin/python3 make.py").status, 0);
  Result run = s.run("magpy-run mlp.mgp --inputs in.pt --output out.pt");
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  Result check = s.run("/usr/bin/python3 check.py");
  EXPECT_EQ(check.status, 0) << check.out << check.err;

  s.write("bad.py", "import torch\ntorch.save((torch.randn(3, 16),), 'bad.pt')\n");
  ASSERT_EQ(s.run("/usr/bin/python3 bad.py").status, 0);
  Result bad = s.run("magpy-run mlp.mgp --inputs bad.pt");
  EXPECT_EQ(bad.status, 1);
  EXPECT_TRUE(contains(bad.out, "record 0: args[0]: expected tensor float32[1, 16] strides=[16, 1] cpu, got tensor float32[3, 16] strides=[16, 1] cpu"))
      << bad.out;
}

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
  EXPECT_TRUE(contains(diff.out, "guard changed: args[0]: tensor float32[1, 16] strides=[16, 1] cpu -> "
                                 "tensor float32[2, 16] strides=[16, 1] cpu"))
      << diff.out;
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

  s.write("bad.py",
          "import torch\n"
          "torch.save((torch.randn(3, 16),), 'shape.pt')\n"
          "torch.save((torch.randn(1, 16, dtype=torch.float64),), 'dtype.pt')\n"
          "torch.save((torch.randn(1, 16), torch.randn(1)), 'count.pt')\n"
          "torch.save((7,), 'scalar.pt')\n"
          "torch.save({'weights': [1, 2], 'bias': 0.5}, 'object.pt')\n");
  ASSERT_EQ(s.run("/usr/bin/python3 bad.py").status, 0);
  const std::pair<const char*, const char*> cases[] = {
      {"shape.pt", "record 0: args[0]: expected tensor float32[1, 16] strides=[16, 1] cpu, got tensor float32[3, 16] strides=[16, 1] cpu"},
      {"dtype.pt", "record 0: args[0]: expected tensor float32[1, 16] strides=[16, 1] cpu, got tensor float64[1, 16]"},
      {"count.pt", "record 0: args: expected len 1, got len 2"},
      {"scalar.pt", "record 0: args[0]: expected tensor float32[1, 16] strides=[16, 1] cpu, got 7"},
      {"object.pt", "record 0: args: expected len 1, got len 0"},
  };
  for (auto& [file, message] : cases) {
    Result bad = s.run(std::string("magpy-run mlp.mgp --inputs ") + file);
    EXPECT_EQ(bad.status, 1) << file;
    EXPECT_TRUE(contains(bad.out, message)) << file << ":\n" << bad.out;
  }
  Result missing = s.run("magpy-run mlp.mgp --inputs nothere.pt");
  EXPECT_EQ(missing.status, 2);
  EXPECT_TRUE(contains(missing.err, "nothere.pt: cannot open the input file")) << missing.err;
}

TEST(Examples, CppApiExample) {
  Scratch s("cpp_api");
  ASSERT_EQ(s.run("magpy-capture -q " + example("mlp.py")).status, 0);
  Result r = s.run("magpy-replay-example mlp.mgp");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "record 0 ran: result tensor float32[1, 8]")) << r.out;
  EXPECT_TRUE(contains(r.out, "self.scale = 0.5")) << r.out;
  EXPECT_TRUE(contains(r.out, "refused: args[0]: expected tensor float32[1, 16]")) << r.out;
}

// A record captured from calls at batch sizes 1, 2 and 4 serves batch
// sizes it never saw, natively, with eager's results (dynamic records).
TEST(Examples, DynamicRecordServesUnseenBatchSizesNatively) {
  Scratch s("dynamic_batch");
  s.write("cnn.py",
          "import torch, torch.nn as nn\n"
          "import magpy\n"
          "torch.manual_seed(0)\n"
          "model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),\n"
          "                      nn.Flatten(), nn.Linear(8, 5)).eval()\n"
          "torch.save(model.state_dict(), 'weights.pt')\n"
          "f = magpy.compile(model)\n"
          "with torch.no_grad():\n"
          "    for n in [1, 2, 4]:\n"
          "        f(torch.randn(n, 3, 16, 16))\n"
          "    for n in [3, 7, 32]:\n"
          "        x = torch.randn(n, 3, 16, 16)\n"
          "        torch.save((x,), f'in{n}.pt')\n"
          "        torch.save(model(x), f'expected{n}.pt')\n");
  Result cap = s.run("magpy-capture cnn.py");
  ASSERT_EQ(cap.status, 0) << cap.out << cap.err;
  EXPECT_TRUE(contains(cap.out + cap.err, "3 calls, 2 records")) << cap.out << cap.err;
  for (int n : {3, 7, 32}) {
    std::string k = std::to_string(n);
    Result run = s.run("magpy-run cnn.mgp --inputs in" + k + ".pt --output out" + k + ".pt");
    ASSERT_EQ(run.status, 0) << run.out << run.err;
    Result check = s.run("/usr/bin/python3 -c 'import torch; a, b = torch.load(\"out" + k + ".pt\"), torch.load(\"expected" +
                         k + ".pt\"); print(a.shape[0], torch.allclose(a, b, atol=1e-5))'");
    EXPECT_EQ(check.out, k + " True\n") << check.err;
  }
  Result view = s.run("magpy-inspect cnn.mgp --show guards");
  EXPECT_TRUE(contains(view.out, "args[0]: tensor float32[s0, 3, 16, 16] contiguous cpu (sizes s >= 2)")) << view.out;
  // --dynamic off keeps one record per size, and the unseen sizes are refused with the guard that misses.
  ASSERT_EQ(s.run("magpy-capture --dynamic off -o static.mgp cnn.py").status, 0);
  Result refused = s.run("magpy-run static.mgp --inputs in7.pt");
  EXPECT_EQ(refused.status, 1);
  EXPECT_TRUE(contains(refused.out, "record 2: args[0]: expected tensor float32[4, 3, 16, 16]")) << refused.out;
}

// Every model script of examples/models, in its small configuration (the
// same code with fewer and narrower layers): captured by magpy-capture (the
// script compares each compiled call with eager PyTorch), then replayed
// natively by magpy-run. bench/evaluate.py runs the full configurations.
#include <gtest/gtest.h>

#include "support.h"

using namespace magpy::e2e;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

struct ModelCase {
  const char* name;
  const char* script;
  const char* options;
  bool oneGraph;  // false: its forward breaks, native replay must refuse it
};

// How test listings show a case (instead of its bytes).
void PrintTo(const ModelCase& m, std::ostream* os) { *os << m.script << (*m.options ? " " : "") << m.options; }

class Model : public ::testing::TestWithParam<ModelCase> {};

}  // namespace

TEST_P(Model, MatchesEagerAndReplaysNatively) {
  const ModelCase& m = GetParam();
  Scratch s(std::string("model_") + m.name);
  std::string script = sourceDir() + "/examples/models/" + m.script;
  Result cap = s.run("magpy-capture -o m.mgp " + script + " --small " + m.options);
  ASSERT_EQ(cap.status, 0) << cap.out << cap.err;
  EXPECT_TRUE(contains(cap.out, "results equal to eager")) << cap.out;
  if (m.oneGraph) {
    EXPECT_TRUE(contains(cap.err, "0 breaks")) << cap.err;
  }

  Result run = s.run("magpy-run m.mgp");
  if (m.oneGraph) {
    EXPECT_EQ(run.status, 0) << run.out << run.err;
    EXPECT_TRUE(contains(run.out, "matched the captured results")) << run.out;
    // The compiled backend agrees with operator-by-operator replay (it checks
    // on the first call) and with the captured results, within tolerance.
    Result compiled = s.run("magpy-run --backend compiled --show-optimizations m.mgp");
    EXPECT_EQ(compiled.status, 0) << compiled.out << compiled.err;
    EXPECT_FALSE(contains(compiled.out, "MISMATCH")) << compiled.out;
    EXPECT_FALSE(contains(compiled.out, "backend: operator by operator, the compiled graph disagrees")) << compiled.out;
  } else {
    EXPECT_EQ(run.status, 1) << run.out << run.err;
    EXPECT_TRUE(contains(run.out, "graph breaks, which need Python")) << run.out;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Examples, Model,
    ::testing::Values(ModelCase{"resnet101", "resnet101.py", "", true}, ModelCase{"densenet121", "densenet121.py", "", true},
                      ModelCase{"bert", "bert.py", "", true}, ModelCase{"deberta", "deberta.py", "", true},
                      ModelCase{"monodepth", "monodepth.py", "", true}, ModelCase{"quant_resnet", "quant_resnet.py", "", true},
                      ModelCase{"trident", "trident.py", "", true}, ModelCase{"align", "align.py", "", true},
                      ModelCase{"varying_batch", "varying.py", "--model resnet101 --vary batch --sizes 1,2,1,2", true},
                      ModelCase{"varying_seq", "varying.py", "--model bert --vary seq --sizes 8,16,8,16", true},
                      ModelCase{"lstm_loop", "lstm_loop.py", "--lengths 4,8,4", true},
                      ModelCase{"blockdrop", "blockdrop.py", "", true}),
    [](const auto& info) { return std::string(info.param.name); });

// BlockDrop (the paper's Figure 18): 8 captured calls join into one record
// whose branches have both sides, which then serves, natively, inputs
// whose policies keep sets of blocks no captured call kept.
TEST(Branches, BlockDropReplaysPoliciesNeverCaptured) {
  Scratch s("blockdrop_unseen");
  Result r = s.run("/usr/bin/python3 " + sourceDir() + "/tests/e2e/blockdrop_unseen.py \"$(dirname \"$(command -v magpy-run)\")\" . 8");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "8 calls, 1 records (1 graphs, 0 breaks)")) << r.out;
  EXPECT_TRUE(contains(r.out, "unseen replayed, 0 failed")) << r.out;
}

// The evaluation harness itself (bench/evaluate.py) on one small model: it
// must run end to end and write its tables and plots. Its figures are not
// checked: timings are not test material.
TEST(Evaluation, HarnessWritesTablesAndPlots) {
  Scratch s("evaluate");
  Result r = s.run("/usr/bin/python3 " + sourceDir() + "/bench/evaluate.py --small --models densenet121 --no-dynamic "
                   "--calls 2 --work " + s.dir() + " --results " + s.dir());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  std::string results = s.read("RESULTS.md");
  EXPECT_TRUE(contains(results, "| DenseNet-121 (torchvision), 224x224 | 1 graph | 1 graph | 1 graph |")) << results;
  EXPECT_TRUE(contains(results, "## Cost of capture")) << results;
  for (const char* png : {"results/speed.png", "results/capture.png"})
    EXPECT_EQ(s.read(png).substr(0, 4), "\x89PNG") << png;
}

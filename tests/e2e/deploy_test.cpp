// From a training script to a served record: magpy-run --state puts the
// weights the script trained (its torch.save'd state dict) into the
// record's module, --eval sets the flags model.eval() sets, and the result
// on inputs the script never passed equals the trained model's in Python.
#include <gtest/gtest.h>

#include <filesystem>

#include "support.h"

using namespace magpy::e2e;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

const char* kPython = "/usr/bin/python3 -c ";

// Captures examples/train_cnn.py once per test binary run into `s`.
void captureTraining(const Scratch& s) {
  Result cap = s.run("magpy-capture " + example("train_cnn.py") + " .");
  ASSERT_EQ(cap.status, 0) << cap.out << cap.err;
  ASSERT_TRUE(s.exists("train_cnn.mgp") && s.exists("net.pt") && s.exists("probe.pt")) << cap.out << cap.err;
}

}  // namespace

TEST(Deploy, TrainedWeightsServeExactlyAsEager) {
  Scratch s("deploy_exact");
  captureTraining(s);
  Result run = s.run("magpy-run train_cnn.mgp --optimize none --state net.pt --eval --inputs probe.pt --output served.pt");
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_TRUE(contains(run.out, "state  16 tensors from net.pt")) << run.out;
  EXPECT_TRUE(contains(run.out, "eval   training set to False on ")) << run.out;
  Result same = s.run(std::string(kPython) +
                      "'import torch; a, b = torch.load(\"served.pt\"), torch.load(\"probe_expected.pt\"); "
                      "print(\"exact\" if torch.equal(a, b) else (a - b).abs().max())'");
  EXPECT_EQ(same.out, "exact\n") << same.err;

  // The record's own (untrained) weights give other results: --state is what serves training's.
  Result untrained = s.run("magpy-run train_cnn.mgp --optimize none --eval --inputs probe.pt --output untrained.pt");
  ASSERT_EQ(untrained.status, 0) << untrained.out << untrained.err;
  Result differs = s.run(std::string(kPython) +
                         "'import torch; print(torch.equal(torch.load(\"untrained.pt\"), torch.load(\"probe_expected.pt\")))'");
  EXPECT_EQ(differs.out, "False\n") << differs.err;
}

TEST(Deploy, StateFileErrorsArePrecise) {
  Scratch s("deploy_errors");
  captureTraining(s);
  auto edited = [&](const std::string& name, const std::string& edit) {
    Result r = s.run(std::string(kPython) + "'import torch; sd = torch.load(\"net.pt\"); " + edit + "; torch.save(sd, \"" +
                     name + "\")'");
    EXPECT_EQ(r.status, 0) << r.err;
    return s.run("magpy-run train_cnn.mgp --state " + name + " --eval --inputs probe.pt");
  };
  Result renamed = edited("renamed.pt", "sd[\"fc.weights\"] = sd.pop(\"fc.weight\")");
  EXPECT_EQ(renamed.status, 2);
  EXPECT_TRUE(contains(renamed.err, "state key 'fc.weights' is not part of the record's state")) << renamed.err;

  Result missing = edited("missing.pt", "del sd[\"conv2.bias\"]");
  EXPECT_EQ(missing.status, 2);
  EXPECT_TRUE(contains(missing.err, "state key 'conv2.bias' (a parameter of the record's model) is missing")) << missing.err;

  Result reshaped = edited("reshaped.pt", "sd[\"fc.weight\"] = torch.zeros(10, 128)");
  EXPECT_EQ(reshaped.status, 2);
  EXPECT_TRUE(contains(reshaped.err, "state key 'fc.weight' is float32[10, 128] in the file, but the record was "
                                     "captured with float32[10, 256]")) << reshaped.err;

  Result partial = s.run("magpy-run train_cnn.mgp --state missing.pt --state-partial --eval --inputs probe.pt");
  EXPECT_EQ(partial.status, 0) << partial.out << partial.err;
  EXPECT_TRUE(contains(partial.out, "1 parameters the file lacks kept as captured")) << partial.out;

  // Not a state dict: other values, code to run, not a torch.save file.
  Result values = edited("values.pt", "sd[\"epoch\"] = 3");
  EXPECT_TRUE(contains(values.err, "its entry 'epoch' is not a tensor")) << values.err;
  Result code = s.run(std::string(kPython) +
                      "'import os, torch\nclass Evil:\n    def __reduce__(self): return (os.system, (\"touch pwned\",))\n"
                      "torch.save({\"w\": Evil()}, \"evil.pt\")'");
  ASSERT_EQ(code.status, 0) << code.err;
  Result evil = s.run("magpy-run train_cnn.mgp --state evil.pt --inputs probe.pt");
  EXPECT_EQ(evil.status, 2);
  EXPECT_TRUE(contains(evil.err, "a call of 'posix.system', which torch.save does not make for tensors and plain values")) << evil.err;
  EXPECT_FALSE(s.exists("pwned"));
  Result text = s.run("echo hello > text.pt && magpy-run train_cnn.mgp --state text.pt --inputs probe.pt");
  EXPECT_EQ(text.status, 2);
  EXPECT_TRUE(contains(text.err, "text.pt: the state file is not a torch.save file")) << text.err;

  Result noInputs = s.run("magpy-run train_cnn.mgp --state net.pt");
  EXPECT_EQ(noInputs.status, 2);
  EXPECT_TRUE(contains(noInputs.err, "--state, --eval, --grad-enabled and --save-state need --inputs or --batches"))
      << noInputs.err;
}

TEST(Deploy, StateAtExitCarriesTheTrainedWeights) {
  Scratch s("deploy_exit");
  Result cap = s.run("magpy-capture --state-at exit -o exit.mgp " + example("train_cnn.py") + " .");
  ASSERT_EQ(cap.status, 0) << cap.out << cap.err;
  Result run = s.run("magpy-run exit.mgp --optimize none --eval --inputs probe.pt --output served.pt");
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  Result same = s.run(std::string(kPython) +
                      "'import torch; a, b = torch.load(\"served.pt\"), torch.load(\"probe_expected.pt\"); "
                      "print(\"exact\" if torch.equal(a, b) else (a - b).abs().max())'");
  EXPECT_EQ(same.out, "exact\n") << same.err;

  Result env = s.run("magpy-inspect exit.mgp --show environment");
  EXPECT_TRUE(contains(env.out, "state: as the script left it (magpy-capture --state-at exit)")) << env.out;
  Result log = s.run("magpy-run exit.mgp");
  EXPECT_EQ(log.status, 2);
  EXPECT_TRUE(contains(log.err, "has no logged calls")) << log.err;

  // Against the default capture: the same records, other weights, one line per tensor.
  ASSERT_EQ(s.run("magpy-capture -q -o first.mgp " + example("train_cnn.py") + " .").status, 0);
  Result diff = s.run("magpy-inspect diff first.mgp exit.mgp");
  EXPECT_TRUE(contains(diff.out, "state taken at")) << diff.out;
  EXPECT_TRUE(contains(diff.out, "self.fc.weight")) << diff.out;
  EXPECT_FALSE(contains(diff.out, "guard changed")) << diff.out;
  EXPECT_FALSE(contains(diff.out, "node ")) << diff.out;
  // No call log, and none of its tensors: the logged batches are most of
  // the default record (507 KB with them, 21 KB without, when written).
  namespace fs = std::filesystem;
  EXPECT_LT(fs::file_size(s.path("exit.mgp")) * 4, fs::file_size(s.path("first.mgp")));
}

// A training script changes its weights before every call: the log keeps
// their changes within its budget, and ends before a call that would pass
// it; what it kept replays. A budget that is no size is refused.
TEST(Deploy, CallLogKeepsToItsBudget) {
  Scratch s("deploy_log_budget");
  Result cap = s.run("magpy-capture --log-budget 1K -o small.mgp " + example("train_cnn.py") + " .");
  ASSERT_EQ(cap.status, 0) << cap.out << cap.err;
  EXPECT_TRUE(contains(cap.err, "the call log ends after 1 call: the next one's state changes (")) << cap.err;
  EXPECT_TRUE(contains(cap.err, "past its budget of 1.0K (--log-budget)")) << cap.err;
  Result run = s.run("magpy-run small.mgp");
  EXPECT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_TRUE(contains(run.out, "replayed 1 calls natively: 1 matched")) << run.out;
  Result bad = s.run("magpy-capture --log-budget lots " + example("train_cnn.py") + " .");
  EXPECT_EQ(bad.status, 2);
  EXPECT_TRUE(contains(bad.err, "'lots' is not a size")) << bad.err;
}

// A state file is data from anyone: damaged pickles are one clean error each.
TEST(Deploy, DamagedStateFilesAreCleanErrors) {
  Scratch s("deploy_damaged");
  captureTraining(s);
  Result r = s.run("/usr/bin/python3 " + sourceDir() + "/tests/e2e/mutate_state.py train_cnn.mgp net.pt probe.pt 60");
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "mutated state files: 60 runs")) << r.out;
}

// A record whose code decided on grad mode (nn.MultiheadAttention's fast
// path does) serves only calls made in that mode: natively, --inputs calls
// stand for grad mode off unless --grad-enabled says the script's was on.
TEST(Deploy, GradModeOfServedCallsIsChosen) {
  Scratch s("deploy_grad");
  s.write("branch.py",
          "import torch, magpy\n"
          "def f(x):\n"
          "    return x * 2 if torch.is_grad_enabled() else x * 3\n"
          "g = magpy.compile(f)\n"
          "g(torch.ones(2))\n"
          "torch.save((torch.ones(2),), 'x.pt')\n");
  ASSERT_EQ(s.run("magpy-capture -q -o branch.mgp branch.py").status, 0);
  Result logged = s.run("magpy-run branch.mgp");
  EXPECT_EQ(logged.status, 0) << logged.out << logged.err;
  Result off = s.run("magpy-run branch.mgp --inputs x.pt --explain");
  EXPECT_EQ(off.status, 1) << off.out << off.err;
  EXPECT_TRUE(contains(off.out, "runtime.grad_enabled: expected == True, got False")) << off.out;
  Result on = s.run("magpy-run branch.mgp --inputs x.pt --grad-enabled --output y.pt");
  EXPECT_EQ(on.status, 0) << on.out << on.err;
  Result value = s.run(std::string(kPython) + "'import torch; y = torch.load(\"y.pt\"); print(y.tolist(), y.requires_grad)'");
  EXPECT_EQ(value.out, "[2.0, 2.0] False\n") << value.err;
}

// A whole training step (zero_grad, forward, backward, torch.optim's
// update) captured over three batches, then trained natively on twenty:
// the state dict magpy-run saves is what eager training on those batches
// gives, and Python loads it. The first step finds the optimizer's state
// empty (one record), the others read its momentum buffers (another).
TEST(Deploy, NativeTrainingGivesEagerTrainingsWeights) {
  Scratch s("native_training");
  Result cap = s.run("magpy-capture " + example("train_step.py") + " .");
  ASSERT_EQ(cap.status, 0) << cap.out << cap.err;
  EXPECT_TRUE(contains(cap.err, "3 calls, 2 records (2 graphs, 0 breaks), 1 replayed from a record")) << cap.err;
  Result run = s.run("magpy-run train_step.mgp --batches batches.pt --save-state trained.pt");
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_TRUE(contains(run.out, "train __main__.step on 20 batches from batches.pt (grad mode on)")) << run.out;
  EXPECT_TRUE(contains(run.out, "batch 0  record 0  result: tensor float32[]")) << run.out;
  EXPECT_TRUE(contains(run.out, "batch 19  record 1  result: tensor float32[]")) << run.out;
  EXPECT_TRUE(contains(run.out, "wrote 9 tensors of the trained state to trained.pt")) << run.out;
  Result check = s.run("PYTHONPATH=" + sourceDir() + "/python /usr/bin/python3 " + example("train_step.py") + " --check .");
  ASSERT_EQ(check.status, 0) << check.out << check.err;
  EXPECT_TRUE(contains(check.out, "trained natively = trained eagerly: 9 tensors")) << check.out;

  // Refusals: --save-state without calls of its own, a file that is not a list.
  Result alone = s.run("magpy-run train_step.mgp --save-state other.pt");
  EXPECT_EQ(alone.status, 2);
  EXPECT_TRUE(contains(alone.err, "--save-state need --inputs or --batches")) << alone.err;
  Result notList = s.run("magpy-run train_step.mgp --batches trained.pt");
  EXPECT_EQ(notList.status, 2);
  EXPECT_TRUE(contains(notList.err, "not a list of batches")) << notList.err;
  EXPECT_FALSE(s.exists("other.pt"));
}

// The same with torch.optim.AdamW, whose step reads each parameter's step
// count with .item() into the bias corrections: the graph reads it at
// every batch, natively too.
TEST(Deploy, NativeTrainingWithAdamWGivesEagerTrainingsWeights) {
  Scratch s("native_training_adamw");
  Result cap = s.run("magpy-capture " + example("train_step.py") + " . --optimizer adamw");
  ASSERT_EQ(cap.status, 0) << cap.out << cap.err;
  EXPECT_TRUE(contains(cap.err, "3 calls, 2 records (2 graphs, 0 breaks), 1 replayed from a record")) << cap.err;
  Result run = s.run("magpy-run train_step.mgp --batches batches.pt --save-state trained.pt");
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_TRUE(contains(run.out, "batch 19  record 1  result: tensor float32[]")) << run.out;
  Result check = s.run("PYTHONPATH=" + sourceDir() + "/python /usr/bin/python3 " + example("train_step.py") +
                       " --check . --optimizer adamw");
  ASSERT_EQ(check.status, 0) << check.out << check.err;
  EXPECT_TRUE(contains(check.out, "trained natively = trained eagerly: 9 tensors")) << check.out;
}

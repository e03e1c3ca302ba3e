// The recorder's warning tap (op_recorder.h): the warnings a recorded
// operator's kernel gives are noted, still reach the handler they would
// have reached, and match the text torch's bindings give Python once each.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include "capture/op_recorder.h"

using magpy::capture::OpRecorder;

namespace {

// A monitor that knows no tensor and records nothing of its own.
struct NoMonitor : OpRecorder::Delegate {
  int externalTensor(const at::Tensor&) override { return -1; }
  void beforeWrite(const at::Tensor&) override {}
  int pythonDataTensor(const at::Tensor&) override { return -1; }
  bool checksContents(const at::Tensor&) override { return false; }
  void breakGraph(const std::string&) override {}
  void readRuntimeState(const std::string&) override {}
  std::string sourceLocation() const override { return ""; }
  void settleReachability() override {}
  int unreachableHolds(const at::Tensor&) override { return -1; }
  void freed(const at::Tensor&) override {}
};

// Stands in for torch's bindings' handler: collects what reaches it.
struct Collected : c10::WarningHandler {
  Collected() : previous(c10::Warning::get_warning_handler()) { c10::Warning::set_warning_handler(this); }
  ~Collected() override { c10::Warning::set_warning_handler(previous); }
  void process(const c10::SourceLocation&, const std::string& msg, bool) override { messages.push_back(msg); }
  c10::WarningHandler* previous;
  std::vector<std::string> messages;
};

TEST(OperatorWarnings, MatchBareOrWithTheBindingsOriginOnceEach) {
  NoMonitor monitor;
  OpRecorder recorder(monitor);
  recorder.operatorWarned("kernel says so");
  recorder.operatorWarned("kernel says so");
  EXPECT_FALSE(recorder.fromRecordedOperator("kernel says"));
  EXPECT_FALSE(recorder.fromRecordedOperator("kernel says so, and more"));
  EXPECT_TRUE(recorder.fromRecordedOperator("kernel says so (Triggered internally at  ./aten/x.cpp:3.)"));
  EXPECT_TRUE(recorder.fromRecordedOperator("kernel says so"));
  EXPECT_FALSE(recorder.fromRecordedOperator("kernel says so"));  // each matched once
}

TEST(OperatorWarnings, AKernelsWarningIsNotedAndPassedOn) {
  NoMonitor monitor;
  OpRecorder recorder(monitor);
  Collected bindings;
  at::Tensor x = at::arange(4.0);
  at::Tensor mask = at::tensor({1, 0, 1, 0}, at::kByte);
  recorder.setEnabled(true);
  x.index({mask});  // indexing with a uint8 mask is deprecated: the kernel warns
  recorder.setEnabled(false);
  ASSERT_EQ(bindings.messages.size(), 1u);
  EXPECT_NE(bindings.messages[0].find("uint8"), std::string::npos);
  EXPECT_EQ(c10::Warning::get_warning_handler(), &bindings);  // the tap is gone
  EXPECT_TRUE(recorder.fromRecordedOperator(bindings.messages[0].c_str()));

  x.index({mask});  // not recorded: passed on, not noted
  ASSERT_EQ(bindings.messages.size(), 2u);
  EXPECT_FALSE(recorder.fromRecordedOperator(bindings.messages[1].c_str()));
}

}  // namespace

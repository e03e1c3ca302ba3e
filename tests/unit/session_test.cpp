#include <gtest/gtest.h>

#include <ATen/ops/allclose.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/relu.h>

#include <filesystem>

#include "magpy/replay/mock.h"
#include "magpy/replay/session.h"
#include "magpy/replay/tensors.h"
#include "magpy/replay/value_files.h"
#include "sample.h"

using namespace magpy;
using namespace magpy::replay;

namespace {
Value tensorArg(at::Tensor t) { return Value::ofTensor(std::move(t)); }
}  // namespace

TEST(Session, ReplaysTheLoggedCall) {
  Session s(sample::sampleFile());
  auto out = s.call(0, s.loggedArgs(0), s.loggedKwargs(0));
  EXPECT_EQ(out.record, 0u);
  auto cmp = compare(out.result, s.loggedResult(0), {}, "result");
  EXPECT_TRUE(cmp.equal()) << cmp.difference;
}

TEST(Session, MockWritesPersistAcrossCalls) {
  Session s(sample::sampleFile());
  Value* calls = s.self(0).heap->attr("calls");
  ASSERT_NE(calls, nullptr);
  EXPECT_EQ(calls->atom.i, 0);
  s.call(0, {tensorArg(at::randn({2}))});
  EXPECT_EQ(s.self(0).heap->attr("calls")->atom.i, 1);
}

// A write of the value the state already holds (`self.dim = dim` on every
// call) leaves the state as it was, so state guards need no new check.
TEST(Mock, RewritingTheHeldValueChangesNothing) {
  record::MockSpec mock;
  record::Effect e;
  e.kind = record::Effect::Kind::SetAttr;
  e.target = record::AccessPath::self();
  e.name = "dim";
  e.value = record::ValueExpr::constant(record::Atom::integer(-1));
  mock.effects.push_back(e);
  CallState state;
  state.self = Value::object("M");
  state.self.heap->setAttr("dim", Value::ofAtom(record::Atom::integer(-1)));
  EXPECT_FALSE(applyMock(mock, {}, state).stateChanged);
  state.self.heap->setAttr("dim", Value::ofAtom(record::Atom::integer(2)));
  EXPECT_TRUE(applyMock(mock, {}, state).stateChanged);
  EXPECT_EQ(state.self.heap->attr("dim")->atom.i, -1);
  EXPECT_FALSE(applyMock(mock, {}, state).stateChanged);
}

TEST(Session, GuardFailuresSayPathExpectedAndActual) {
  Session s(sample::sampleFile());
  try {
    s.call(0, {tensorArg(at::randn({3}))});
    FAIL();
  } catch (const NoMatchingRecord& e) {
    ASSERT_EQ(e.misses().size(), 1u);
    EXPECT_EQ(e.misses()[0].path, "args[0]");
    EXPECT_EQ(e.misses()[0].expected, "tensor float32[2] strides=[1] cpu");
    EXPECT_EQ(e.misses()[0].actual, "tensor float32[3] strides=[1] cpu");
  }
  // State guards are checked again after the state changes.
  s.self(0).heap->setAttr("scale", Value::ofAtom(record::Atom::floating(2.0)));
  auto miss = s.explain(0, {tensorArg(at::randn({2}))});
  ASSERT_TRUE(miss[0].has_value());
  EXPECT_EQ(miss[0]->text(), "self.scale: expected == 1.0, got 2.0");
  EXPECT_THROW(s.call(0, {}), NoMatchingRecord);
}

TEST(Session, ComputesWithTheStateTensors) {
  Session s(sample::sampleFile());
  at::Tensor w = s.self(0).heap->attr("w")->tensor;
  at::Tensor x = at::randn({2});
  auto out = s.call(0, {tensorArg(x)});
  EXPECT_TRUE(at::allclose(out.result.tensor, at::relu(at::mul(x, w))));
}

TEST(Session, FindsFunctionsByNameOrSuffix) {
  Session s(sample::sampleFile());
  EXPECT_EQ(s.findFunction("__main__.Net"), 0u);
  EXPECT_EQ(s.findFunction("Net"), 0u);
  EXPECT_THROW(s.findFunction("Other"), Error);
}

TEST(ValueFiles, RoundTrip) {
  auto path = (std::filesystem::temp_directory_path() / "magpy_values.pt").string();
  Value v = Value::tuple({tensorArg(at::randn({2, 3})), Value::ofAtom(record::Atom::integer(4)),
                          Value::dict({record::Atom::string("k")}, {Value::list({Value::ofAtom(record::Atom::none())})})});
  saveValueFile(path, v);
  Value back = loadValueFile(path);
  EXPECT_TRUE(compare(back, v, {}, "v").equal());
  std::filesystem::remove(path);
  EXPECT_THROW(loadValueFile(path), Error);
}

TEST(Environment, TorchVersionConcern) {
  EXPECT_EQ(torchVersionConcern(libtorchVersion()), "");
  EXPECT_EQ(torchVersionConcern(libtorchVersion() + "a0"), "");
  EXPECT_NE(torchVersionConcern("0.4.1").find("replays on libtorch"), std::string::npos);
}

TEST(Errors, MessagesLeaveOutLibtorchsBacktrace) {
  try {
    at::randn({2}).view({3});
    FAIL() << "view accepted a wrong size";
  } catch (const std::exception& e) {
    std::string text = messageOf(e);
    EXPECT_NE(text.find("shape '[3]' is invalid"), std::string::npos) << text;
    EXPECT_EQ(text.find("frame #"), std::string::npos) << text;
    EXPECT_EQ(text.find("Exception raised from"), std::string::npos) << text;
  }
  EXPECT_EQ(messageOf(Error("plain")), "plain");
}

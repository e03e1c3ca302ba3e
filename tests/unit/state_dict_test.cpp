// Loading a state dict into a record's native state: keys reach tensors as
// attributes or through _modules/_parameters/_buffers, tensors keep their
// identity, and each mismatch is one precise error.
#include <gtest/gtest.h>

#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>

#include "magpy/replay/state_dict.h"
#include "magpy/support/error.h"

using namespace magpy;
using namespace magpy::replay;

namespace {

Value layer(bool withBuffer) {
  Value l = Value::object("torch.nn.modules.linear.Linear");
  l.heap->setAttr("weight", Value::ofTensor(at::zeros({2, 3}).requires_grad_()));
  l.heap->setAttr("training", Value::ofAtom(record::Atom::boolean(true)));
  if (withBuffer) {
    Value buffers = Value::dict({record::Atom::string("scale")}, {Value::ofTensor(at::zeros({2}))});
    l.heap->setAttr("_buffers", buffers);
  }
  return l;
}

// self.fc (an attribute) and self._modules['blocks'] -> ._modules['0'] (a buffer).
Value model() {
  Value self = Value::object("__main__.Net");
  self.heap->setAttr("fc", layer(false));
  Value blocks = Value::object("torch.nn.modules.container.ModuleList");
  blocks.heap->setAttr("_modules", Value::dict({record::Atom::string("0")}, {layer(true)}));
  self.heap->setAttr("_modules", Value::dict({record::Atom::string("blocks")}, {blocks}));
  self.heap->setAttr("training", Value::ofAtom(record::Atom::boolean(true)));
  return self;
}

StateDict full() {
  return {{{"fc.weight", at::ones({2, 3})}, {"blocks.0.weight", at::full({2, 3}, 2.0)}, {"blocks.0.scale", at::ones({2})}}};
}

std::string errorOf(Value& self, const StateDict& d, bool partial) {
  try {
    loadStateInto(self, d, partial);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(StateDict, CopiesIntoTheRecordsTensorsInPlace) {
  Value self = model();
  at::Tensor before = self.heap->attr("fc")->heap->attr("weight")->tensor;
  StateLoadReport r = loadStateInto(self, full(), false);
  EXPECT_EQ(r.loaded, 3u);
  const at::Tensor& after = self.heap->attr("fc")->heap->attr("weight")->tensor;
  EXPECT_TRUE(after.is_same(before));  // identity kept: aliases see the new weights
  EXPECT_TRUE(after.requires_grad());
  EXPECT_TRUE(at::equal(after, at::ones({2, 3})));
  Value* block = self.heap->attr("_modules")->heap->item(record::Atom::string("blocks"));
  Value* first = block->heap->attr("_modules")->heap->item(record::Atom::string("0"));
  EXPECT_TRUE(at::equal(first->heap->attr("_buffers")->heap->item(record::Atom::string("scale"))->tensor, at::ones({2})));
}

TEST(StateDict, EachMismatchIsOneError) {
  Value self = model();
  StateDict unknown = full();
  unknown.entries.push_back({"head.weight", at::ones({1})});
  EXPECT_NE(errorOf(self, unknown, false).find("state key 'head.weight' is not part of the record's state"), std::string::npos);

  StateDict reshaped = full();
  reshaped.entries[0].second = at::ones({3, 2});
  EXPECT_NE(errorOf(self, reshaped, false).find("state key 'fc.weight' is float32[3, 2] in the file, but the record was "
                                                "captured with float32[2, 3]"),
            std::string::npos);

  StateDict retyped = full();
  retyped.entries[0].second = at::ones({2, 3}, at::kDouble);
  EXPECT_NE(errorOf(self, retyped, false).find("is float64[2, 3] in the file"), std::string::npos);

  StateDict missing = full();
  missing.entries.erase(missing.entries.begin());
  EXPECT_NE(errorOf(self, missing, false).find("state key 'fc.weight' (a parameter of the record's model) is missing"),
            std::string::npos);
}

TEST(StateDict, PartialIgnoresAndKeeps) {
  Value self = model();
  StateDict d = full();
  d.entries.erase(d.entries.begin());
  d.entries.push_back({"head.weight", at::ones({1})});
  StateLoadReport r = loadStateInto(self, d, true);
  EXPECT_EQ(r.loaded, 2u);
  EXPECT_EQ(r.ignored, std::vector<std::string>{"head.weight"});
  EXPECT_EQ(r.kept, std::vector<std::string>{"fc.weight"});
}

TEST(StateDict, EvalModeClearsEveryTrainingFlag) {
  Value self = model();
  EXPECT_EQ(setEvalMode(self), 3u);
  EXPECT_FALSE(self.heap->attr("fc")->heap->attr("training")->atom.i);
  EXPECT_FALSE(self.heap->attr("training")->atom.i);
}

TEST(StateDict, FilesThatAreNotStateDictsAreErrors) {
  try {
    loadStateDict("/nonexistent/net.pt");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/net.pt: cannot open the state file (does it exist?)"), std::string::npos) << e.what();
  }
}

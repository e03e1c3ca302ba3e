// The steps of an execution plan (replay/plan.cpp), shared with the
// compiled backend that lowers them (replay/compiled_graph.cpp).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "magpy/record/graph.h"
#include "magpy/record/op_policy.h"

namespace magpy::replay {

// One operand of a step: a constant boxed at load time, a slot, or a list
// of slots packed into a c10::List at run time.
struct Operand {
  // WrappedNumber: a lifted Python number where the operator takes a Tensor
  // (x * gain), made the 0-dim "wrapped number" tensor Python makes.
  // NumberList: floats, some of them numbers the graph computes.
  // Group: the process group a collective runs in (replay/collectives.h).
  enum class Kind : uint8_t { Const, Slot, TensorList, OptionalTensorList, SizeList, NumberList, WrappedNumber, Group };
  Kind kind = Kind::Const;
  c10::IValue constant;
  int slot = -1;
  std::vector<int> slots;      // -1: None (optional lists), a constant entry (SizeList, NumberList)
  std::vector<int64_t> sizes;  // SizeList: the constant entries
  std::vector<double> floats;  // NumberList: the constant entries
  bool scalars = false;        // NumberList: the schema takes Scalar[], not float[]
};

// Python's arithmetic on the graph's numbers (record::isNumberOp).
using record::NumberOp;

// A check of what the program read into Python (record::isCheck).
enum class Expect : uint8_t { None, Equal, Sizes, True };

// A loop region's bounds (record::kLoop). LoopBegin: operands the trip
// count and the initial values; outputs the index slot, then the carried
// slots. LoopEnd: operands the next values, then the scans; outputs the
// scan lists. Each names the other in `jump`; `loop` numbers the plan's
// loops (their counters while a run is in one).
// A branch's bounds (record::kIf). IfBegin: operand the condition; `jump`
// its IfElse, where the else side begins; `seen` which sides it may take.
// IfElse and IfEnd end the then and the else side: operands that side's
// values, outputs the branch's value slots (the same for both); an IfElse
// jumps to its IfEnd.
enum class Control : uint8_t { None, LoopBegin, LoopEnd, IfBegin, IfElse, IfEnd };
constexpr uint8_t kThenSeen = 1, kElseSeen = 2;

struct Step {
  std::optional<c10::OperatorHandle> op;  // none for a NumberOp or a check
  NumberOp number = NumberOp::None;
  Expect expect = Expect::None;
  std::vector<int64_t> expectedSizes;  // Expect::Sizes
  Control control = Control::None;
  size_t jump = 0;
  size_t loop = 0;
  uint8_t seen = 0;  // IfBegin: kThenSeen | kElseSeen
  // record::kBackward: operands the root, its gradient (or None), the
  // leaves (a TensorList) and retain_graph; outputs one gradient per leaf.
  bool backward = false;
  std::string name;          // "aten::add.Tensor"
  std::string node;          // "%add_1 (model.py:14)", for errors
  // Arguments replay checks before the kernel, which trusts them
  // (record::checksArguments): a view's geometry, packed batch sizes.
  record::ArgumentCheck check = record::ArgumentCheck::None;
  std::vector<Operand> operands;
  std::vector<int> outputs;  // slot per returned value
  bool unpackList = false;   // the op returns one Tensor[]: its elements go to `outputs`
  bool collective = false;   // record::isCollective: returns (Tensor[], Work); waited for, then unpacked
  bool folded = false;       // depends only on parameters: computed once while they are unchanged
  record::GradMode grad = record::GradMode::Ambient;  // the region's mode, switched around the operator
  bool beforeEffects = true;  // no earlier step wrote an input or drew random numbers (replay::firstEffect)
  std::vector<int> release;  // slots dead after this step (a LoopEnd: after its last iteration)
  // Results whose sizes depend on the call's symbols, or on lifted numbers
  // (then checked against the sizes seen at capture). A SymDim's `node`
  // here is the slot holding that node's int.
  std::vector<std::pair<int, std::vector<record::SymDim>>> sizeChecks;

  std::vector<int> operandSlots() const {
    std::vector<int> out;
    for (auto& op : operands) {
      if (op.slot >= 0) out.push_back(op.slot);
      for (int s : op.slots)
        if (s >= 0) out.push_back(s);
    }
    for (auto& check : sizeChecks)
      for (auto& d : check.second)
        if (d.node >= 0) out.push_back(d.node);
    return out;
  }
};

// Constant tensors made at load. One the graph writes or returns is
// copied for each run: a call must not see what the last one did to it.
struct PlanConstant {
  int slot;
  c10::IValue value;
  bool copyPerRun;
};

}  // namespace magpy::replay

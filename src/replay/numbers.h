// Python's number arithmetic as the graph's number operators do it
// (record::isNumberOp), for plan steps and graph passes.
#pragma once

#include <ATen/core/ivalue.h>

#include <string>

#include "replay/plan_steps.h"

namespace magpy::replay {

using record::numberOpOf;  // NumberOp::None for other targets

// Python's semantics: int arithmetic stays exact, / gives a float, //
// floors, % takes the divisor's sign, comparisons give a bool. Where Python
// would do something a graph cannot (raise, grow an int beyond 64 bits,
// compute with ints beyond 2^53 as floats exactly), the record does not
// describe the call: SizeMismatch (a miss, so the call runs as Python
// does). A one-operand operator ignores b.
c10::IValue numberOp(NumberOp op, const c10::IValue& a, const c10::IValue& b);

}  // namespace magpy::replay

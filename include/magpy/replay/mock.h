// Applying a record's mock to native state: build the call's result from
// graph outputs, constants and entry-state reads, then perform the writes.
#pragma once

#include <ATen/core/ivalue.h>

#include <vector>

#include "magpy/record/mock.h"
#include "magpy/replay/state.h"

namespace magpy::replay {

struct MockOutcome {
  Value result;
  // Whether a write changed the state (writing a value the state already
  // holds, as `self.dim = dim` does on every call, does not): state guards
  // need checking again only then.
  bool stateChanged = false;
};

// Every read (of a result or an effect's value or target) sees the state as
// it was at call entry; the writes happen afterwards, in order.
MockOutcome applyMock(const record::MockSpec& mock, const std::vector<c10::IValue>& outputs, CallState& state);

// A graph output as a runtime value (tensors, or scalars some ops return).
Value valueOf(const c10::IValue& v);

}  // namespace magpy::replay

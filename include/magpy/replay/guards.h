// Guard evaluation against native state.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "magpy/record/guard.h"
#include "magpy/replay/state.h"

namespace magpy::replay {

struct GuardMiss {
  std::string path;      // "args[0]"
  std::string expected;  // "tensor float32[1, 16] strides=[16, 1] cpu"
  std::string actual;    // "tensor float32[4, 16] strides=[16, 1] cpu"
  std::string text() const { return path + ": expected " + expected + ", got " + actual; }
};

// The first guard that does not hold, or nothing when all hold.
std::optional<GuardMiss> firstFailingGuard(const std::vector<record::Guard>& guards, const CallState& state);

}  // namespace magpy::replay

// Why a record does not accept a call: its first guard that does not hold
// (state_access.h checks guards, for live and native state alike).
#pragma once

#include <string>

namespace magpy::replay {

struct GuardMiss {
  std::string path;      // "args[0]"
  std::string expected;  // "tensor float32[1, 16] strides=[16, 1] cpu"
  std::string actual;    // "tensor float32[4, 16] strides=[16, 1] cpu"
  std::string text() const { return path + ": expected " + expected + ", got " + actual; }
};

}  // namespace magpy::replay

// Why a record does not accept a call: its first guard that does not hold
// (state_access.h checks guards, for live and native state alike), and
// the sizes a dynamic record's guards bind.
#pragma once

#include <optional>
#include <string>

#include "magpy/record/value.h"

namespace magpy::replay {

struct GuardMiss {
  std::string path;      // "args[0]"
  std::string expected;  // "tensor float32[1, 16] strides=[16, 1] cpu"
  std::string actual;    // "tensor float32[4, 16] strides=[16, 1] cpu"
  std::string text() const { return path + ": expected " + expected + ", got " + actual; }
};

// Each record's first failing guard for a call no record served, in order
// (replay/dispatch.h).
using Misses = std::vector<GuardMiss>;

// "record 0 needs PATH EXPECTED, got ACTUAL; record 1 needs ..." for the
// first `shown` misses, then how many more records missed.
std::string summarizeMisses(const Misses& misses, size_t shown);

// Where dispatch's time went, summed over calls (seconds).
struct PhaseTimes {
  double guards = 0, graph = 0, mock = 0;
};

// The sizes a dynamic record's guards bound for one call (s0, s1, ...):
// the first tensor guard that names a symbol binds it, later ones must
// agree, and the plan checks its operators' results against them.
struct SymbolValues {
  int64_t value[record::kMaxSymbols] = {};
  uint32_t bound = 0;  // bit k: s<k> has a value

  // Binds or checks s<symbol> = size; false where it cannot hold.
  bool unify(int32_t symbol, int64_t size) {
    uint32_t bit = 1u << symbol;
    if (bound & bit) return value[symbol] == size;
    if (size < record::kMinSymbolValue) return false;
    value[symbol] = size;
    bound |= bit;
    return true;
  }
  // scale * s + offset of a bound symbol; nullopt where it is not bound or
  // does not fit in 64 bits (a record's scale and offset are its own: no
  // size a tensor can have matches then).
  std::optional<int64_t> evaluate(const record::SymDim& d) const {
    if (d.symbol < 0) return d.offset;
    if (!(bound & (1u << d.symbol))) return std::nullopt;
    int64_t size = 0;
    if (__builtin_mul_overflow(d.scale, value[d.symbol], &size) || __builtin_add_overflow(size, d.offset, &size))
      return std::nullopt;
    return size;
  }
};

}  // namespace magpy::replay

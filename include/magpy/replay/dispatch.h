// One dispatch loop for a function's records, shared by the JIT (records
// over live Python objects, capture/jit.cpp) and native replay (over
// native state, replay/session.cpp).
//
// A call tries the records in order: the first whose guards hold runs its
// graph and applies its mock. A graph that stops cleanly (it writes
// nothing before its last size check, plan.h) turns a size mismatch into
// a miss, so the next record is tried. What differs between the runtimes
// is a Records adapter:
//
//   using Result                       what a call returns
//   static constexpr bool kRunsPython  records with graph breaks run as
//                                      Python (the JIT) rather than miss;
//                                      a graph that stops cleanly and
//                                      fails is a miss too (Python then
//                                      raises what the program expects)
//   size_t size()                      how many records
//   std::optional<GuardMiss> check(r)  the first failing guard, or why the
//                                      record cannot serve this call
//   const Plan* plan(r)                null: the record has graph breaks
//   Result runAsPython(r)              kRunsPython only
//   std::vector<c10::IValue> run(r)    the graph's outputs
//   void sizesDiffer(r)                a run stopped on a size mismatch
//                                      (not on a check: the record is
//                                      right for the calls it describes)
//   Result mock(r, outputs)            applies the mock; the call's result
//   [[noreturn]] void fail(r, what)    throws the runtime's Error
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "magpy/replay/guards.h"
#include "magpy/replay/plan.h"
#include "magpy/support/error.h"

namespace magpy::replay {

namespace detail {
inline double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace detail

// Runs the call on the first record that serves it; nothing (and `misses`
// filled) when none does.
template <class Records>
std::optional<typename Records::Result> dispatch(Records& records, Misses& misses, PhaseTimes& times) {
  using Clock = std::chrono::steady_clock;
  for (size_t r = 0; r < records.size(); ++r) {
    auto t0 = Clock::now();
    std::optional<GuardMiss> miss = records.check(r);
    times.guards += detail::secondsSince(t0);
    if (miss) {
      misses.push_back(std::move(*miss));
      continue;
    }
    const Plan* plan = records.plan(r);
    if constexpr (Records::kRunsPython) {
      if (!plan) return records.runAsPython(r);
    }
    std::vector<c10::IValue> outputs;
    auto t1 = Clock::now();
    try {
      outputs = records.run(r);
    } catch (const SizeMismatch& e) {
      if (!e.changedNothing) records.fail(r, e.what());
      times.graph += detail::secondsSince(t1);
      if (!e.decidedOtherwise) records.sizesDiffer(r);
      if (e.decidedOtherwise) misses.push_back(GuardMiss{"(check)", "what the program read and decided on", e.what()});
      else misses.push_back(GuardMiss{"(sizes)", "results of the sizes the record computes", e.what()});
      continue;
    } catch (const Error& e) {
      // An operator refused this call's values (an index out of range).
      if (!Records::kRunsPython || !plan->stopsCleanly()) records.fail(r, e.what());
      times.graph += detail::secondsSince(t1);
      misses.push_back(GuardMiss{"(run)", "a call its graph can run", e.what()});
      continue;
    } catch (const c10::Error& e) {
      records.fail(r, e.what_without_backtrace());
    }
    times.graph += detail::secondsSince(t1);
    auto t2 = Clock::now();
    auto result = records.mock(r, outputs);
    times.mock += detail::secondsSince(t2);
    return result;
  }
  return std::nullopt;
}

}  // namespace magpy::replay

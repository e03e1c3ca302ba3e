// Replaying a plan as a CUDA graph: the operators are recorded once and
// launched together, which removes their per-launch CPU cost. Records are
// static (guards fix every shape), so one capture serves every call whose
// arguments the guards accept. Only compiled against a CUDA libtorch.
#pragma once

#include <ATen/core/ivalue.h>

#include <memory>
#include <vector>

#include "magpy/replay/plan.h"

namespace magpy::replay {

class CudaGraphRunner {
 public:
  virtual ~CudaGraphRunner() = default;
  // Same contract as Plan::runWith.
  virtual std::vector<c10::IValue> run(std::vector<c10::IValue> inputs) = 0;

  // A runner for the plan, or null when this build has no CUDA or the plan
  // writes its inputs (a graph would write copies, not the state).
  static std::unique_ptr<CudaGraphRunner> make(const Plan& plan, const record::Graph& graph);
};

}  // namespace magpy::replay

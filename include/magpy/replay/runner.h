// What magpy-run does with a record, printing as it goes: replay the
// logged calls and compare their results (or call one function with
// inputs from a file), then time and profile calls on request. The app
// parses flags into RunOptions; this is everything after.
#pragma once

#include <string>

#include "magpy/replay/state.h"  // Tolerance

namespace magpy::replay {

// magpy-run's flags (its --help says what each does).
struct RunOptions {
  std::string record;
  std::string function, inputs, output;  // --function, --inputs, --output
  std::string state;                     // --state
  std::string batches, saveState;        // --batches, --save-state
  bool statePartial = false, eval = false, gradEnabled = false;  // --state-partial, --eval, --grad-enabled
  int repeat = 0, threads = 0;
  std::string optimize = "default", backend = "aten", device = "cpu";
  bool noCudaGraphs = false, strictEnv = false, showOptimizations = false, profile = false;
  bool check = true;  // compare results with the captured ones (--no-check clears it)
  bool explain = false, keepGoing = false, trustRecord = false;
  std::string memoryBudget = "2G";
  double timeBudget = 0;  // seconds, 0: none
  double distTimeout = 60;  // --dist-timeout: seconds a rank waits for the others
  Tolerance tol;
};

// Runs the job on standard output; returns the exit status (0 all calls
// replayed and matched, 1 a call refused or a result differed). Throws
// Error for a file it cannot use or options that do not go together.
// Started as a rank of a torch.distributed job (torchrun's environment,
// include/magpy/replay/distributed.h), "{rank}" in its file names is the
// rank, a record with collectives first forms the process group with the
// other ranks, and only rank 0 saves the state (unless its name holds
// "{rank}").
int runRecord(const RunOptions& opt);

}  // namespace magpy::replay

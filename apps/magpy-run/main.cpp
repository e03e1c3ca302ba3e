// magpy-run: replay a record natively (no Python): guards, graph, mock.
#include <CLI/CLI.hpp>
#include <malloc.h>

#include "magpy/replay/distributed.h"
#include "magpy/replay/runner.h"
#include "magpy/support/error.h"

int main(int argc, char** argv) {
  // Large temporaries (im2col buffers) otherwise go back to the kernel on
  // every call; keeping them in the heap roughly doubles conv speed.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);

  CLI::App app{"Replay a magpy record natively, without Python", "magpy-run"};
  magpy::replay::RunOptions opt;
  bool noCheck = false;
  app.add_option("record", opt.record, "The .mgp file written by magpy-capture")->required();
  app.add_option("--inputs", opt.inputs,
                 "Call with inputs from a torch.save file instead of the logged calls: a tuple is the positional "
                 "arguments, a dict the keyword arguments, anything else the one argument");
  app.add_option("--batches", opt.batches,
                 "Train natively: call the function on each element of a torch.save'd list in turn (each element as "
                 "--inputs takes it), with grad mode on; each call's writes to the state are the next call's state");
  app.add_option("--save-state", opt.saveState,
                 "With --inputs or --batches: afterwards, save the module's state dict (its self, or the one module "
                 "its globals hold) for Python's model.load_state_dict(torch.load(...))");
  app.add_option("--function", opt.function,
                 "The compiled function to call with --inputs or --batches (name or unique suffix)");
  app.add_option("--output", opt.output, "With --inputs: save the result with the torch.save format");
  app.add_option("--state", opt.state,
                 "With --inputs: load weights from a torch.save'd state dict (model.state_dict()) into the compiled "
                 "module first; every key must match the record's state in name, dtype and shape");
  app.add_flag("--state-partial", opt.statePartial,
               "With --state: ignore keys the record does not hold and keep captured parameters the file lacks");
  app.add_flag("--eval", opt.eval, "With --inputs: set every module's training flag to False first, as model.eval()");
  app.add_flag("--grad-enabled", opt.gradEnabled,
               "With --inputs: call as the script would with grad mode on (default: off, as under torch.no_grad()); "
               "only records that differentiate (a training step) compute with autograd");
  app.add_option("--repeat", opt.repeat, "After replaying, time N more calls per function with the first logged inputs")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--no-check", noCheck, "Do not compare results with the captured ones");
  app.add_option("--threads", opt.threads, "Intra-op threads for the operators (default: libtorch's choice)")
      ->check(CLI::PositiveNumber);
  app.add_option("--optimize", opt.optimize,
                 "Graph optimizations: default (dce,cse,fold,dropout), all (adds conv-bn), none, or a list")
      ->capture_default_str();
  app.add_option("--backend", opt.backend,
                 "How graphs run on CPU: aten (operator by operator, the results eager gives), compiled (lowered to "
                 "TorchScript and optimized by libtorch), auto (compiled where the first call shows it faster); compiled "
                 "and auto check the compiled graph against aten on the first call and fall back where it disagrees")
      ->capture_default_str();
  app.add_flag("--profile", opt.profile,
               "With --repeat: print where the timed calls spend their time, per operator (count, total, share), and "
               "the time outside operators");
  app.add_flag("--show-optimizations", opt.showOptimizations, "Print what the optimizations did to each record");
  app.add_option("--device", opt.device, "Where to replay: cpu, cuda, cuda:N (CUDA needs a CUDA libtorch)")
      ->capture_default_str();
  app.add_flag("--no-cuda-graphs", opt.noCudaGraphs, "On CUDA, run operators one by one instead of as CUDA graphs");
  app.add_flag("--strict-env", opt.strictEnv,
               "Refuse a record captured with another torch major.minor (by default, a warning)");
  app.add_flag("--trust-record", opt.trustRecord,
               "Run operators outside the operator policy (files, raw storage, unchecked constructors): only for "
               "records from a source you trust");
  app.add_option("--memory-budget", opt.memoryBudget,
                 "CPU tensor memory one call may allocate: 512M, 8G, ... or none")
      ->capture_default_str();
  app.add_option("--time-budget", opt.timeBudget,
                 "Seconds one call may run before it is stopped between operators (0: no limit; aten backend only)")
      ->capture_default_str();
  app.add_flag("--keep-going", opt.keepGoing,
               "When a logged call matches no record, go on with the other functions' calls (exit status 1 at the end)");
  app.add_flag("--explain", opt.explain, "When no record accepts a call, print each record's failing guard");
  int nproc = 0;
  app.add_option("--nproc-per-node", nproc,
                 "Start N ranks of a data-parallel job on this machine, as torchrun would (RANK, WORLD_SIZE, "
                 "MASTER_ADDR=127.0.0.1, a free MASTER_PORT), each running this command; \"{rank}\" in file names is "
                 "the rank's number")
      ->check(CLI::Range(1, 1024));
  app.add_option("--dist-timeout", opt.distTimeout,
                 "Seconds a rank waits for the others (forming the group, each collective) before it fails")
      ->capture_default_str();
  app.add_option_function<double>("--rtol", [&](double v) { opt.tol.rtol = v; },
                                  "Relative tolerance of the result check (default: torch.testing's for the dtype)");
  app.add_option_function<double>("--atol", [&](double v) { opt.tol.atol = v; },
                                  "Absolute tolerance of the result check (default: torch.testing's for the dtype)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  opt.check = !noCheck;
  if (nproc > 0) {
    // Each rank runs the same command without --nproc-per-node.
    std::vector<std::string> rankArgs;
    for (int i = 0; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--nproc-per-node") ++i;
      else if (a.rfind("--nproc-per-node=", 0) != 0) rankArgs.push_back(a);
    }
    auto grace = std::chrono::milliseconds(int64_t(opt.distTimeout * 1000));
    return magpy::runReportingErrors("magpy-run", [&] { return magpy::replay::launchRanks(nproc, rankArgs, grace); });
  }

  return magpy::runReportingErrors("magpy-run", [&] { return magpy::replay::runRecord(opt); });
}

// magpy-run: replay a record natively (no Python): guards, graph, mock.
#include <CLI/CLI.hpp>
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <optional>

#include <ATen/Parallel.h>

#include "magpy/replay/profile.h"
#include "magpy/replay/session.h"
#include "magpy/replay/state_dict.h"
#include "magpy/replay/tensors.h"
#include "magpy/replay/value_files.h"
#include "magpy/support/strings.h"

namespace {

using magpy::replay::Session;
using magpy::replay::Value;

struct Options {
  std::string record;
  std::string function;
  std::string inputs;
  std::string output;
  std::string state;
  bool statePartial = false;
  bool eval = false;
  int repeat = 0;
  int threads = 0;
  std::string optimize = "default";
  std::string backend = "aten";
  std::string device = "cpu";
  bool noCudaGraphs = false;
  bool strictEnv = false;
  bool showOptimizations = false;
  bool profile = false;
  bool check = true;
  bool explain = false;
  bool keepGoing = false;
  bool trustRecord = false;
  std::string memoryBudget = "2G";
  magpy::replay::Tolerance tol;
};

// Each record's first failing guard, for the first `limit` records.
void printMisses(const std::vector<magpy::replay::GuardMiss>& misses, size_t limit) {
  if (misses.empty()) std::cout << "  the function has no records: the capture never completed a call of it\n";
  for (size_t r = 0; r < misses.size() && r < limit; ++r) std::cout << "  record " << r << ": " << misses[r].text() << "\n";
  if (misses.size() > limit) std::cout << "  (run with --explain to see every record's)\n";
}

// A compiled graph's results are checked within its tolerance, unless given one.
magpy::replay::Tolerance resultTolerance(magpy::replay::Tolerance tol, bool compiled) {
  if (compiled) {
    tol.rtol = tol.rtol.value_or(*magpy::replay::Tolerance::compiled().rtol);
    tol.atol = tol.atol.value_or(*magpy::replay::Tolerance::compiled().atol);
  }
  return tol;
}

int replayLog(Session& session, const Options& opt) {
  const auto& file = session.file();
  if (file.calls.empty())
    throw magpy::Error(opt.record + " has no logged calls to replay; capture with a script that calls its compiled functions");
  size_t replayed = 0, matched = 0, mismatches = 0, refused = 0;
  bool stopped = false;
  session.replayLog([&](const magpy::replay::LoggedStep& step) {
    const auto& logged = file.calls[step.call];
    std::cout << "call " << step.call << "  " << file.functions[logged.function].name << "  ";
    if (!logged.updates.empty())
      std::cout << "(" << logged.updates.size() << " state changes made by the script applied first) ";
    if (step.kind != magpy::replay::LoggedStep::Kind::Replayed) {
      ++refused;
      if (step.kind == magpy::replay::LoggedStep::Kind::NoRecord) {
        std::cout << "no record matches\n";
        printMisses(step.misses, opt.explain ? SIZE_MAX : 1);
      } else {
        std::cout << "record " << step.outcome.record << ", but capture used record " << logged.record
                  << ", which needs Python: " << step.why << "\n";
      }
      stopped = !opt.keepGoing;
      return !stopped;
    }
    ++replayed;
    std::cout << "record " << step.outcome.record;
    if (int(step.outcome.record) != logged.record && logged.record >= 0)
      std::cout << " (capture used record " << logged.record << ")";
    if (opt.check) {
      auto cmp = magpy::replay::compare(step.outcome.result, session.loggedResult(step.call),
                                        resultTolerance(opt.tol, step.outcome.compiled), "result");
      if (cmp.equal()) {
        std::cout << "  matches the captured result (max abs diff " << cmp.max_abs_diff << ")";
        ++matched;
      } else {
        std::cout << "  MISMATCH: " << cmp.difference;
        ++mismatches;
      }
    }
    std::cout << "\n";
    return true;
  });
  if (stopped) return 1;
  std::cout << "replayed " << replayed << " calls natively";
  if (opt.check) std::cout << ": " << matched << " matched the captured results";
  if (refused) std::cout << "; " << refused << " functions refused a call (no record matched) and were skipped from there";
  std::cout << "\n";
  return mismatches || refused ? 1 : 0;
}

size_t chooseFunction(Session& session, const Options& opt) {
  if (!opt.function.empty()) return session.findFunction(opt.function);
  const auto& fns = session.file().functions;
  if (fns.size() == 1) return 0;
  std::string names;
  for (auto& fn : fns) names += "\n  " + fn.name;
  throw magpy::Error(opt.record + " has " + std::to_string(fns.size()) + " compiled functions; choose one with --function:" + names);
}

// --inputs: a tuple is the positional arguments, a dict the keyword
// arguments, anything else the single argument.
void splitInputs(const Value& v, std::vector<Value>& args, Value& kwargs) {
  if (v.kind == Value::Kind::Tuple) args = v.heap->items;
  else if (v.kind == Value::Kind::Dict) kwargs = v;
  else args = {v};
}

// --state, --eval: the compiled module's weights and flags for serving.
void prepareState(Session& session, size_t f, const Options& opt) {
  if (!opt.state.empty()) {
    auto report = magpy::replay::loadStateInto(session.self(f), magpy::replay::loadStateDict(opt.state), opt.statePartial);
    std::cout << "state  " << report.loaded << " tensors from " << opt.state;
    if (!report.ignored.empty()) std::cout << "; " << report.ignored.size() << " keys the record does not hold ignored";
    if (!report.kept.empty()) std::cout << "; " << report.kept.size() << " parameters the file lacks kept as captured";
    std::cout << "\n";
  }
  if (opt.eval) std::cout << "eval   training set to False on " << magpy::replay::setEvalMode(session.self(f)) << " modules\n";
}

int runInputs(Session& session, const Options& opt) {
  size_t f = chooseFunction(session, opt);
  prepareState(session, f, opt);
  std::vector<Value> args;
  Value kwargs = Value::dict({}, {});
  splitInputs(magpy::replay::loadValueFile(opt.inputs), args, kwargs);
  std::cout << "call  " << session.file().functions[f].name << "  inputs from " << opt.inputs << "  ";
  magpy::replay::CallOutcome out;
  try {
    out = session.call(f, args, kwargs);
  } catch (const magpy::replay::NoMatchingRecord& e) {
    std::cout << "no record matches\n";
    printMisses(e.misses(), SIZE_MAX);
    return 1;
  }
  std::cout << "record " << out.record << "  result: " << magpy::replay::describe(out.result) << "\n";
  if (!opt.output.empty()) {
    magpy::replay::saveValueFile(opt.output, out.result);
    std::cout << "wrote the result to " << opt.output << "\n";
  }
  return 0;
}

void time(Session& session, const Options& opt) {
  const auto& file = session.file();
  for (size_t f = 0; f < file.functions.size(); ++f) {
    std::vector<Value> args;
    Value kwargs = Value::dict({}, {});
    if (!opt.inputs.empty()) {
      if (f != chooseFunction(session, opt)) continue;
      splitInputs(magpy::replay::loadValueFile(opt.inputs), args, kwargs);
    } else {
      auto it = std::find_if(file.calls.begin(), file.calls.end(), [&](auto& c) { return c.function == f; });
      if (it == file.calls.end()) continue;
      size_t call = size_t(it - file.calls.begin());
      args = session.loggedArgs(call);
      kwargs = session.loggedKwargs(call);
    }
    std::vector<double> us;
    magpy::replay::SessionTiming before = session.timing();
    std::optional<magpy::replay::OperatorProfile> profile;
    if (opt.profile) profile.emplace();
    magpy::replay::CallOutcome last;
    for (int k = 0; k < opt.repeat; ++k) {
      auto t0 = std::chrono::steady_clock::now();
      last = session.call(f, args, kwargs);
      us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    if (profile) {
      double total = 0;
      for (double u : us) total += u * 1e-6;
      std::cout << "profile " << file.functions[f].name << " record " << last.record << " ("
                << (last.compiled ? "compiled" : "aten") << " backend), " << opt.repeat << " calls:\n"
                << profile->report(size_t(opt.repeat), total);
    }
    std::sort(us.begin(), us.end());
    const auto& after = session.timing();
    double n = double(after.calls - before.calls);
    std::cout << "timing " << file.functions[f].name << ": median " << std::fixed << std::setprecision(1)
              << us[us.size() / 2] << " us per call over " << opt.repeat << " calls (min " << us.front()
              << " us; guards " << std::setprecision(2) << (after.guards - before.guards) * 1e6 / n << " us, graph "
              << std::setprecision(1) << (after.graph - before.graph) * 1e6 / n << " us, mock " << std::setprecision(2)
              << (after.mock - before.mock) * 1e6 / n << " us on average)\n"
              << std::defaultfloat;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Large temporaries (im2col buffers) otherwise go back to the kernel on
  // every call; keeping them in the heap roughly doubles conv speed.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);

  CLI::App app{"Replay a magpy record natively, without Python", "magpy-run"};
  Options opt;
  bool noCheck = false;
  app.add_option("record", opt.record, "The .mgp file written by magpy-capture")->required();
  app.add_option("--inputs", opt.inputs,
                 "Call with inputs from a torch.save file instead of the logged calls: a tuple is the positional "
                 "arguments, a dict the keyword arguments, anything else the one argument");
  app.add_option("--function", opt.function, "The compiled function to call with --inputs (name or unique suffix)");
  app.add_option("--output", opt.output, "With --inputs: save the result with the torch.save format");
  app.add_option("--state", opt.state,
                 "With --inputs: load weights from a torch.save'd state dict (model.state_dict()) into the compiled "
                 "module first; every key must match the record's state in name, dtype and shape");
  app.add_flag("--state-partial", opt.statePartial,
               "With --state: ignore keys the record does not hold and keep captured parameters the file lacks");
  app.add_flag("--eval", opt.eval, "With --inputs: set every module's training flag to False first, as model.eval()");
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
  app.add_flag("--keep-going", opt.keepGoing,
               "When a logged call matches no record, go on with the other functions' calls (exit status 1 at the end)");
  app.add_flag("--explain", opt.explain, "When no record accepts a call, print each record's failing guard");
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

  return magpy::runReportingErrors("magpy-run", [&] {
    if (opt.threads > 0) at::set_num_threads(opt.threads);
    magpy::replay::SessionOptions sessionOptions;
    sessionOptions.passes = magpy::replay::PassOptions::parse(opt.optimize);
    sessionOptions.device = opt.device;
    sessionOptions.cudaGraphs = !opt.noCudaGraphs;
    sessionOptions.trustRecord = opt.trustRecord;
    sessionOptions.backend = magpy::replay::parseBackend(opt.backend);
    sessionOptions.memoryBudget = magpy::parseByteSize(opt.memoryBudget);
    auto loadStart = std::chrono::steady_clock::now();
    Session session = Session::open(opt.record, sessionOptions);
    double loadMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - loadStart).count();
    const auto& env = session.file().env;
    if (std::string concern = magpy::replay::torchVersionConcern(env.torch_version); !concern.empty()) {
      if (opt.strictEnv) throw magpy::Error(opt.record + ": " + concern + " (--strict-env)");
      std::cerr << "magpy-run: warning: " << concern << "\n";
    }
    std::cout << "magpy-run: " << opt.record << " (captured by magpy " << env.magpy_version << ", python "
              << env.python_version << ", torch " << env.torch_version << "; replaying on libtorch "
              << magpy::replay::libtorchVersion() << " with " << at::get_num_threads() << " threads, no Python)\n";
    if (opt.repeat > 0) std::cout << "loaded in " << std::fixed << std::setprecision(1) << loadMs << " ms\n" << std::defaultfloat;
    if (!opt.output.empty() && opt.inputs.empty()) throw magpy::Error("--output needs --inputs");
    if (opt.profile && opt.repeat == 0) throw magpy::Error("--profile needs --repeat N (the calls it profiles)");
    if ((!opt.state.empty() || opt.eval) && opt.inputs.empty())
      throw magpy::Error("--state and --eval need --inputs (the logged calls ran with the captured weights and flags)");
    int status = opt.inputs.empty() ? replayLog(session, opt) : runInputs(session, opt);
    if (status == 0 && opt.repeat > 0) {
      time(session, opt);
      rusage usage{};
      getrusage(RUSAGE_SELF, &usage);
      std::cout << "peak memory " << usage.ru_maxrss / 1024 << " MB\n";
    }
    if (opt.showOptimizations) {  // after the calls: backends are chosen on a record's first call
      const auto& fns = session.file().functions;
      for (size_t f = 0; f < fns.size(); ++f)
        for (size_t r = 0; r < fns[f].records.size(); ++r) {
          std::cout << fns[f].name << " record " << r << ":";
          for (auto& line : session.optimizations(f, r)) std::cout << " " << line << ";";
          std::cout << "\n";
        }
    }
    return status;
  });
}

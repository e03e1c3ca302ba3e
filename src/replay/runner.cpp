#include "magpy/replay/runner.h"

#include <sys/resource.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <optional>

#include "magpy/record/text.h"
#include "magpy/replay/distributed.h"
#include "magpy/replay/profile.h"
#include "magpy/replay/session.h"
#include "magpy/replay/state_dict.h"
#include "magpy/replay/tensors.h"
#include "magpy/replay/value_files.h"
#include "magpy/support/hash.h"
#include "magpy/support/strings.h"

namespace magpy::replay {
namespace {

// Each record's first failing guard, for the first `limit` records.
void printMisses(const std::vector<GuardMiss>& misses, size_t limit) {
  if (misses.empty()) std::cout << "  the function has no records: the capture never completed a call of it\n";
  for (size_t r = 0; r < misses.size() && r < limit; ++r) std::cout << "  record " << r << ": " << misses[r].text() << "\n";
  if (misses.size() > limit) std::cout << "  (run with --explain to see every record's)\n";
}

// A compiled graph's results are checked within its tolerance, unless given one.
Tolerance resultTolerance(Tolerance tol, bool compiled) {
  if (compiled) {
    tol.rtol = tol.rtol.value_or(*Tolerance::compiled().rtol);
    tol.atol = tol.atol.value_or(*Tolerance::compiled().atol);
  }
  return tol;
}

int replayLog(Session& session, const RunOptions& opt) {
  const auto& file = session.file();
  if (file.calls.empty())
    throw Error(opt.record + " has no logged calls to replay; capture with a script that calls its compiled functions");
  size_t replayed = 0, matched = 0, mismatches = 0, refused = 0;
  bool stopped = false;
  session.replayLog([&](const LoggedStep& step) {
    const auto& logged = file.calls[step.call];
    std::cout << "call " << step.call << "  " << file.functions[logged.function].name << "  ";
    if (!logged.updates.empty())
      std::cout << "(" << logged.updates.size() << " state changes made by the script applied first) ";
    if (step.kind != LoggedStep::Kind::Replayed) {
      ++refused;
      if (step.kind == LoggedStep::Kind::NoRecord) {
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
      auto cmp = compare(step.outcome.result, session.loggedResult(step.call),
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
  if (refused) std::cout << "; " << refused << " functions refused a call (no record matched, or its record needs Python) and were skipped from there";
  std::cout << "\n";
  return mismatches || refused ? 1 : 0;
}

size_t chooseFunction(Session& session, const RunOptions& opt) {
  if (!opt.function.empty()) return session.findFunction(opt.function);
  const auto& fns = session.file().functions;
  if (fns.size() == 1) return 0;
  std::string names;
  for (auto& fn : fns) names += "\n  " + fn.name;
  throw Error(opt.record + " has " + std::to_string(fns.size()) + " compiled functions; choose one with --function:" + names);
}

// --inputs: a tuple is the positional arguments, a dict the keyword
// arguments, anything else the single argument.
void splitInputs(const Value& v, std::vector<Value>& args, Value& kwargs) {
  if (v.kind == Value::Kind::Tuple) args = v.heap->items;
  else if (v.kind == Value::Kind::Dict) kwargs = v;
  else args = {v};
}

// --state, --eval: the compiled module's weights and flags for serving.
void prepareState(Session& session, size_t f, const RunOptions& opt) {
  if (!opt.state.empty()) {
    auto report = loadStateInto(session.self(f), loadStateDict(opt.state), opt.statePartial);
    std::cout << "state  " << report.loaded << " tensors from " << opt.state;
    if (!report.ignored.empty()) std::cout << "; " << report.ignored.size() << " keys the record does not hold ignored";
    if (!report.kept.empty()) std::cout << "; " << report.kept.size() << " parameters the file lacks kept as captured";
    std::cout << "\n";
  }
  if (opt.eval) std::cout << "eval   training set to False on " << setEvalMode(session.self(f)) << " modules\n";
  session.setScriptGradMode(opt.gradEnabled);
}

int runInputs(Session& session, const RunOptions& opt) {
  size_t f = chooseFunction(session, opt);
  prepareState(session, f, opt);
  std::vector<Value> args;
  Value kwargs = Value::dict({}, {});
  splitInputs(loadValueFile(opt.inputs), args, kwargs);
  std::cout << "call  " << session.file().functions[f].name << "  inputs from " << opt.inputs << "  ";
  CallOutcome out;
  try {
    out = session.call(f, args, kwargs);
  } catch (const NoMatchingRecord& e) {
    std::cout << "no record matches\n";
    printMisses(e.misses(), SIZE_MAX);
    return 1;
  }
  std::cout << "record " << out.record << "  result: " << describe(out.result) << "\n";
  if (!opt.output.empty()) {
    saveValueFile(opt.output, out.result);
    std::cout << "wrote the result to " << opt.output << "\n";
  }
  return 0;
}

// A one-element tensor's value (a loss), else what the value is.
std::string resultText(const Value& v) {
  std::string text = describe(v);
  if (v.kind == Value::Kind::Tensor && v.tensor.numel() == 1 && v.tensor.is_cpu() &&
      at::isFloatingType(v.tensor.scalar_type()))
    text += " = " + formatDouble(v.tensor.item<double>());
  return text;
}

// --batches: the function on each element of a torch.save'd list in turn,
// as a training loop calls its step: grad mode on, and each call's writes
// to the state (weights, optimizer buffers) are the next call's state.
int runBatches(Session& session, const RunOptions& opt) {
  size_t f = chooseFunction(session, opt);
  prepareState(session, f, opt);
  session.setScriptGradMode(true);
  Value batches = loadValueFile(opt.batches);
  if (batches.kind != Value::Kind::List && batches.kind != Value::Kind::Tuple)
    throw Error(opt.batches + ": its object is a " + describe(batches) + ", not a list of batches (each a tuple of "
                "arguments, a dict of keyword arguments, or the one argument)");
  const auto& items = batches.heap->items;
  std::cout << "train " << session.file().functions[f].name << " on " << items.size() << " batches from " << opt.batches
            << " (grad mode on)\n";
  auto start = std::chrono::steady_clock::now();
  for (size_t k = 0; k < items.size(); ++k) {
    std::vector<Value> args;
    Value kwargs = Value::dict({}, {});
    splitInputs(items[k], args, kwargs);
    std::cout << "batch " << k << "  ";
    try {
      CallOutcome out = session.call(f, args, kwargs);
      std::cout << "record " << out.record << "  result: " << resultText(out.result) << "\n";
    } catch (const NoMatchingRecord& e) {
      std::cout << "no record matches\n";
      printMisses(e.misses(), SIZE_MAX);
      return 1;
    }
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "trained on " << items.size() << " batches in " << std::fixed << std::setprecision(4) << seconds << " s\n"
            << std::defaultfloat;
  return 0;
}

// --save-state: the trained module's state dict, as torch.load gives it
// to model.load_state_dict: the function's self where it is a module,
// else the one module among the globals of the function's module.
void saveState(Session& session, const RunOptions& opt) {
  size_t f = chooseFunction(session, opt);
  Value* module = isModule(session.self(f)) ? &session.self(f) : nullptr;
  if (!module) {
    const std::string& home = session.file().functions[f].module;
    Value& globals = session.globals().of(home);
    std::string found;
    for (size_t k = 0; globals.kind == Value::Kind::Dict && k < globals.heap->items.size(); ++k) {
      if (!isModule(globals.heap->items[k])) continue;
      if (module) throw Error("--save-state: " + session.file().functions[f].name + " reads more than one module (" +
                              found + ", " + record::toString(globals.heap->keys[k]) + "); compile the module's step as "
                              "a method of one module, or save its weights in Python");
      module = &globals.heap->items[k];
      found = record::toString(globals.heap->keys[k]);
    }
    if (!module) throw Error("--save-state: " + session.file().functions[f].name + " reads no module's state");
  }
  StateDict dict = stateDictOf(*module);
  saveStateDict(opt.saveState, dict);
  std::cout << "wrote " << dict.entries.size() << " tensors of the trained state to " << opt.saveState << "\n";
}

void time(Session& session, const RunOptions& opt) {
  const auto& file = session.file();
  for (size_t f = 0; f < file.functions.size(); ++f) {
    std::vector<Value> args;
    Value kwargs = Value::dict({}, {});
    if (!opt.inputs.empty()) {
      if (f != chooseFunction(session, opt)) continue;
      splitInputs(loadValueFile(opt.inputs), args, kwargs);
    } else {
      auto it = std::find_if(file.calls.begin(), file.calls.end(), [&](auto& c) { return c.function == f; });
      if (it == file.calls.end()) continue;
      size_t call = size_t(it - file.calls.begin());
      args = session.loggedArgs(call);
      kwargs = session.loggedKwargs(call);
    }
    std::vector<double> us;
    SessionTiming before = session.timing();
    std::optional<OperatorProfile> profile;
    if (opt.profile) profile.emplace();
    CallOutcome last;
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

// After the calls: backends are chosen on a record's first call.
void showOptimizations(const Session& session) {
  const auto& fns = session.file().functions;
  for (size_t f = 0; f < fns.size(); ++f)
    for (size_t r = 0; r < fns[f].records.size(); ++r) {
      std::cout << fns[f].name << " record " << r << ":";
      for (auto& line : session.optimizations(f, r)) std::cout << " " << line << ";";
      std::cout << "\n";
    }
}

// A rank's own files ("{rank}" in a name) and its share of the output:
// rank 0 saves the state that every rank holds alike.
RunOptions forThisRank(const RunOptions& given, const std::optional<RankEnvironment>& env) {
  RunOptions opt = given;
  if (!env) return opt;
  for (std::string* name : {&opt.record, &opt.inputs, &opt.batches, &opt.output, &opt.state})
    *name = forRank(*name, env->rank);
  if (env->rank != 0 && opt.saveState.find("{rank}") == std::string::npos) opt.saveState.clear();
  opt.saveState = forRank(opt.saveState, env->rank);
  return opt;
}

bool hasCollectives(const record::RecordFile& file) {
  for (const auto& fn : file.functions)
    for (const auto& rec : fn.records)
      if (record::hasCollectives(rec.graph)) return true;
  return false;
}

// The ranks replay the same records: their guards, graphs and mocks.
std::string recordDigest(const record::RecordFile& file) {
  record::ViewOptions view;
  view.sections = {record::Section::Guards, record::Section::Graph, record::Section::Mock};
  std::string text = record::printView(file, view);
  return hexDigest(hashBytes(text.data(), text.size()));
}

void formGroupFor(const Session& session, const std::optional<RankEnvironment>& env, const RunOptions& opt) {
  if (!hasCollectives(session.file())) return;
  if (!env)
    throw Error(opt.record + " runs collectives (torch.distributed): start magpy-run once per rank with torchrun's "
                "environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), or with --nproc-per-node N");
  if (opt.distTimeout <= 0) throw Error("--dist-timeout takes a positive number of seconds");
  auto timeout = std::chrono::milliseconds(int64_t(opt.distTimeout * 1000));
  formGroup(*env, recordDigest(session.file()), timeout);
  std::cout << "rank " << env->rank << " of " << env->worldSize << ": process group formed (gloo, " << env->masterAddr
            << ":" << env->masterPort << ")\n";
}

}  // namespace

int runRecord(const RunOptions& given) {
  std::optional<RankEnvironment> rank = rankEnvironment();
  RunOptions opt = forThisRank(given, rank);
  if (!opt.output.empty() && opt.inputs.empty()) throw Error("--output needs --inputs");
  if (opt.profile && opt.repeat == 0) throw Error("--profile needs --repeat N (the calls it profiles)");
  if (!opt.inputs.empty() && !opt.batches.empty()) throw Error("--inputs and --batches do not go together");
  bool ownCalls = !opt.inputs.empty() || !opt.batches.empty();
  if ((!opt.state.empty() || opt.eval || opt.gradEnabled || !opt.saveState.empty()) && !ownCalls)
    throw Error("--state, --eval, --grad-enabled and --save-state need --inputs or --batches (the logged calls ran "
                "with the captured weights, flags and grad mode)");
  if (opt.threads > 0) at::set_num_threads(opt.threads);
  SessionOptions sessionOptions;
  sessionOptions.passes = PassOptions::parse(opt.optimize);
  sessionOptions.device = opt.device;
  sessionOptions.cudaGraphs = !opt.noCudaGraphs;
  sessionOptions.trustRecord = opt.trustRecord;
  sessionOptions.backend = parseBackend(opt.backend);
  sessionOptions.memoryBudget = parseByteSize(opt.memoryBudget);
  if (opt.timeBudget < 0) throw Error("--time-budget takes a number of seconds (0: none)");
  sessionOptions.timeBudget = opt.timeBudget;
  auto loadStart = std::chrono::steady_clock::now();
  Session session = Session::open(opt.record, sessionOptions);
  double loadMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - loadStart).count();
  const auto& env = session.file().env;
  if (std::string concern = torchVersionConcern(env.torch_version); !concern.empty()) {
    if (opt.strictEnv) throw Error(opt.record + ": " + concern + " (--strict-env)");
    std::cerr << "magpy-run: warning: " << concern << "\n";
  }
  std::cout << "magpy-run: " << opt.record << " (captured by magpy " << env.magpy_version << ", python "
            << env.python_version << ", torch " << env.torch_version << "; replaying on libtorch " << libtorchVersion()
            << " with " << at::get_num_threads() << " threads, no Python)\n";
  if (opt.repeat > 0) std::cout << "loaded in " << std::fixed << std::setprecision(1) << loadMs << " ms\n" << std::defaultfloat;
  formGroupFor(session, rank, opt);
  int status = !opt.batches.empty() ? runBatches(session, opt)
               : !opt.inputs.empty() ? runInputs(session, opt)
                                     : replayLog(session, opt);
  if (status == 0 && !opt.saveState.empty()) saveState(session, opt);
  if (status == 0 && opt.repeat > 0) {
    time(session, opt);
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    std::cout << "peak memory " << usage.ru_maxrss / 1024 << " MB\n";
  }
  if (opt.showOptimizations) showOptimizations(session);
  return status;
}
}  // namespace magpy::replay

// The replay API: load a record file, call its compiled functions natively.
//
//   magpy::replay::Session s = magpy::replay::Session::open("mlp.mgp");
//   size_t fn = s.findFunction("__main__.MLP");
//   auto out = s.call(fn, {magpy::replay::Value::ofTensor(x)});
//   at::Tensor y = out.result.tensor;
//
// A call runs the first record whose guards hold against the arguments and
// the session's state, then applies that record's mock to the state, so a
// later call sees what earlier calls wrote. When no record's guards hold,
// call() throws NoMatchingRecord with each record's first failing guard.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "magpy/record/record.h"
#include "magpy/replay/guards.h"
#include "magpy/replay/passes.h"
#include "magpy/replay/state.h"
#include "magpy/replay/value.h"
#include "magpy/support/error.h"

namespace magpy::replay {

class NoMatchingRecord : public Error {
 public:
  NoMatchingRecord(const std::string& function, std::vector<GuardMiss> misses);
  const std::vector<GuardMiss>& misses() const { return misses_; }

 private:
  std::vector<GuardMiss> misses_;
};

struct CallOutcome {
  Value result;
  size_t record = 0;  // which record ran
  bool compiled = false;  // its graph ran on the compiled backend
};

struct SessionOptions {
  PassOptions passes;          // graph optimizations, all on by default
  std::string device = "cpu";  // where state, inputs and operators live: "cpu", "cuda", "cuda:1"
  bool cudaGraphs = true;      // on CUDA: replay static records as CUDA graphs
  bool trustRecord = false;    // allow operators outside the operator policy (record/op_policy.h)
  Backend backend = Backend::Aten;  // on CPU: how graphs run (plan.h)
  // CPU tensor memory one call may allocate beyond what was live before it
  // (0: no limit); a call that needs more fails with an Error.
  uint64_t memoryBudget = kDefaultMemoryBudget;
  static constexpr uint64_t kDefaultMemoryBudget = uint64_t(2) << 30;
  // Seconds one call's graph may run (0: no limit), checked between
  // operators; the aten backend only.
  double timeBudget = 0;

  // For records from a source you do not trust: the operator policy, the
  // memory budget and a time budget, operator by operator.
  static SessionOptions untrusted() {
    SessionOptions o;
    o.timeBudget = 60;
    return o;
  }
};

// Where replay's time went, summed over calls (seconds).
struct SessionTiming : PhaseTimes {
  size_t calls = 0;
};

// One logged call as Session::replayLog replayed it.
struct LoggedStep {
  size_t call = 0;
  enum class Kind {
    Replayed,     // `outcome` holds what ran
    NoRecord,     // no record's guards held: `misses`
    NeedsPython,  // a record ran, but capture ran this call with a record
                  // native replay cannot run as capture did (graph breaks,
                  // made for classes or code the script changed later, or
                  // read grad mode on): `why`
  } kind = Kind::Replayed;
  CallOutcome outcome;
  std::vector<GuardMiss> misses;
  std::string why;
};

class Session {
 public:
  explicit Session(record::RecordFile file, const SessionOptions& options = {});
  ~Session();
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;

  static Session open(const std::string& path, const SessionOptions& options = {});

  // The file the session was opened from, less the contents of tensors
  // only its entry state held (those now live in self() and globals()).
  const record::RecordFile& file() const;
  // Index of the function with this name (or a unique suffix of it, such as
  // "MLP"); throws Error listing the names otherwise.
  size_t findFunction(const std::string& name) const;

  CallOutcome call(size_t function, std::vector<Value> args, Value kwargs = Value::dict({}, {}));

  // The first failing guard of every record for these arguments; empty
  // entries (no miss) for records that would run. Runs nothing.
  std::vector<std::optional<GuardMiss>> explain(size_t function, const std::vector<Value>& args,
                                                const Value& kwargs = Value::dict({}, {}));

  const SessionTiming& timing() const;

  // What the graph optimizations did to a record's graph.
  const std::vector<std::string>& optimizations(size_t function, size_t record) const;

  // The state a function reads and its mocks write.
  Value& self(size_t function);
  Globals& globals();

  // The grad mode calls stand for (off until set, or until a logged
  // update sets the script's): records whose code decided on grad mode
  // serve only calls made in that mode. Replay itself computes without
  // autograd either way.
  void setScriptGradMode(bool on);

  // Applies the state changes the script made before a logged call, and
  // sets the random generator to the state the call started with. With
  // sharedOnly, only changes of state other functions see too (module
  // globals, interpreter state): for a call that is skipped.
  void applyLoggedUpdates(size_t call, bool sharedOnly = false);

  // Replays logged calls [0, end) in order, each after the state changes
  // the script made before it. A function a call is refused for (NoRecord,
  // NeedsPython) stops: its mock did not run, so its later calls would
  // start from state Python never had; they are skipped, with only the
  // changes other functions see applied. `visit` sees every call replayed
  // or refused and returns whether to go on. Returns the functions that
  // stopped. Errors name the logged call.
  std::vector<bool> replayLog(const std::function<bool(const LoggedStep&)>& visit, size_t end = SIZE_MAX);

  // A logged call's inputs and expected result, as runtime values.
  std::vector<Value> loggedArgs(size_t call) const;
  Value loggedKwargs(size_t call) const;
  Value loggedResult(size_t call) const;

 private:
  Value materializeLogged(const record::Value& v, const char* what) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace magpy::replay

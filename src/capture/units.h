// The JIT's units: each function given to magpy.compile, and each segment
// (a Python function called by one running as Python past a graph break),
// with the records it has in use. Dispatch (jit.cpp), the call log
// (call_log.*) and segments (segments.*) all work on them.
#pragma once

#include <Python.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "capture/live.h"
#include "capture/monitor/monitor.h"
#include "capture/specialize.h"
#include "magpy/record/record.h"
#include "magpy/replay/plan.h"

namespace magpy::capture {

// A record in use: its guards on live objects, and its graph's plan (none
// for a record with graph breaks, which runs as Python).
struct Entry {
  record::Record record;
  std::unique_ptr<LiveRecord> live;  // its inputs are the graph's input paths, in graph order
  // A record with a graph gets its plan when it first serves a call, so a
  // record that never does (a shape seen once, a record a dynamic one
  // replaces) never pays for one. The plan's inputs, picked from the
  // record's by index; none where they are the record's, in order.
  bool hasGraph = false;
  std::vector<record::AccessPath> inputPaths;
  std::unique_ptr<replay::Plan> plan;
  std::optional<std::vector<size_t>> planInputs;
  std::map<size_t, PathTrie> args;        // what the record reads below each argument
  std::map<std::string, PathTrie> kwargs;
  bool readSizes = false;                 // its run's Python code read tensor sizes: they stay fixed
  // What a record made from another's branches needs of it (branches.h):
  // each guard's live object, the classes and code its runs depended on,
  // and whether its runs' Python could tell one side's tensors from the
  // other's (then it joins no other record).
  std::vector<PyRef> expected;
  std::vector<PyRef> classesRead, functionsRun;
  bool pathDependent = false;
  // A record with lifted numbers whose operators computed other sizes for
  // other values: its numbers change sizes, so the JIT no longer tries it.
  bool retired = false;
  // Why native replay must refuse it, once seen (shared_state.h), or "".
  std::string keptApart;
  // Calls autograd records nothing in run on a second plan with libtorch's
  // inference passes and the compiled backend (jit.cpp, compiledPlan):
  // built once the record served Unit::compileAfter of them; its
  // inputs, picked from the record's by index.
  struct Compiled {
    std::unique_ptr<replay::Plan> plan;
    std::vector<size_t> inputs;
    size_t gradFreeCalls = 0;
    std::string refusal;  // why the record has none
    bool explained = false, backendExplained = false;  // --explain says each once
  } compiled;
};

struct Unit {
  std::string name;
  PyRef target;
  CallSpec spec;             // how to call it: self, function, selfIsFirstArg, homeModule
  size_t parent = SIZE_MAX;  // segments: the compiled function they serve
  std::vector<Entry> entries;
  RecordSetPolicy policy;    // dynamic records, lifted numbers, retiring (specialize.h)
  record::Value self;        // the state its records read, as first read
  bool haveSelf = false;
  std::set<record::AccessPath> statePaths;   // self- and module-rooted paths its records read
  std::set<record::AccessPath> absentPaths;  // of those, the ones first read as absent
  // Two of its state tensors seen sharing memory at a logged call ("G['b']
  // shares memory with G['a']"), or "": the record file cannot keep that.
  std::string sharedMemory;
  size_t calls = 0, hits = 0, monitored = 0, eager = 0;
  size_t compiledCalls = 0;  // hits whose graph ran compiled
  replay::Backend backend = replay::Backend::Auto;  // for calls autograd records nothing in
  size_t compileAfter = 2;   // capture::Options::compileAfter
  bool freezeState = false;  // compiled graphs may freeze the state (replay::PlanOptions::freezeState)
  // Where the time goes (seconds, summed over calls): the paper's Figure 16.
  replay::PhaseTimes times;
  double monitorTime = 0, buildTime = 0;
};

// Units given to magpy.compile come first, in the order compiled; segments follow.
using Units = std::vector<std::unique_ptr<Unit>>;

// How to run one call of a unit.
struct Invocation {
  LiveRoots roots;
  std::function<PyObject*()> run;       // as Python, once
  std::function<PyObject*()> runEager;  // as Python, its calls compiled as segments
};

// Above zero while a monitored run is under way on this thread, or magpy
// builds a record (its lookups may run Python): compiled functions and
// segments called then are plain code.
int& monitoringDepth();

struct MonitoringScope {
  MonitoringScope() { ++monitoringDepth(); }
  ~MonitoringScope() { --monitoringDepth(); }
  MonitoringScope(const MonitoringScope&) = delete;
  MonitoringScope& operator=(const MonitoringScope&) = delete;
};

}  // namespace magpy::capture

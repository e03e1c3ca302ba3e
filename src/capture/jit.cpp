#include "capture/jit.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <optional>

#include "capture/branches.h"
#include "capture/call_log.h"
#include "capture/compiled_function.h"
#include "capture/record_builder.h"
#include "capture/segments.h"
#include "capture/shared_state.h"
#include "capture/units.h"
#include "magpy/record/generalize.h"
#include "magpy/record/graph_utils.h"
#include "magpy/replay/dispatch.h"
#include "magpy/replay/passes.h"
#include "magpy/replay/plan.h"
#include "magpy/replay/tensors.h"
#include "magpy/support/error.h"
#include "magpy/support/strings.h"
#include "replay/collectives.h"

namespace magpy::capture {
namespace {

Session* gSession = nullptr;

// magpy.expect_true(%eq) where %eq compares t.item() with the value the
// capture read (Monitor::checkItem): one side only, as a content check.
bool checksItem(const record::Graph& g, const record::Node& check) {
  if (check.args.size() != 1 || check.args[0].kind != record::Arg::Kind::Node) return false;
  const record::Node& eq = g.nodes.at(size_t(check.args[0].i));
  return eq.target == "operator.eq" && !eq.args.empty() && eq.args[0].kind == record::Arg::Kind::Node &&
         record::readsItem(g.nodes.at(size_t(eq.args[0].i)));
}

// Warnings libtorch's kernels give while the JIT runs a record's graph.
// Eager, torch's bindings turn each into a Python UserWarning as the
// operator returns (an error where the filters say so); without this
// handler they went to libtorch's logger on stderr. They are issued after
// the graph: the graph touches no Python object while it runs (and may run
// without the GIL), and a filter could run any Python code.
class GraphWarnings : public c10::WarningHandler {
 public:
  GraphWarnings() : previous_(c10::Warning::get_warning_handler()) { c10::Warning::set_warning_handler(this); }
  ~GraphWarnings() override { c10::Warning::set_warning_handler(previous_); }
  GraphWarnings(const GraphWarnings&) = delete;
  GraphWarnings& operator=(const GraphWarnings&) = delete;

  void process(const c10::SourceLocation& where, const std::string& msg, bool verbatim) override {
    given_.push_back({where, msg, verbatim});
  }

  // Issues them as torch's bindings do, in order; throws where the
  // filters made one an error (its Python exception set).
  void issue() {
    c10::Warning::set_warning_handler(previous_);
    for (const Given& w : given_) {
      int failed = w.verbatim ? PyErr_WarnExplicit(PyExc_UserWarning, w.msg.c_str(), w.where.file,
                                                   int(w.where.line), nullptr, nullptr)
                              : PyErr_WarnEx(PyExc_UserWarning, withOrigin(w).c_str(), 1);
      if (failed) throw Error("a warning of the graph is an error under the warning filters");
    }
  }

 private:
  struct Given {
    c10::SourceLocation where;
    std::string msg;
    bool verbatim;
  };
  static std::string withOrigin(const Given& w) {
    return w.msg + " (Triggered internally at  " + w.where.file + ":" + std::to_string(w.where.line) + ".)";
  }
  c10::WarningHandler* previous_;
  std::vector<Given> given_;
};

}  // namespace

int& monitoringDepth() {
  thread_local int depth = 0;
  return depth;
}

struct Session::Impl {
  Options options;
  record::AnnotationSet annotations;
  Units units;
  size_t compiled = 0;  // units[0, compiled) were given to magpy.compile, in order
  std::map<std::string, record::Value> globals;
  BlobPool blobs;
  CallLog log{blobs};
  // The call log's budget (Options::logBudget): its bytes so far, those of
  // its state changes, and why it ended early (for the summary).
  uint64_t logBytes = 0, logChangeBytes = 0;
  std::optional<uint64_t> logBudget;  // none: auto
  std::string logEnd;

  // Whether a call whose state changes take `changes` bytes (just added
  // to the pool) may join the log.
  bool logTakes(uint64_t changes) {
    constexpr uint64_t kLeast = uint64_t(16) << 20;
    uint64_t state = blobs.bytes() - changes - logBytes;  // what the records read
    uint64_t budget = logBudget ? *logBudget : std::max(kLeast, state / 2);
    if (budget == 0 || logChangeBytes + changes <= budget) return true;
    size_t calls = log.calls.size();
    logEnd = "the call log ends after " + std::to_string(calls) + (calls == 1 ? " call" : " calls") +
             ": the next one's state changes (" + formatByteSize(changes) + ") would take the log's past its budget of " +
             formatByteSize(budget) + " (--log-budget)";
    return false;
  }
  Segments segments{units, annotations, [this](size_t unit, Invocation& inv) { return callUnit(unit, inv, nullptr); }};

  // ---- the state records read, as first read ----

  // The state a new record read, as it was when the run began; what an
  // earlier record already read stays as it was then (first read wins).
  // A path first read as absent stays absent in the initial state, even
  // when a later record finds it present (the script added it: an update).
  // Takes the record's entry state (nothing else reads it).
  void noteState(Unit& fn, BuiltRecord& built) {
    record::Value self = std::move(built.selfEntry);
    std::map<std::string, record::Value> moduleGlobals = std::move(built.globalsEntry);
    for (auto& path : fn.absentPaths) {
      if (path.root == record::AccessPath::Root::Self) {
        removeFromSnapshot(self, path.steps);
      } else if (path.root == record::AccessPath::Root::Global) {
        auto it = moduleGlobals.find(path.name.empty() ? fn.spec.homeModule : path.name);
        if (it != moduleGlobals.end()) removeFromSnapshot(it->second, path.steps);
      }
    }
    if (!fn.haveSelf) {
      fn.self = std::move(self);
      fn.haveSelf = true;
    } else {
      mergeSnapshot(fn.self, self);
    }
    for (auto& [module, value] : moduleGlobals) {
      auto it = globals.find(module);
      if (it == globals.end()) globals.emplace(module, std::move(value));
      else mergeGlobals(it->second, value);
    }
  }

  // `self` as it is now, along the paths the first-read state holds and
  // those the records read (not those they need absent: a class's method
  // is not an instance attribute).
  record::Value selfNow(const Unit& fn) {
    PathTrie wanted;
    if (fn.haveSelf) wanted.insertTree(fn.self);
    for (auto& path : fn.statePaths) {
      record::AccessPath p = record::withInstanceAttributes(path);
      if (p.root == record::AccessPath::Root::Self && !fn.absentPaths.count(p)) wanted.insert(p.steps);
    }
    return snapshot(fn.spec.self, wanted, blobs);
  }

  // ---- plans ----

  // Where each of the plan's inputs is among the record's.
  static std::vector<size_t> inputIndices(const Entry& e, const replay::Plan& plan) {
    std::vector<size_t> out;
    for (const record::AccessPath& p : plan.inputPaths()) {
      auto it = std::find(e.inputPaths.begin(), e.inputPaths.end(), p);
      if (it == e.inputPaths.end())
        throw Error("its optimized graph reads " + record::toString(p) + ", which the record's does not");
      out.push_back(size_t(it - e.inputPaths.begin()));
    }
    return out;
  }

  // The plan of record r, made at its first hit. The JIT runs with
  // autograd (training works through it): only the optimizations that keep
  // autograd's view of the graph apply.
  const replay::Plan& planOf(Unit& fn, size_t r) {
    Entry& e = fn.entries[r];
    if (e.plan) return *e.plan;
    try {
      replay::PlanOptions planOptions;
      planOptions.passes.deadCode = planOptions.passes.commonSubexpr = true;
      planOptions.trustRecord = true;  // the script's own operators: the policy is for records from others
      auto plan = std::make_unique<replay::Plan>(e.record.graph, blobs.blobs(), planOptions);
      std::vector<size_t> picked = inputIndices(e, *plan);
      bool same = picked.size() == e.inputPaths.size();
      for (size_t i = 0; same && i < picked.size(); ++i) same = picked[i] == i;
      if (!same) e.planInputs = std::move(picked);
      e.plan = std::move(plan);
    } catch (const Error& ex) {
      PyErr_Format(PyExc_RuntimeError, "magpy: cannot use the record captured for %s: %s", fn.name.c_str(), ex.what());
      throw;
    }
    return *e.plan;
  }

  // The graph's inputs that its state and arguments supply (not its
  // constants), in graph order: what a record's guards resolve for its plans.
  static std::vector<record::AccessPath> graphInputPaths(const record::Graph& g) {
    std::vector<record::AccessPath> out;
    for (const record::Node& n : g.nodes)
      if (n.isInput() && n.blob < 0) out.push_back(n.source);
    return out;
  }

  // ---- compiled graphs (replay/compiled_graph.h) ----

  // A record's plan for this call if the call runs compiled: autograd must
  // record nothing in it (grad mode off, no region turning it on, no
  // backward), so libtorch's inference passes keep what the program sees;
  // and the record must have served Unit::compileAfter such calls, so a
  // record of a shape seen once never pays the first compiled call's trial
  // (the steps, then each set of passes, checked to agree: plan.cpp).
  const replay::Plan* compiledPlan(Unit& fn, size_t r) {
    Entry& e = fn.entries[r];
    Entry::Compiled& c = e.compiled;
    if (fn.backend == replay::Backend::Aten || e.plan->differentiates()) return nullptr;
    if (c10::GradMode::is_enabled()) {
      if (!c.explained) explain(fn, "record " + std::to_string(r) + ": a call with grad mode on runs operator by operator, "
                                    "as autograd records each operator");
      c.explained = true;
      return nullptr;
    }
    if (!c.refusal.empty() || ++c.gradFreeCalls <= fn.compileAfter) return nullptr;
    if (!c.plan) buildCompiledPlan(fn, r);
    return c.plan.get();
  }

  void buildCompiledPlan(Unit& fn, size_t r) {
    Entry& e = fn.entries[r];
    Entry::Compiled& c = e.compiled;
    const record::Graph& g = e.record.graph;
    if (std::any_of(g.nodes.begin(), g.nodes.end(), [](const record::Node& n) { return n.grad == record::GradMode::On; }))
      c.refusal = "it turns grad mode on inside, where autograd records its operators";
    try {
      replay::PlanOptions options;
      options.passes = replay::PassOptions();  // the default set: dce, cse, fold, dropout
      options.inference = true;
      options.trustRecord = true;
      options.backend = fn.backend;
      options.freezeState = fn.freezeState;
      if (c.refusal.empty()) c.plan = std::make_unique<replay::Plan>(g, blobs.blobs(), options);
    } catch (const Error& ex) {
      c.refusal = ex.what();
    }
    if (c.plan) {
      try {
        c.inputs = inputIndices(e, *c.plan);
      } catch (const Error& ex) {
        c.refusal = ex.what();
        c.plan.reset();
      }
    }
    if (!c.refusal.empty())
      explain(fn, "record " + std::to_string(r) + " runs operator by operator, not compiled: " + c.refusal);
  }

  // Once per record, --explain says how its first compiled-backend call
  // decided (plan.h: optimizations()).
  void explainBackend(Unit& fn, size_t r) {
    Entry::Compiled& c = fn.entries[r].compiled;
    if (c.backendExplained || !options.explain) return;
    for (const std::string& line : c.plan->optimizations())
      if (line.rfind("backend:", 0) == 0) {
        explain(fn, "record " + std::to_string(r) + " without autograd: " + line);
        c.backendExplained = true;
      }
  }

  // ---- the record-set policy (specialize.h) ----

  void explain(const Unit& fn, const std::string& note) const {
    if (options.explain) std::cerr << "magpy: " << fn.name << ": " << note << "\n";
  }

  static std::vector<RecordInUse> inUse(const Unit& fn) {
    std::vector<RecordInUse> out;
    for (auto& e : fn.entries)
      out.push_back({&e.record, e.hasGraph, e.retired, e.readSizes, e.live->definitionsChanged().has_value()});
    return out;
  }

  // What the records that missed this call found: numbers of the state
  // that changed are learned to vary.
  void learnVaryingNumbers(Unit& fn, const LiveRoots& roots) {
    for (auto& e : fn.entries) {
      if (!e.hasGraph || e.retired) continue;
      LiveStore store = e.live->store(roots);
      LiveRecord::Values values(store, e.live->tree());
      std::vector<size_t> missed;
      try {
        missed = e.live->misses(values);
      } catch (const std::exception&) {
        continue;
      }
      std::vector<std::optional<record::Atom>> now;
      for (size_t i : missed) {
        const record::Guard& g = e.record.guards[i];
        PyRef v = RecordSetPolicy::isStateNumber(g) ? resolveLive(g.path, roots) : PyRef();
        now.push_back(v ? atomOf(v.get()) : std::nullopt);
      }
      for (auto& note : fn.policy.learnFromMiss(e.record, missed, now)) explain(fn, note);
    }
  }

  void retire(Unit& fn, size_t r) {
    if (auto note = fn.policy.retire(fn.entries[r].record)) {
      fn.entries[r].retired = true;
      explain(fn, "record " + std::to_string(r) + " " + *note);
    }
  }

  // Records that write an object two state trees hold (shared_state.h)
  // are refused natively. Checked after each monitored call, so sharing
  // the script undoes later still counts, and again when the file is made.
  void noteSharedWrites(const SharedState& shared) {
    for (size_t u = 0; u < units.size(); ++u)
      for (Entry& e : units[u]->entries)
        if (e.keptApart.empty()) e.keptApart = shared.refusal(units, u, e.record);
  }

  // Two distinct state tensors of fn that share memory now (self.b =
  // self.a.view(4)), as "self.b shares memory with self.a", or "". A record
  // file keeps each tensor's contents apart, so natively a write through
  // one would not show through the other. Checked at each logged call and
  // at exit: the script may make or undo the sharing between calls.
  std::string sharedStateMemory(size_t index) {
    const Unit& fn = *units[index];
    std::vector<PyRef> values = log.stateValues(units, index);
    std::map<const void*, std::pair<const void*, record::AccessPath>> first;  // storage -> (tensor, path)
    std::string shared;
    size_t k = 0;
    for (auto& path : fn.statePaths) {
      const PyRef& o = values[k++];
      if (!o || !isTensor(o.get())) continue;
      const at::Tensor& t = tensorOf(o.get());
      if (!t.has_storage()) continue;
      auto [it, fresh] = first.emplace(t.storage().unsafeGetStorageImpl(), std::make_pair(t.unsafeGetTensorImpl(), path));
      if (!fresh && it->second.first != t.unsafeGetTensorImpl()) {
        shared = record::toString(path) + " shares memory with " + record::toString(it->second.second);
        break;
      }
    }
    return shared;  // a path that no longer resolves is no sharing
  }

  // ---- progress ----

  // A line on stderr, redrawn at most four times a second, for captures
  // long enough that a terminal user wonders what is happening.
  std::chrono::steady_clock::time_point lastProgress;
  bool progressShown = false;

  void showProgress() {
    auto now = std::chrono::steady_clock::now();
    if (progressShown && now - lastProgress < std::chrono::milliseconds(250)) return;
    lastProgress = now;
    progressShown = true;
    size_t calls = 0, records = 0, broken = 0;
    for (auto& u : units) {
      calls += u->calls;
      records += u->entries.size();
      for (auto& e : u->entries) broken += e.record.breaks.empty() ? 0 : 1;
    }
    std::cerr << "\rmagpy: " << calls << " calls, " << records << " records, " << broken << " with graph breaks"
              << std::flush;
  }

  // ---- calls ----

  struct Records;  // for dispatch.h

  // One call of a unit: the first record whose guards hold runs (its graph
  // and mock, or Python when it has graph breaks); with none, a monitored
  // run adds a record. `logged` receives what replay needs of the call.
  PyObject* callUnit(size_t index, Invocation& inv, record::LoggedCall* logged);

  // A record with branches joins the latest record in use that differs from
  // it only in the sides its branches took (branches.h): the joined record
  // replaces that one, and serves both calls' paths and their combinations.
  // Returns the record it replaces, or SIZE_MAX.
  size_t joinBranches(Unit& fn, const Monitor& monitor, BuiltRecord& built, std::vector<PyRef>& classes,
                      std::vector<PyRef>& functions) {
    if (!record::hasBranches(built.record.graph)) return SIZE_MAX;
    if (!monitor.pathDependent().empty()) {
      explain(fn, "this record joins no other: " + monitor.pathDependent());
      return SIZE_MAX;
    }
    for (size_t r = fn.entries.size(); r-- > 0;) {
      Entry& e = fn.entries[r];
      if (e.retired || !e.hasGraph || e.pathDependent || !record::hasBranches(e.record.graph)) continue;
      Joined j = mergeBranches(e.record, built.record);
      if (!j.record) {
        explain(fn, "record " + std::to_string(r) + " stays apart: " + j.why);
        continue;
      }
      std::vector<PyRef> expected = e.expected;
      for (size_t k = 0; k < j.laterGuards.size(); ++k)
        if (j.laterGuards[k] >= e.expected.size()) expected.push_back(built.expected[k]);
      std::string origin = built.record.origin + "; joined with record " + std::to_string(r) + "'s branches";
      built.record = std::move(*j.record);
      built.record.origin = std::move(origin);
      built.expected = std::move(expected);
      for (auto& [i, trie] : e.args) built.argPaths[i].insertTrie(trie);
      for (auto& [k, trie] : e.kwargs) built.kwargPaths[k].insertTrie(trie);
      auto unite = [](std::vector<PyRef>& into, const std::vector<PyRef>& from) {
        for (const PyRef& f : from)
          if (std::none_of(into.begin(), into.end(), [&](const PyRef& x) { return x.get() == f.get(); })) into.push_back(f);
      };
      unite(classes, e.classesRead);
      unite(functions, e.functionsRun);
      explain(fn, "this call's branches join record " + std::to_string(r) + "'s: one record serves both");
      return r;
    }
    return SIZE_MAX;
  }

  // A call no record serves: a monitored run adds a record for it.
  PyObject* monitorCall(Unit& fn, Invocation& inv, record::LoggedCall* logged, const replay::Misses& misses) {
    using Clock = std::chrono::steady_clock;
    auto since = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };
    // Why this call gets a record of its own: each record's first failing
    // guard. The first few records say it; the rest usually repeat them.
    std::string why = replay::summarizeMisses(misses, 3);
    if (options.explain && !misses.empty())
      std::cerr << "magpy: " << fn.name << ": call " << fn.calls - 1 << " matches no record (" << why << "); monitoring it\n";
    if (fn.policy.dynamic()) learnVaryingNumbers(fn, inv.roots);
    Monitor monitor(annotations);
    CallSpec spec = fn.spec;
    spec.args = inv.roots.args;
    spec.kwargs = inv.roots.kwargs;
    spec.invoke = inv.run;
    spec.varyingNumbers = fn.policy.varyingNumbers();
    spec.rollLoops = spec.makeBranches = fn.policy.dynamic();
    spec.contentChecks = std::count_if(fn.entries.begin(), fn.entries.end(), [](const Entry& e) {
                           const record::Graph& g = e.record.graph;
                           return std::any_of(g.nodes.begin(), g.nodes.end(), [&](const record::Node& n) {
                             // predicates do not count: a comparison has two sides; a branch
                             // with a side unseen is a check, and so is t.item() == the value read
                             return record::hasUnseenSide(n) ||
                                    (record::isCheck(n.target) && (n.target != record::kExpectTrue || checksItem(g, n)));
                           });
                         }) < ptrdiff_t(kMaxCheckedRecords);
    auto t3 = Clock::now();
    PyRef result;
    {
      MonitoringScope monitoring;
      result = PyRef::steal(monitor.run(spec));
    }
    fn.monitorTime += since(t3);
    if (!result) return nullptr;  // the function raised: no record, as the plain call would
    fn.monitored++;
    auto t4 = Clock::now();
    MonitoringScope building;

    std::vector<record::GraphBreak> breaks = monitor.breaks();
    BuiltRecord built;
    if (breaks.empty()) {
      try {
        built = buildRecord(monitor, spec, blobs);
      } catch (const std::exception& e) {
        record::GraphBreak b;
        b.function = fn.name;
        b.reason = messageOf(e);
        breaks.push_back(b);
      }
    }
    if (!breaks.empty()) built = buildBreakRecord(monitor, spec, breaks);
    built.record.origin = fn.entries.empty() ? "first call" : "call " + std::to_string(fn.calls - 1) + ": " + why;
    std::vector<PyRef> classes = monitor.classesRead(), functions = monitor.functionsRun();
    size_t joined = breaks.empty() ? joinBranches(fn, monitor, built, classes, functions) : SIZE_MAX;
    Placement placed = joined != SIZE_MAX ? Placement{joined, {}}
                                          : fn.policy.place(inUse(fn), built.record, monitor.readSizes(),
                                                            spec.varyingNumbers, built.numberUse);
    size_t replaced = placed.replaces;
    for (auto& note : placed.notes) explain(fn, note);
    for (auto& note : built.notes) explain(fn, note);
    if (monitor.readSizes() && fn.policy.dynamic()) explain(fn, "this record keeps its sizes: " + monitor.sizeUse());
    if (!built.record.forwardOnly.empty())
      explain(fn, "this record is forward only, so its calls run as Python: " + built.record.forwardOnly);
    if (options.explain)
      for (auto& b : built.record.breaks)
        std::cerr << "magpy: " << fn.name << ": graph break " << (b.where.empty() ? "" : "at ") << record::toString(b)
                  << "\n";

    Entry created;
    // A forward-only record runs as Python here: autograd needs the program's backward.
    created.hasGraph = breaks.empty() && built.record.forwardOnly.empty();
    if (created.hasGraph) created.inputPaths = graphInputPaths(built.record.graph);
    created.live = std::make_unique<LiveRecord>(built.record, built.expected, created.inputPaths);
    // A record that runs as Python finds classes and code anew.
    if (created.hasGraph) created.live->dependOn(classes, functions);
    created.expected = built.expected;
    created.classesRead = std::move(classes);
    created.functionsRun = std::move(functions);
    created.pathDependent = !monitor.pathDependent().empty();
    for (auto& g : built.record.guards) {
      if (g.path.root != record::AccessPath::Root::Self && g.path.root != record::AccessPath::Root::Global) continue;
      if (g.check.kind == record::Check::Kind::Absent && !fn.statePaths.count(g.path))
        fn.absentPaths.insert(record::withInstanceAttributes(g.path));  // the snapshot holds instance attributes
      fn.statePaths.insert(g.path);
    }
    if (breaks.empty()) noteState(fn, built);
    fn.buildTime += since(t4);
    created.args = built.argPaths;
    created.kwargs = built.kwargPaths;
    created.record = std::move(built.record);
    // A joined record keeps the sizes either run's Python read.
    created.readSizes = monitor.readSizes() || (joined != SIZE_MAX && fn.entries[joined].readSizes);
    size_t slot = replaced == SIZE_MAX ? fn.entries.size() : replaced;
    if (replaced == SIZE_MAX) fn.entries.push_back(std::move(created));
    else fn.entries[replaced] = std::move(created);
    noteSharedWrites(SharedState(units, globals));
    if (logged) {
      logged->record = int32_t(slot);
      logged->monitored = true;
      // The record just made may read arguments' attributes the log must
      // keep: as they were when the call began.
      record::Value args = logged->args, kwargs = logged->kwargs;  // the same shape, nothing read yet
      for (auto& item : args.items) item = record::Value();
      for (auto& item : kwargs.items) item = record::Value();
      for (auto& [i, value] : built.argsEntry)
        if (i < args.items.size()) args.items[i] = value;
      for (size_t k = 0; k < kwargs.keys.size(); ++k)
        if (auto it = built.kwargsEntry.find(kwargs.keys[k].s); it != built.kwargsEntry.end()) kwargs.items[k] = it->second;
      mergeSnapshot(logged->args, args);
      mergeSnapshot(logged->kwargs, kwargs);
    }
    return result.release();
  }
};

// A unit's records on live objects, as dispatch.h's Records; those with
// graph breaks run as Python.
struct Session::Impl::Records {
  using Result = PyObject*;  // a new reference, or null with a Python error set
  static constexpr bool kRunsPython = true;

  Impl& s;
  Unit& fn;
  Invocation& inv;
  record::LoggedCall* logged;
  std::optional<LiveStore> store;
  std::optional<LiveRecord::Values> values;  // the record being tried

  // The program runs next: the values the guards resolved must not keep
  // its objects alive (eager would free what it drops from the state).
  void letGo() {
    values.reset();
    store.reset();
  }

  size_t size() const { return fn.entries.size(); }
  const replay::Plan* plan(size_t r) { return fn.entries[r].hasGraph ? &s.planOf(fn, r) : nullptr; }
  std::optional<replay::GuardMiss> check(size_t r) {
    Entry& e = fn.entries[r];
    if (e.retired) return replay::GuardMiss{"(numbers)", "no more calls", "this record is retired (its numbers change sizes)"};
    values.reset();
    store.emplace(e.live->store(inv.roots));
    values.emplace(*store, e.live->tree());
    try {
      return e.live->check(*values);
    } catch (const std::exception& ex) {  // a value the guards cannot inspect: not this record
      return replay::GuardMiss{"(guards)", "checkable values", messageOf(ex)};
    }
  }
  PyObject* runAsPython(size_t r) {
    if (logged) logged->record = int32_t(r);
    fn.eager++;
    letGo();
    return inv.runEager();
  }
  std::vector<c10::IValue> run(size_t r) {
    GraphWarnings warnings;
    std::vector<c10::IValue> outputs = runGraph(r);
    warnings.issue();
    return outputs;
  }
  std::vector<c10::IValue> runGraph(size_t r) {
    Entry& e = fn.entries[r];
    std::vector<c10::IValue> inputs = e.live->inputs(*values);  // the record's
    if (const replay::Plan* compiled = s.compiledPlan(fn, r)) {
      auto outputs = compiled->runWith(pick(inputs, e.compiled.inputs), &values->symbols());
      fn.compiledCalls += compiled->ranCompiled();
      s.explainBackend(fn, r);
      return outputs;
    }
    if (e.planInputs) inputs = pick(inputs, *e.planInputs);
    if (!e.plan->differentiates()) return e.plan->runWith(std::move(inputs), &values->symbols());
    // torch's autograd engine refuses a caller holding the GIL (as
    // loss.backward() releases it); the plan touches no Python object.
    PyThreadState* saved = PyEval_SaveThread();
    try {
      auto outputs = e.plan->runWith(std::move(inputs), &values->symbols());
      PyEval_RestoreThread(saved);
      return outputs;
    } catch (...) {
      PyEval_RestoreThread(saved);
      throw;
    }
  }
  void sizesDiffer(size_t r) { s.retire(fn, r); }
  static std::vector<c10::IValue> pick(const std::vector<c10::IValue>& from, const std::vector<size_t>& which) {
    std::vector<c10::IValue> out;
    out.reserve(which.size());
    for (size_t i : which) out.push_back(from[i]);
    return out;
  }
  PyObject* mock(size_t r, const std::vector<c10::IValue>& outputs) {
    if (logged) logged->record = int32_t(r);
    PyRef result = fn.entries[r].live->mock(outputs, *values);
    fn.hits++;
    return result.release();
  }
  [[noreturn]] void fail(size_t, const std::string& what) { throw Error(what); }
};

PyObject* Session::Impl::callUnit(size_t index, Invocation& inv, record::LoggedCall* logged) {
  Unit& fn = *units[index];
  fn.calls++;
  if (options.progress) showProgress();
  replay::Misses misses;  // one per record, in order
  Records records{*this, fn, inv, logged, std::nullopt, std::nullopt};
  try {
    if (auto served = replay::dispatch(records, misses, fn.times)) return *served;
  } catch (const std::exception& ex) {
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_RuntimeError, "magpy: replaying a record of %s failed: %s", fn.name.c_str(),
                   messageOf(ex).c_str());
    return nullptr;
  }
  records.letGo();
  return monitorCall(fn, inv, logged, misses);
}

Session::Session(const Options& options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  if (options.logBudget != "auto") impl_->logBudget = parseByteSize(options.logBudget);
  impl_->annotations.load(builtinAnnotations());
  for (auto& path : options.annotations) impl_->annotations.load(path);
}

Session::~Session() {
  if (gSession == this) gSession = nullptr;
}

Session* Session::current() { return gSession; }

void Session::endProgress() {
  if (impl_->progressShown) std::cerr << "\r\033[K" << std::flush;
  impl_->progressShown = false;
}
void Session::activate() {
  gSession = this;
  replay::setGroupSource(scriptProcessGroup);  // collectives run in the script's default group
}

PyObject* Session::compile(PyObject* target, std::optional<bool> dynamic, const std::optional<std::string>& backend,
                           std::optional<bool> freezeState) {
  if (isCompiled(target)) {
    Py_INCREF(target);
    return target;
  }
  if (!PyCallable_Check(target)) {
    PyErr_Format(PyExc_TypeError, "magpy.compile takes a function or a module, not a %s", Py_TYPE(target)->tp_name);
    return nullptr;
  }
  auto fn = std::make_unique<Unit>();
  try {
    fn->backend = replay::parseBackend(backend.value_or(impl_->options.backend));
  } catch (const Error& e) {
    PyErr_Format(PyExc_ValueError, "magpy.compile: %s", e.what());
    return nullptr;
  }
  fn->freezeState = freezeState.value_or(impl_->options.freezeState);
  fn->compileAfter = size_t(std::max(0, impl_->options.compileAfter));
  fn->target = PyRef::borrow(target);
  fn->policy = RecordSetPolicy(impl_->options.dynamic && dynamic.value_or(impl_->options.dynamic));
  fn->spec.self = target;
  if (PyFunction_Check(target)) {
    fn->spec.function = target;
    fn->name = qualifiedName(target);
    fn->spec.homeModule = utf8(PyFunction_GET_MODULE(target));
  } else if (PyMethod_Check(target)) {
    fn->spec.function = PyMethod_GET_FUNCTION(target);
    fn->spec.selfIsFirstArg = true;
    fn->name = qualifiedName(target);
    fn->spec.homeModule = utf8(PyFunction_Check(fn->spec.function) ? PyFunction_GET_MODULE(fn->spec.function) : nullptr);
  } else {
    PyObject* call = PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(target)), "__call__");
    if (!call || !PyFunction_Check(call)) {
      Py_XDECREF(call);
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError, "magpy.compile cannot monitor a %s: its __call__ is not Python code",
                   Py_TYPE(target)->tp_name);
      return nullptr;
    }
    fn->spec.function = call;
    Py_DECREF(call);  // the class keeps it alive
    fn->spec.selfIsFirstArg = true;
    fn->name = typeName(Py_TYPE(target));
    PyObject* module = PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(target)), "__module__");
    fn->spec.homeModule = utf8(module);
    Py_XDECREF(module);
    PyErr_Clear();
  }
  // Two compiled objects of one class get distinct names.
  size_t same = 0;
  for (size_t i = 0; i < impl_->compiled; ++i) {
    const std::string& other = impl_->units[i]->name;
    if (other == fn->name || other.rfind(fn->name + "#", 0) == 0) ++same;
  }
  if (same) fn->name += "#" + std::to_string(same + 1);

  // Compiled functions come first among the units, in the order compiled.
  impl_->units.insert(impl_->units.begin() + long(impl_->compiled), std::move(fn));
  size_t index = impl_->compiled++;
  impl_->segments.unitInserted(index);
  for (auto& u : impl_->units)
    if (u->parent != SIZE_MAX && u->parent >= index) ++u->parent;
  return newCompiledFunction(index, target);
}

PyObject* Session::call(size_t index, PyObject* args, PyObject* kwargs) {
  Impl& s = *impl_;
  Unit& fn = *s.units[index];
  if (kwargs && PyDict_GET_SIZE(kwargs) == 0) kwargs = nullptr;

  bool logging = int(s.log.calls.size()) < s.options.logCalls;
  record::LoggedCall entry;
  entry.function = uint32_t(index);
  uint64_t logged = s.blobs.bytes();
  try {
    if (logging) {
      size_t before = s.blobs.blobs().size();
      entry.updates = s.log.changesBefore(s.units, s.compiled, index);
      if (!s.logTakes(s.blobs.bytes() - logged)) {
        if (s.options.explain) std::cerr << "magpy: " << s.logEnd << "\n";
        s.blobs.truncate(before);
        s.options.logCalls = int(s.log.calls.size());
        logging = false;
        entry = record::LoggedCall{};
      } else {
        s.logChangeBytes += s.blobs.bytes() - logged;
      }
    }
    if (logging) {
      entry.args = s.log.snapshotArgs(fn, args, kwargs, &entry.kwargs, s.log.stateMemory(s.units, s.compiled));
      // Random operators replay as random operators: replay starts each
      // call from the generator state Python had.
      at::Tensor rng = at::detail::getDefaultCPUGenerator().get_state();
      entry.rng.kind = record::Value::Kind::Tensor;
      entry.rng.meta = replay::metaOf(rng);
      entry.rng.blob = s.blobs.add(rng);
    }
  } catch (const std::exception& e) {
    // Inputs a record cannot hold (a sparse tensor): the call still runs;
    // the log ends here, so replay repeats a session that happened.
    if (s.options.explain) std::cerr << "magpy: " << fn.name << ": call log ends: its inputs cannot be recorded: " << e.what() << "\n";
    s.options.logCalls = int(s.log.calls.size());
    logging = false;
    entry = record::LoggedCall{};
  }

  Invocation inv;
  inv.roots = LiveRoots{fn.spec.self, args, kwargs, fn.spec.homeModule};
  inv.run = [&] { return PyObject_Call(fn.target.get(), args, kwargs); };
  inv.runEager = [&] { return s.segments.runEager(index, inv.run); };
  if (logging && fn.sharedMemory.empty()) fn.sharedMemory = s.sharedStateMemory(index);
  PyRef result = PyRef::steal(s.callUnit(index, inv, logging ? &entry : nullptr));
  if (!result) return nullptr;
  if (logging && fn.sharedMemory.empty()) fn.sharedMemory = s.sharedStateMemory(index);  // paths a new record reads

  if (logging) {
    // Arguments sharing memory matter where the record writes an input in place.
    const auto& shared = s.log.sharedTensors();
    if (!shared.empty() && entry.record >= 0 && size_t(entry.record) < fn.entries.size() &&
        replay::writesItsInputs(fn.entries[size_t(entry.record)].record.graph))
      CallLog::keepsApart(entry, shared);
    if (entry.record >= 0 && size_t(entry.record) < fn.entries.size())
      CallLog::keepsStateIdentity(entry, fn.entries[size_t(entry.record)].record.guards);
    try {
      entry.result = snapshot(result.get(), PathTrie{}, s.blobs);
    } catch (const Error& e) {
      PyErr_Format(PyExc_RuntimeError, "magpy: cannot log the call's result: %s", e.what());
      return nullptr;
    }
    s.log.calls.push_back(std::move(entry));
    s.log.noteExit(s.units, s.compiled, index);
    s.logBytes += s.blobs.bytes() - logged;
  }
  return result.release();
}

PyObject* Session::stats(size_t index) {
  auto count = [&](const Unit& u, size_t& graphs, size_t& breaks) {
    for (auto& e : u.entries) {
      breaks += e.record.breaks.size();
      graphs += e.hasGraph ? 1 : 0;
    }
  };
  const Unit& fn = *impl_->units[index];
  size_t breaks = 0, graphs = 0, segments = 0, segmentGraphs = 0, segmentBreaks = 0, segmentHits = 0;
  count(fn, graphs, breaks);
  for (auto& u : impl_->units)
    if (u->parent == index) {
      ++segments;
      count(*u, segmentGraphs, segmentBreaks);
      segmentHits += u->hits;
    }
  return Py_BuildValue("{s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:d,s:d,s:d,s:d,s:d}", "records",
                       Py_ssize_t(fn.entries.size()), "graphs", Py_ssize_t(graphs), "breaks", Py_ssize_t(breaks), "calls",
                       Py_ssize_t(fn.calls), "hits", Py_ssize_t(fn.hits), "compiled", Py_ssize_t(fn.compiledCalls),
                       "monitored", Py_ssize_t(fn.monitored), "eager",
                       Py_ssize_t(fn.eager), "segments", Py_ssize_t(segments), "segment_graphs", Py_ssize_t(segmentGraphs),
                       "segment_hits", Py_ssize_t(segmentHits), "guard_seconds", fn.times.guards, "graph_seconds",
                       fn.times.graph, "mock_seconds", fn.times.mock, "monitor_seconds", fn.monitorTime, "build_seconds",
                       fn.buildTime);
}

namespace {

// Native replay never serves r: a break whose reason says why.
void refuseNatively(record::Record& r, const std::string& why) {
  record::GraphBreak b;
  b.reason = why;
  r.breaks = {b};
}

// A record made before the script changed a class or function it depends
// on: native replay has no classes or code to check, so it never serves it.
void supersede(record::Record& r, const replay::GuardMiss& changed) {
  refuseNatively(r, "superseded: the script changed " + changed.path + " after this record was made (native state holds "
                    "no classes or code to tell the two apart)");
}

void keepsNoAliasing(record::Record& r, const std::string& sharedMemory) {
  refuseNatively(r, "refused natively: " + sharedMemory + ", and a record of this function writes its inputs in place; "
                    "a record file keeps each tensor's contents apart");
}

}  // namespace

record::RecordFile Session::recordFile(bool stateAtExit) {
  Impl& s = *impl_;
  record::RecordFile f;
  SharedState shared(s.units, s.globals);
  s.noteSharedWrites(shared);
  for (size_t index = 0; index < s.units.size(); ++index) {
    const std::unique_ptr<Unit>& fn = s.units[index];
    record::CompiledFunction out;
    out.name = fn->name;
    out.module = fn->spec.homeModule;
    out.self = stateAtExit || !fn->haveSelf ? s.selfNow(*fn) : fn->self;
    // Copies of tensors that share memory agree until one is written.
    std::string sharedMemory = fn->sharedMemory.empty() ? s.sharedStateMemory(index) : fn->sharedMemory;
    bool writesState = std::any_of(fn->entries.begin(), fn->entries.end(),
                                   [](const Entry& e) { return replay::writesItsInputs(e.record.graph); });
    for (auto& e : fn->entries) {
      out.records.push_back(e.record);
      if (auto changed = e.live->definitionsChanged()) supersede(out.records.back(), *changed);
      else if (writesState && !sharedMemory.empty()) keepsNoAliasing(out.records.back(), sharedMemory);
      else if (!e.keptApart.empty()) refuseNatively(out.records.back(), e.keptApart);
    }
    f.functions.push_back(std::move(out));
  }
  for (auto& [module, value] : s.globals) f.globals.push_back({module, value});
  if (stateAtExit) {
    f.stateAt = record::kStateAtExit;  // the logged calls began from other state: none kept
  } else {
    f.calls = s.log.calls;
  }
  f.blobs = s.blobs.blobs();
  dropUnusedBlobs(f);  // the state at exit replaced what the log and the first reads kept
  return f;
}

std::vector<record::CallCounts> Session::callCounts() const {
  std::vector<record::CallCounts> out;
  for (auto& fn : impl_->units) {
    record::CallCounts c;
    c.function = fn->name;
    if (fn->parent != SIZE_MAX) c.parent = impl_->units[fn->parent]->name;
    c.calls = fn->calls;
    c.replayed = fn->hits;
    c.monitored = fn->monitored;
    c.eager = fn->eager;
    out.push_back(std::move(c));
  }
  return out;
}

std::string Session::summary() const {
  std::string out;
  for (auto& fn : impl_->units) {
    size_t breaks = 0, graphs = 0, forwardOnly = 0, nodes = 0, guards = 0;
    for (auto& e : fn->entries) {
      breaks += e.record.breaks.size();
      graphs += e.hasGraph ? 1 : 0;
      forwardOnly += e.record.forwardOnly.empty() ? 0 : 1;
      nodes += e.record.graph.numOps();
      guards += e.record.guards.size();
    }
    std::string forward = forwardOnly ? ", " + std::to_string(forwardOnly) + " forward only" : "";
    out += "  " + fn->name + ": " + std::to_string(fn->calls) + " calls, " + std::to_string(fn->entries.size()) +
           " records (" + std::to_string(graphs) + " graphs, " + std::to_string(breaks) + " breaks" + forward + "), " +
           std::to_string(fn->hits) + " replayed from a record, " + std::to_string(nodes) + " graph ops, " +
           std::to_string(guards) + " guards\n";
  }
  if (!impl_->logEnd.empty()) out += "  " + impl_->logEnd + "\n";
  return out;
}

}  // namespace magpy::capture

#include "capture/jit.h"

#include <ATen/CPUGeneratorImpl.h>
#include <structmember.h>
#include <ATen/core/Tensor.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <set>

#include "capture/live.h"
#include "capture/monitor.h"
#include "capture/record_builder.h"
#include "magpy/replay/plan.h"
#include "magpy/replay/state.h"
#include "magpy/replay/tensors.h"
#include "magpy/support/error.h"
#include "magpy/support/hash.h"

namespace magpy::capture {
namespace {

Session* gSession = nullptr;
thread_local int tMonitoring = 0;  // > 0 while a monitored run is under way on this thread

// The Python object magpy.compile returns.
struct CompiledObject {
  PyObject_HEAD
  size_t function;
  PyObject* target;
  PyObject* weakrefs;
};

void compiledDealloc(PyObject* self) {
  auto* c = reinterpret_cast<CompiledObject*>(self);
  if (c->weakrefs) PyObject_ClearWeakRefs(self);
  Py_XDECREF(c->target);
  Py_TYPE(self)->tp_free(self);
}

PyObject* compiledCall(PyObject* self, PyObject* args, PyObject* kwargs) {
  auto* c = reinterpret_cast<CompiledObject*>(self);
  // Inside a monitored run, a compiled function is plain code being traced.
  if (tMonitoring > 0 || !gSession) return PyObject_Call(c->target, args, kwargs);
  // CPython calls in here: no C++ exception (a libtorch error on an input
  // magpy did not expect) may cross back into it.
  try {
    return gSession->call(c->function, args, kwargs);
  } catch (const std::exception& e) {
    PyErr_Format(PyExc_RuntimeError, "magpy: %s", messageOf(e).c_str());
    return nullptr;
  }
}

// Attributes not of the wrapper are the target's: model.eval() keeps working.
PyObject* compiledGetattr(PyObject* self, PyObject* name) {
  PyObject* v = PyObject_GenericGetAttr(self, name);
  if (v || !PyErr_ExceptionMatches(PyExc_AttributeError)) return v;
  PyErr_Clear();
  return PyObject_GetAttr(reinterpret_cast<CompiledObject*>(self)->target, name);
}

PyObject* compiledStats(PyObject* self, PyObject*) {
  if (!gSession) Py_RETURN_NONE;
  return gSession->stats(reinterpret_cast<CompiledObject*>(self)->function);
}

PyObject* compiledRepr(PyObject* self) {
  return PyUnicode_FromFormat("<magpy compiled %R>", reinterpret_cast<CompiledObject*>(self)->target);
}

PyMethodDef kCompiledMethods[] = {
    {"_magpy_stats", compiledStats, METH_NOARGS,
     "Counts of this function's calls: records, graphs, breaks, calls, hits, monitored runs, eager runs, and those "
     "of the segments compiled inside its graph breaks."},
    {nullptr, nullptr, 0, nullptr}};

PyMemberDef kCompiledMembers[] = {
    {"__wrapped__", T_OBJECT, offsetof(CompiledObject, target), READONLY, "The function or module magpy compiled."},
    {nullptr, 0, 0, 0, nullptr}};

PyTypeObject CompiledType = [] {
  PyTypeObject t{};
  t.ob_base.ob_base.ob_refcnt = 1;
  t.tp_name = "magpy.CompiledFunction";
  t.tp_basicsize = sizeof(CompiledObject);
  t.tp_dealloc = compiledDealloc;
  t.tp_call = compiledCall;
  t.tp_getattro = compiledGetattr;
  t.tp_repr = compiledRepr;
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc = "A function compiled by magpy: calls run a captured record when its guards hold.";
  t.tp_weaklistoffset = offsetof(CompiledObject, weakrefs);
  t.tp_methods = kCompiledMethods;
  t.tp_members = kCompiledMembers;
  return t;
}();

PyObject* magpyCompile(PyObject*, PyObject* target) {
  if (!gSession) {
    PyErr_SetString(PyExc_RuntimeError, "magpy.compile works only in scripts run by magpy-capture");
    return nullptr;
  }
  return gSession->compile(target);
}

PyMethodDef kModuleMethods[] = {
    {"compile", magpyCompile, METH_O,
     "compile(fn_or_module) -> callable\n\nReturns a callable that behaves like fn_or_module; magpy-capture "
     "monitors its calls, captures them as operator graphs and writes them to the record file."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "magpy",
                       "Capture eager PyTorch functions as operator graphs (run scripts with magpy-capture).", -1,
                       kModuleMethods, nullptr, nullptr, nullptr, nullptr};

std::string utf8(PyObject* s) {
  const char* c = s && PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : nullptr;
  return c ? c : "";
}

}  // namespace

bool isCompiled(PyObject* o) { return Py_TYPE(o) == &CompiledType; }
PyObject* compiledTarget(PyObject* o) { return reinterpret_cast<CompiledObject*>(o)->target; }

PyObject* initMagpyModule() {
  if (PyType_Ready(&CompiledType) < 0) return nullptr;
  PyObject* m = PyModule_Create(&kModule);
  if (!m) return nullptr;
  Py_INCREF(&CompiledType);
  PyModule_AddObject(m, "CompiledFunction", reinterpret_cast<PyObject*>(&CompiledType));
  return m;
}

// ---------------------------------------------------------------------------

struct Session::Impl : FrameInterceptor {
  // A record in use: its guards on live objects, and its graph's plan
  // (none for a record with graph breaks, which runs as Python).
  struct Entry {
    record::Record record;
    std::unique_ptr<LiveRecord> live;
    std::unique_ptr<replay::Plan> plan;
    std::map<size_t, PathTrie> args;
    std::map<std::string, PathTrie> kwargs;
  };
  // A function with records: one given to magpy.compile, or a segment: a
  // Python function called by one that runs as Python past a graph break.
  struct Unit {
    std::string name;
    PyRef target;
    CallSpec shape;  // self, function, selfIsFirstArg, homeModule
    size_t parent = SIZE_MAX;  // segments: the compiled function they serve
    std::vector<Entry> entries;
    record::Value self;
    bool haveSelf = false;
    std::set<record::AccessPath> statePaths;  // self- and module-rooted paths its records read
    std::set<record::AccessPath> absentPaths; // of those, the ones first read as absent
    size_t calls = 0, hits = 0, monitored = 0, eager = 0;
    // Where the time goes (seconds, summed over calls): the paper's Figure 16.
    double guardTime = 0, graphTime = 0, mockTime = 0, monitorTime = 0, buildTime = 0;
  };
  // How to run one call of a unit.
  struct Invocation {
    LiveRoots roots;
    std::function<PyObject*()> run;        // as Python, once
    std::function<PyObject*()> runEager;   // as Python, its calls compiled as segments
  };

  Options options;
  record::AnnotationSet annotations;
  std::vector<std::unique_ptr<Unit>> units;
  size_t compiled = 0;  // units[0, compiled) were given to magpy.compile, in order
  std::map<PyCodeObject*, size_t> segments;
  std::vector<PyRef> keep;  // code objects segments are keyed by
  std::map<std::string, record::Value> globals;
  BlobPool blobs;
  std::vector<record::LoggedCall> log;

  // Frames running as Python past a graph break: the calls they make are
  // segments. The first frame of an eager top-level call is found by its caller.
  std::set<const void*> eagerFrames;
  const void* eagerRootCaller = nullptr;
  size_t activeUnit = SIZE_MAX;

  // ---- state changes made by the script between logged calls ----

  // What each known state path held when the last logged call returned;
  // a difference at the next call's entry is a change the script made.
  struct Seen {
    bool exists = false;
    PyObject* object = nullptr;  // identity (not owned: compared, never used)
    int64_t version = -1;        // tensors: the in-place version counter
    uint64_t contents = 0;       // containers: their elements, shallowly
    record::Atom atom;
    bool operator==(const Seen& o) const {
      return exists == o.exists && object == o.object && version == o.version && contents == o.contents && atom == o.atom;
    }
  };
  std::map<std::pair<int, record::AccessPath>, Seen> lastExit;
  // Interpreter state replay can set, as replay would have it after the
  // calls logged so far (it starts from a fresh process's).
  std::map<std::string, record::Atom> runtimeLogged{replay::settableRuntimeStates().begin(),
                                                    replay::settableRuntimeStates().end()};

  // A container changed in place (list.append, dict item set, a hook
  // registered) keeps its identity; its elements tell.
  static uint64_t shallowHash(PyObject* c) {
    Hasher h;
    auto element = [&](PyObject* e) {
      if (auto a = atomOf(e)) h.text(record::toString(*a));
      else h.u64(reinterpret_cast<uintptr_t>(e));
    };
    if (PyDict_Check(c)) {
      PyObject *k, *v;
      Py_ssize_t pos = 0;
      while (PyDict_Next(c, &pos, &k, &v)) {
        element(k);
        element(v);
      }
    } else {
      for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(c); ++i) element(PySequence_Fast_GET_ITEM(c, i));
    }
    return h.u64(uint64_t(PyObject_Length(c))).digest();
  }

  // Module-rooted paths are shared: they belong to no function (-1) and name
  // their module explicitly.
  std::pair<int, record::AccessPath> stateKey(size_t u, record::AccessPath p) const {
    if (p.root != record::AccessPath::Root::Global) return {int(u), p};
    if (p.name.empty()) p.name = units[u]->shape.homeModule;
    return {-1, p};
  }

  Seen observe(const record::AccessPath& path, const LiveRoots& roots) {
    Seen s;
    PyRef v = resolveLive(path, roots);
    if (!v) return s;
    s.exists = true;
    if (auto a = atomOf(v.get())) {
      s.atom = *a;
    } else {
      s.object = v.get();
      if (isTensor(v.get())) s.version = int64_t(tensorOf(v.get()).unsafeGetTensorImpl()->version_counter().current_version());
      if (PyTuple_Check(v.get()) || PyList_Check(v.get()) || PyDict_Check(v.get())) s.contents = shallowHash(v.get());
    }
    return s;
  }

  // What changed since the calls logged so far: u's own state, and every
  // module global any compiled function reads (replay shares them all).
  std::vector<record::StateUpdate> changesBefore(size_t u) {
    std::vector<record::StateUpdate> out;
    std::set<std::pair<int, record::AccessPath>> seen;
    for (size_t w = 0; w < compiled; ++w) {
      const Unit& fn = *units[w];
      LiveRoots roots{fn.shape.self, nullptr, nullptr, fn.shape.homeModule};
      for (auto& path : fn.statePaths) {
        if (w != u && path.root != record::AccessPath::Root::Global) continue;
        auto key = stateKey(w, path);
        auto it = lastExit.find(key);
        if (!seen.insert(key).second || it == lastExit.end() || observe(key.second, roots) == it->second) continue;
        PyRef v = resolveLive(key.second, roots);
        if (!v) continue;  // removed: the record's guards will notice
        record::StateUpdate upd;
        upd.function = key.first;
        upd.path = key.second;
        PathTrie below;
        for (auto& other : fn.statePaths)
          if (path.isPrefixOf(other) && other.steps.size() > path.steps.size())
            below.insert(std::vector<record::PathStep>(other.steps.begin() + long(path.steps.size()), other.steps.end()));
        upd.value = snapshot(v.get(), below, blobs);
        out.push_back(std::move(upd));
      }
    }
    // Interpreter state is the process's, not a function's: logged when it
    // differs from what replay would have after the calls logged so far.
    for (auto& [name, logged] : runtimeLogged) {
      auto now = replay::runtimeState(name);
      if (!now || *now == logged) continue;
      record::StateUpdate upd;
      upd.path = record::AccessPath::runtime(name);
      upd.value.atom = logged = *now;
      out.push_back(std::move(upd));
    }
    return out;
  }

  void noteExit() {
    for (size_t u = 0; u < compiled; ++u) {
      LiveRoots roots{units[u]->shape.self, nullptr, nullptr, units[u]->shape.homeModule};
      for (auto& path : units[u]->statePaths) {
        auto key = stateKey(u, path);
        lastExit[key] = observe(key.second, roots);
      }
    }
  }

  // The state a new record read, as it was when the run began; what an
  // earlier record already read stays as it was then (first read wins).
  // A path first read as absent stays absent in the initial state, even
  // when a later record finds it present (the script added it: an update).
  void noteState(Unit& fn, const BuiltRecord& built) {
    record::Value self = built.selfEntry;
    std::map<std::string, record::Value> moduleGlobals = built.globalsEntry;
    for (auto& path : fn.absentPaths) {
      if (path.root == record::AccessPath::Root::Self) {
        removePath(self, path.steps);
      } else if (path.root == record::AccessPath::Root::Global) {
        auto it = moduleGlobals.find(path.name.empty() ? fn.shape.homeModule : path.name);
        if (it != moduleGlobals.end()) removePath(it->second, path.steps);
      }
    }
    if (!fn.haveSelf) {
      fn.self = self;
      fn.haveSelf = true;
    } else {
      mergeSnapshot(fn.self, self);
    }
    for (auto& [module, value] : moduleGlobals) {
      auto it = globals.find(module);
      if (it == globals.end()) globals.emplace(module, value);
      else mergeGlobals(it->second, value);
    }
  }

  // `self` as it is now, along the paths the first-read state holds and
  // those the records read (not those they need absent: a class's method
  // is not an instance attribute).
  record::Value selfNow(const Unit& fn) {
    PathTrie wanted;
    if (fn.haveSelf) addPaths(fn.self, wanted);
    for (auto& path : fn.statePaths) {
      record::AccessPath p = record::withInstanceAttributes(path);
      if (p.root == record::AccessPath::Root::Self && !fn.absentPaths.count(p)) wanted.insert(p.steps);
    }
    return snapshot(fn.shape.self, wanted, blobs);
  }

  static void addPaths(const record::Value& tree, PathTrie& trie) {
    for (size_t i = 0; i < tree.items.size(); ++i) {
      record::PathStep step = !tree.names.empty() ? record::PathStep::attr(tree.names[i])
                              : !tree.keys.empty() ? record::PathStep::keyed(tree.keys[i])
                                                   : record::PathStep::at(int64_t(i));
      addPaths(tree.items[i], trie.children[step]);
    }
  }

  // Removes the value at steps below root, if the tree has it.
  static void removePath(record::Value& root, const std::vector<record::PathStep>& steps) {
    record::Value* cur = &root;
    for (size_t k = 0; k < steps.size(); ++k) {
      const record::PathStep& s = steps[k];
      auto& names = cur->names;
      auto& keys = cur->keys;
      size_t at = SIZE_MAX;
      if (s.kind == record::PathStep::Kind::Attr) {
        auto it = std::find(names.begin(), names.end(), s.name);
        if (it != names.end()) at = size_t(it - names.begin());
      } else if (s.kind == record::PathStep::Kind::Key) {
        auto it = std::find(keys.begin(), keys.end(), s.key);
        if (it != keys.end()) at = size_t(it - keys.begin());
      }
      if (at == SIZE_MAX) return;
      if (k + 1 == steps.size()) {
        cur->items.erase(cur->items.begin() + long(at));
        if (s.kind == record::PathStep::Kind::Attr) names.erase(names.begin() + long(at));
        else keys.erase(keys.begin() + long(at));
        return;
      }
      cur = &cur->items[at];
    }
  }

  record::Value snapshotArgs(const Unit& fn, PyObject* args, PyObject* kwargs, record::Value* kwOut) {
    std::map<size_t, PathTrie> argPaths;
    std::map<std::string, PathTrie> kwPaths;
    for (auto& e : fn.entries) {
      for (auto& [i, t] : e.args) argPaths[i] = t;
      for (auto& [k, t] : e.kwargs) kwPaths[k] = t;
    }
    // One tree for the arguments, so that f(x, x) keeps its aliasing.
    PathTrie argTrie;
    for (auto& [i, t] : argPaths) argTrie.children[record::PathStep::at(int64_t(i))] = t;
    record::Value a = snapshot(args, argTrie, blobs);
    a.type.clear();
    *kwOut = record::Value();
    kwOut->kind = record::Value::Kind::Dict;
    if (kwargs) {
      PathTrie kwTrie;
      for (auto& [k, t] : kwPaths) kwTrie.children[record::PathStep::keyed(record::Atom::string(k))] = t;
      *kwOut = snapshot(kwargs, kwTrie, blobs);
    }
    return a;
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

  // One call of a unit: the first record whose guards hold runs (its graph
  // and mock, or Python when it has graph breaks); with none, a monitored
  // run adds a record. `logged` receives what replay needs of the call.
  PyObject* callUnit(size_t index, Invocation& inv, record::LoggedCall* logged) {
    Unit& fn = *units[index];
    fn.calls++;
    if (options.progress) showProgress();
    std::vector<LiveMiss> misses;  // one per record, in order
    using Clock = std::chrono::steady_clock;
    auto since = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };
    for (size_t r = 0; r < fn.entries.size(); ++r) {
      Entry& e = fn.entries[r];
      LivePaths::Values values(e.live->paths(), inv.roots);
      auto t0 = Clock::now();
      std::optional<LiveMiss> miss;
      try {
        miss = e.live->check(values);
      } catch (const std::exception& ex) {  // a value the guards cannot inspect: not this record
        miss = LiveMiss{"(guards)", "checkable values", ex.what()};
      }
      fn.guardTime += since(t0);
      if (miss) {
        misses.push_back(*miss);
        continue;
      }
      if (logged) logged->record = int32_t(r);
      if (!e.plan) {
        fn.eager++;
        return inv.runEager();
      }
      try {
        auto t1 = Clock::now();
        auto outputs = e.plan->runWith(e.live->inputs(values));
        fn.graphTime += since(t1);
        auto t2 = Clock::now();
        PyRef result = e.live->mock(outputs, values);
        fn.mockTime += since(t2);
        fn.hits++;
        return result.release();
      } catch (const std::exception& ex) {
        if (!PyErr_Occurred())
          PyErr_Format(PyExc_RuntimeError, "magpy: replaying a record of %s failed: %s", fn.name.c_str(), ex.what());
        return nullptr;
      }
    }

    // Why this call gets a record of its own: each record's first failing guard.
    // The first few records say it; the rest usually repeat them.
    constexpr size_t kShown = 3;
    std::string why;
    for (size_t r = 0; r < misses.size() && r < kShown; ++r)
      why += (r ? "; record " : "record ") + std::to_string(r) + " needs " + misses[r].path + " " + misses[r].expected +
             ", got " + misses[r].actual;
    if (misses.size() > kShown) why += "; and " + std::to_string(misses.size() - kShown) + " more records missed";
    if (options.explain && !misses.empty())
      std::cerr << "magpy: " << fn.name << ": call " << fn.calls - 1 << " matches no record (" << why << "); monitoring it\n";
    Monitor monitor(annotations);
    CallSpec spec = fn.shape;
    spec.args = inv.roots.args;
    spec.kwargs = inv.roots.kwargs;
    spec.invoke = inv.run;
    ++tMonitoring;
    auto t3 = Clock::now();
    PyRef result = PyRef::steal(monitor.run(spec));
    fn.monitorTime += since(t3);
    --tMonitoring;
    if (!result) return nullptr;  // the function raised: no record, as the plain call would
    fn.monitored++;
    auto t4 = Clock::now();

    std::vector<record::GraphBreak> breaks = monitor.breaks();
    BuiltRecord built;
    if (breaks.empty()) {
      try {
        built = buildRecord(monitor, spec, blobs);
      } catch (const std::exception& e) {
        record::GraphBreak b;
        b.function = fn.name;
        b.reason = e.what();
        breaks.push_back(b);
      }
    }
    if (!breaks.empty()) built = buildBreakRecord(monitor, spec, breaks);
    built.record.origin = fn.entries.empty() ? "first call" : "call " + std::to_string(fn.calls - 1) + ": " + why;
    if (options.explain)
      for (auto& b : built.record.breaks) std::cerr << "magpy: " << fn.name << ": graph break at " << record::toString(b) << "\n";

    Entry created;
    try {
      // The JIT runs with autograd (training works through it): only the
      // optimizations that keep autograd's view of the graph apply.
      replay::PlanOptions planOptions;
      planOptions.passes.deadCode = planOptions.passes.commonSubexpr = true;
      planOptions.trustRecord = true;  // the script's own operators: the policy is for records from others
      if (breaks.empty()) created.plan = std::make_unique<replay::Plan>(built.record.graph, blobs.blobs(), planOptions);
    } catch (const Error& e) {
      PyErr_Format(PyExc_RuntimeError, "magpy: cannot use the record captured for %s: %s", fn.name.c_str(), e.what());
      return nullptr;
    }
    created.live = std::make_unique<LiveRecord>(built.record, built.expected,
                                                created.plan ? created.plan->inputPaths() : std::vector<record::AccessPath>{});
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
    fn.entries.push_back(std::move(created));
    if (logged) {
      logged->record = int32_t(fn.entries.size() - 1);
      logged->monitored = true;
      // The record just made may read arguments' attributes the log must
      // keep: as they were when the call began.
      for (auto& [i, value] : built.argsEntry)
        if (i < logged->args.items.size()) mergeSnapshot(logged->args.items[i], value);
      for (size_t k = 0; k < logged->kwargs.keys.size(); ++k) {
        auto it = built.kwargsEntry.find(logged->kwargs.keys[k].s);
        if (it != built.kwargsEntry.end()) mergeSnapshot(logged->kwargs.items[k], it->second);
      }
    }
    return result.release();
  }

  // A Python function called by one running as Python past a graph break is
  // a segment: a unit of its own, keyed by its code.
  PyObject* onCall(const FrameCall& call) override {
    if (tMonitoring > 0) return call.run();  // traced by the monitored run
    if (eagerRootCaller && call.caller() == eagerRootCaller) {
      eagerRootCaller = nullptr;
      return runEagerFrame(call);
    }
    if (!eagerFrames.count(call.caller())) return call.run();
    PyObject* function = call.function();
    if (!function || annotations.find(qualifiedName(function))) return call.run();

    PyCodeObject* code = call.code();
    auto it = segments.find(code);
    if (it == segments.end()) {
      auto unit = std::make_unique<Unit>();
      unit->name = "segment " + qualifiedName(function) + " (in " + units[activeUnit]->name + ")";
      unit->parent = activeUnit;
      unit->shape.homeModule = utf8(PyFunction_GET_MODULE(function));
      units.push_back(std::move(unit));
      keep.push_back(PyRef::borrow(reinterpret_cast<PyObject*>(code)));
      it = segments.emplace(code, units.size() - 1).first;
    }
    Unit& unit = *units[it->second];
    unit.target = PyRef::borrow(function);
    unit.shape.self = function;
    unit.shape.function = function;
    PyRef args = PyRef::steal(call.args());
    PyRef kwargs = PyRef::steal(call.kwargs());
    if (!args) return nullptr;
    Invocation inv;
    inv.roots = LiveRoots{function, args.get(), kwargs.get(), unit.shape.homeModule};
    inv.run = [&] { return call.run(); };
    inv.runEager = [&] { return runEagerFrame(call); };
    return callUnit(it->second, inv, nullptr);
  }

  PyObject* runEagerFrame(const FrameCall& call) {
    eagerFrames.insert(call.id());
    PyObject* result = call.run();
    eagerFrames.erase(call.id());
    return result;
  }
};

Session::Session(const Options& options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
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
void Session::activate() { gSession = this; }

PyObject* Session::compile(PyObject* target) {
  if (isCompiled(target)) {
    Py_INCREF(target);
    return target;
  }
  if (!PyCallable_Check(target)) {
    PyErr_Format(PyExc_TypeError, "magpy.compile takes a function or a module, not a %s", Py_TYPE(target)->tp_name);
    return nullptr;
  }
  auto fn = std::make_unique<Impl::Unit>();
  fn->target = PyRef::borrow(target);
  fn->shape.self = target;
  if (PyFunction_Check(target)) {
    fn->shape.function = target;
    fn->name = qualifiedName(target);
    fn->shape.homeModule = utf8(PyFunction_GET_MODULE(target));
  } else if (PyMethod_Check(target)) {
    fn->shape.function = PyMethod_GET_FUNCTION(target);
    fn->shape.selfIsFirstArg = true;
    fn->name = qualifiedName(target);
    fn->shape.homeModule = utf8(PyFunction_Check(fn->shape.function) ? PyFunction_GET_MODULE(fn->shape.function) : nullptr);
  } else {
    PyObject* call = PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(target)), "__call__");
    if (!call || !PyFunction_Check(call)) {
      Py_XDECREF(call);
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError, "magpy.compile cannot monitor a %s: its __call__ is not Python code",
                   Py_TYPE(target)->tp_name);
      return nullptr;
    }
    fn->shape.function = call;
    Py_DECREF(call);  // the class keeps it alive
    fn->shape.selfIsFirstArg = true;
    fn->name = typeName(Py_TYPE(target));
    PyObject* module = PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(target)), "__module__");
    fn->shape.homeModule = utf8(module);
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
  for (auto& [code, unit] : impl_->segments) ++unit;
  for (auto& u : impl_->units)
    if (u->parent != SIZE_MAX && u->parent >= index) ++u->parent;

  auto* obj = PyObject_New(CompiledObject, &CompiledType);
  if (!obj) return nullptr;
  obj->function = index;
  obj->target = target;
  obj->weakrefs = nullptr;
  Py_INCREF(target);
  return reinterpret_cast<PyObject*>(obj);
}

PyObject* Session::call(size_t index, PyObject* args, PyObject* kwargs) {
  Impl& s = *impl_;
  Impl::Unit& fn = *s.units[index];
  if (kwargs && PyDict_GET_SIZE(kwargs) == 0) kwargs = nullptr;

  bool logging = int(s.log.size()) < s.options.logCalls;
  record::LoggedCall entry;
  entry.function = uint32_t(index);
  try {
    if (logging) {
      entry.updates = s.changesBefore(index);
      entry.args = s.snapshotArgs(fn, args, kwargs, &entry.kwargs);
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
    s.options.logCalls = int(s.log.size());
    logging = false;
    entry = record::LoggedCall{};
  }

  Impl::Invocation inv;
  inv.roots = LiveRoots{fn.shape.self, args, kwargs, fn.shape.homeModule};
  inv.run = [&] { return PyObject_Call(fn.target.get(), args, kwargs); };
  inv.runEager = [&] {
    // Its first Python frame is called from the frame running now.
    size_t outer = s.activeUnit;
    s.activeUnit = index;
    s.eagerRootCaller = currentFrameId();
    installInterceptor(&s);
    PyObject* result = PyObject_Call(fn.target.get(), args, kwargs);
    removeInterceptor();
    s.eagerRootCaller = nullptr;
    s.activeUnit = outer;
    return result;
  };
  PyRef result = PyRef::steal(s.callUnit(index, inv, logging ? &entry : nullptr));
  if (!result) return nullptr;

  if (logging) {
    try {
      entry.result = snapshot(result.get(), PathTrie{}, s.blobs);
    } catch (const Error& e) {
      PyErr_Format(PyExc_RuntimeError, "magpy: cannot log the call's result: %s", e.what());
      return nullptr;
    }
    s.log.push_back(std::move(entry));
    s.noteExit();
  }
  return result.release();
}

PyObject* Session::stats(size_t index) {
  auto count = [&](const Impl::Unit& u, size_t& graphs, size_t& breaks) {
    for (auto& e : u.entries) {
      breaks += e.record.breaks.size();
      graphs += e.plan ? 1 : 0;
    }
  };
  const Impl::Unit& fn = *impl_->units[index];
  size_t breaks = 0, graphs = 0, segments = 0, segmentGraphs = 0, segmentBreaks = 0, segmentHits = 0;
  count(fn, graphs, breaks);
  for (auto& u : impl_->units)
    if (u->parent == index) {
      ++segments;
      count(*u, segmentGraphs, segmentBreaks);
      segmentHits += u->hits;
    }
  return Py_BuildValue("{s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:d,s:d,s:d,s:d,s:d}", "records",
                       Py_ssize_t(fn.entries.size()), "graphs", Py_ssize_t(graphs), "breaks", Py_ssize_t(breaks), "calls",
                       Py_ssize_t(fn.calls), "hits", Py_ssize_t(fn.hits), "monitored", Py_ssize_t(fn.monitored), "eager",
                       Py_ssize_t(fn.eager), "segments", Py_ssize_t(segments), "segment_graphs", Py_ssize_t(segmentGraphs),
                       "segment_hits", Py_ssize_t(segmentHits), "guard_seconds", fn.guardTime, "graph_seconds",
                       fn.graphTime, "mock_seconds", fn.mockTime, "monitor_seconds", fn.monitorTime, "build_seconds",
                       fn.buildTime);
}

record::RecordFile Session::recordFile(bool stateAtExit) {
  Impl& s = *impl_;
  record::RecordFile f;
  for (auto& fn : s.units) {
    record::CompiledFunction out;
    out.name = fn->name;
    out.module = fn->shape.homeModule;
    out.self = stateAtExit || !fn->haveSelf ? s.selfNow(*fn) : fn->self;
    for (auto& e : fn->entries) out.records.push_back(e.record);
    f.functions.push_back(std::move(out));
  }
  for (auto& [module, value] : s.globals) f.globals.push_back({module, value});
  if (stateAtExit) {
    f.stateAt = record::kStateAtExit;  // the logged calls began from other state: none kept
  } else {
    f.calls = s.log;
  }
  f.blobs = s.blobs.blobs();
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
    size_t breaks = 0, graphs = 0, nodes = 0, guards = 0;
    for (auto& e : fn->entries) {
      breaks += e.record.breaks.size();
      graphs += e.plan ? 1 : 0;
      nodes += e.record.graph.numOps();
      guards += e.record.guards.size();
    }
    out += "  " + fn->name + ": " + std::to_string(fn->calls) + " calls, " + std::to_string(fn->entries.size()) +
           " records (" + std::to_string(graphs) + " graphs, " + std::to_string(breaks) + " breaks), " +
           std::to_string(fn->hits) + " replayed from a record, " + std::to_string(nodes) + " graph ops, " +
           std::to_string(guards) + " guards\n";
  }
  return out;
}

}  // namespace magpy::capture

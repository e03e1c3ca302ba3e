#include "magpy/replay/session.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/Exception.h>

#include <ATen/Context.h>

#include <malloc.h>
#include <set>

#include "magpy/record/format.h"
#include "magpy/record/text.h"
#include "magpy/replay/dispatch.h"
#include "magpy/replay/plan.h"
#include "replay/cuda_graph.h"
#include "replay/memory_budget.h"
#include "replay/native_store.h"

namespace magpy::replay {

NoMatchingRecord::NoMatchingRecord(const std::string& function, std::vector<GuardMiss> misses)
    : Error([&] {
        std::string msg = "no record of " + function + " accepts this call";
        for (size_t i = 0; i < misses.size(); ++i) msg += "\n  record " + std::to_string(i) + ": " + misses[i].text();
        return msg;
      }()),
      misses_(std::move(misses)) {}

std::string summarizeMisses(const Misses& misses, size_t shown) {
  std::string out;
  for (size_t r = 0; r < misses.size() && r < shown; ++r)
    out += (r ? "; record " : "record ") + std::to_string(r) + " needs " + misses[r].path + " " + misses[r].expected +
           ", got " + misses[r].actual;
  if (misses.size() > shown) out += "; and " + std::to_string(misses.size() - shown) + " more records missed";
  return out;
}

namespace {

// A record's guards, inputs and mock over native state. Guards that read
// only the session's state are checked again only after the state changed,
// since nothing else can change it.
struct RecordState {
  RecordAccess access;
  uint64_t checkedAt = UINT64_MAX;
  std::optional<GuardMiss> stateMiss;

  RecordState(const record::Record& r, const Plan* plan)
      : access(r.guards, plan ? plan->inputPaths() : std::vector<record::AccessPath>{}, r.mock) {}
};

// Counts the tensors of a value that hold each blob.
void countBlobs(const record::Value& v, std::vector<uint32_t>& uses) {
  if (v.kind == record::Value::Kind::Tensor && v.blob < uses.size()) ++uses[v.blob];
  for (const auto& item : v.items) countBlobs(item, uses);
}

// Blobs the logged calls and graph constants read: replay materializes
// them again (each call, each plan).
std::vector<uint32_t> blobsReadAgain(const record::RecordFile& f) {
  std::vector<uint32_t> uses(f.blobs.size(), 0);
  for (const auto& call : f.calls) {
    for (const auto* v : {&call.args, &call.kwargs, &call.result, &call.rng}) countBlobs(*v, uses);
    for (const auto& u : call.updates) countBlobs(u.value, uses);
  }
  for (const auto& fn : f.functions)
    for (const auto& r : fn.records)
      for (const auto& n : r.graph.nodes)
        if (n.blob >= 0 && size_t(n.blob) < uses.size()) ++uses[size_t(n.blob)];
  return uses;
}

}  // namespace

// Moves every tensor in a value to the device (heap objects visited once).
void moveTo(Value& v, const c10::Device& device, std::set<const HeapObject*>& seen) {
  if (v.kind == Value::Kind::Tensor) {
    if (v.tensor.device() == device) return;
    at::Tensor grad = v.tensor.grad();
    v.tensor = v.tensor.to(device);
    if (grad.defined()) v.tensor.mutable_grad() = grad.to(device);
    return;
  }
  if (!v.heap || !seen.insert(v.heap.get()).second) return;
  for (auto& item : v.heap->items) moveTo(item, device, seen);
}

struct Session::Impl {
  record::RecordFile file;
  c10::Device device{c10::kCPU};
  std::vector<Value> selves;
  Globals globals;
  // plans[f][r]; null for records that cannot run natively (graph breaks)
  std::vector<std::vector<std::unique_ptr<Plan>>> plans;
  std::vector<std::vector<RecordState>> records;
  std::vector<std::vector<std::unique_ptr<CudaGraphRunner>>> cudaGraphs;  // per record, or null
  uint64_t stateVersion = 0;  // bumped whenever state may have changed
  bool scriptGradMode = false;  // as the call log last set it (CallState::scriptGradMode)
  bool scriptInferenceMode = false;
  uint64_t memoryBudget = 0;
  uint64_t buildBudget = 0;  // materializeBudget()
  SessionTiming timing;

  struct Records;  // for dispatch.h

  CallState stateFor(size_t f, std::vector<Value> args, Value kwargs) {
    if (!device.is_cpu()) {
      std::set<const HeapObject*> seen;
      for (auto& a : args) moveTo(a, device, seen);
      moveTo(kwargs, device, seen);
    }
    CallState s;
    s.self = selves[f];
    s.args = std::move(args);
    s.kwargs = std::move(kwargs);
    s.globals = &globals;
    s.module = file.functions[f].module;
    s.scriptGradMode = scriptGradMode;
    s.scriptInferenceMode = scriptInferenceMode;
    return s;
  }

  std::optional<GuardMiss> missFor(size_t f, size_t r, Resolution<NativeStore>& values) {
    const record::Record& rec = file.functions[f].records[r];
    if (!plans[f][r])
      return GuardMiss{"(record)", "no graph breaks", std::to_string(rec.breaks.size()) + " graph breaks, which need Python: " +
                                                         record::toString(rec.breaks.front())};
    RecordState& g = records[f][r];
    if (g.checkedAt != stateVersion) {
      g.stateMiss = g.access.firstMiss(values, RecordAccess::Guards::OnState);
      g.checkedAt = stateVersion;
    }
    if (g.stateMiss) return g.stateMiss;
    return g.access.firstMiss(values, RecordAccess::Guards::PerCall);
  }
};

namespace {

// Tensors built from the file's blobs (state, constants, logged values)
// may take a few times the blobs' own bytes, never more than the memory
// budget: a record naming one blob from many values would otherwise make
// gigabytes from a small file.
uint64_t materializeBudget(const record::RecordFile& f, uint64_t memoryBudget) {
  if (!memoryBudget) return 0;
  uint64_t blobBytes = 0;
  for (auto& b : f.blobs) blobBytes += b.bytes.size();
  return std::min(memoryBudget, 4 * blobBytes + (uint64_t(256) << 20));
}

// Runs `build` under the materialization budget, naming what was built.
template <typename F>
auto withinBuildBudget(uint64_t budget, const std::string& what, F&& build) {
  MemoryBudgetScope scope(budget);
  try {
    return build();
  } catch (const Error& e) {
    throw Error(what + ": " + e.what());
  }
}

}  // namespace

Session::Session(record::RecordFile file, const SessionOptions& options) : impl_(std::make_unique<Impl>()) {
  impl_->file = std::move(file);
  const auto& f = impl_->file;
  try {
    impl_->device = c10::Device(options.device);
  } catch (const c10::Error&) {
    throw Error("unknown device '" + options.device + "' (use cpu, cuda or cuda:N)");
  }
  if (impl_->device.is_cuda() && !at::hasCUDA())
    throw Error("device " + options.device + " asked for, but this libtorch has no CUDA support or no GPU is visible");
  impl_->memoryBudget = options.memoryBudget;
  impl_->buildBudget = materializeBudget(f, options.memoryBudget);
  MemoryBudgetScope building(impl_->buildBudget);
  PlanOptions planOptions{options.passes, true, options.device, options.trustRecord, options.backend, options.timeBudget};
  planOptions.pageOutReplacedState = true;
  // The entry state's tensors take the bytes of blobs nothing else reads
  // (most weights), so a session holds its weights once; blobs only the
  // state reads go once it is built.
  std::vector<uint32_t> readAgain = blobsReadAgain(f), stateUses(f.blobs.size(), 0);
  for (auto& fn : f.functions) countBlobs(fn.self, stateUses);
  for (auto& m : f.globals) countBlobs(m.globals, stateUses);
  std::vector<bool> adoptable(f.blobs.size());
  for (size_t b = 0; b < f.blobs.size(); ++b) adoptable[b] = stateUses[b] == 1 && readAgain[b] == 0;
  try {
    for (auto& fn : impl_->file.functions) impl_->selves.push_back(materializeAdopting(fn.self, impl_->file, adoptable));
    for (auto& m : impl_->file.globals) impl_->globals.modules[m.module] = materializeAdopting(m.globals, impl_->file, adoptable);
  } catch (const Error& e) {
    throw Error(std::string("building the record's state: ") + e.what());
  }
  for (size_t b = 0; b < f.blobs.size(); ++b)
    if (readAgain[b] == 0) std::string().swap(impl_->file.blobs[b].bytes);
  for (auto& fn : f.functions) {
    std::vector<std::unique_ptr<Plan>> plans;
    std::vector<RecordState> records;
    std::vector<std::unique_ptr<CudaGraphRunner>> graphs;
    for (size_t ri = 0; ri < fn.records.size(); ++ri) {
      const record::Record& r = fn.records[ri];
      try {
        plans.push_back(r.breaks.empty() ? std::make_unique<Plan>(r.graph, f.blobs, planOptions) : nullptr);
      } catch (const Error& e) {
        throw Error(fn.name + " record " + std::to_string(ri) + ": " + e.what());
      }
      records.emplace_back(r, plans.back().get());
      bool cudaGraph = plans.back() && !plans.back()->dynamic() && !plans.back()->differentiates() &&
                       impl_->device.is_cuda() && options.cudaGraphs;
      graphs.push_back(cudaGraph ? CudaGraphRunner::make(*plans.back(), r.graph) : nullptr);
    }
    impl_->plans.push_back(std::move(plans));
    impl_->records.push_back(std::move(records));
    impl_->cudaGraphs.push_back(std::move(graphs));
  }

  if (!impl_->device.is_cpu()) {
    std::set<const HeapObject*> seen;
    for (auto& s : impl_->selves) moveTo(s, impl_->device, seen);
    for (auto& [name, g] : impl_->globals.modules) moveTo(g, impl_->device, seen);
  }
}

Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

Session Session::open(const std::string& path, const SessionOptions& options) {
  record::RecordFile file = record::readRecordFile(path);
  try {
    Session session(std::move(file), options);
    // Reading held the file's bytes and its decompressed body beside the
    // parsed record. Freed, they stay resident in the heap where the trim
    // threshold is raised (magpy-run raises it so that calls keep their
    // large temporaries): as much memory as the record again, until exit.
    malloc_trim(0);
    return session;
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

const SessionTiming& Session::timing() const { return impl_->timing; }

const std::vector<std::string>& Session::optimizations(size_t function, size_t record) const {
  static const std::vector<std::string> kNone;
  const auto& plan = impl_->plans.at(function).at(record);
  return plan ? plan->optimizations() : kNone;
}

const record::RecordFile& Session::file() const { return impl_->file; }

size_t Session::findFunction(const std::string& name) const { return record::findFunction(impl_->file, name); }

// A function's native records as dispatch.h's Records.
struct Session::Impl::Records {
  using Result = CallOutcome;
  static constexpr bool kRunsPython = false;

  Impl& p;
  size_t f;
  const NativeStore& store;
  std::optional<Resolution<NativeStore>> values;  // the record being tried

  size_t size() const { return p.plans[f].size(); }
  const Plan* plan(size_t r) const { return p.plans[f][r].get(); }
  std::optional<GuardMiss> check(size_t r) {
    values.emplace(store, p.records[f][r].access.tree());
    return p.missFor(f, r, *values);
  }
  std::vector<c10::IValue> run(size_t r) {
    MemoryBudgetScope budget(p.memoryBudget);
    std::vector<c10::IValue> inputs = p.records[f][r].access.inputs(*values);
    if (p.plans[f][r]->differentiates()) {  // a training step: autograd, in the script's grad mode
      c10::AutoGradMode scriptMode(store.state().scriptGradMode);
      return p.plans[f][r]->runWith(inputs, &values->symbols());
    }
    c10::impl::ExcludeDispatchKeyGuard belowAutograd(c10::autograd_dispatch_keyset);
    if (auto& cudaGraph = p.cudaGraphs[f][r]) return cudaGraph->run(inputs);
    return p.plans[f][r]->runWith(inputs, &values->symbols());
  }
  void sizesDiffer(size_t) {}
  CallOutcome mock(size_t r, const std::vector<c10::IValue>& outputs) {
    auto mock = p.records[f][r].access.mock(outputs, *values);
    if (mock.stateChanged || p.plans[f][r]->changesGeometry()) ++p.stateVersion;
    return {std::move(*mock.result), r, p.plans[f][r]->ranCompiled()};
  }
  [[noreturn]] void fail(size_t r, const std::string& what) {
    throw Error(p.file.functions[f].name + " record " + std::to_string(r) + ": " + what);
  }
};

CallOutcome Session::call(size_t function, std::vector<Value> args, Value kwargs) {
  Impl& p = *impl_;
  // Native replay computes with grad mode off; guards read the script's
  // grad mode (CallState::scriptGradMode), so a record made by code that
  // decided on grad mode serves only calls the script made in that mode.
  // (Not InferenceMode: its tensors have no version counters, which
  // folding and users rely on.)
  at::NoGradGuard noGrad;
  CallState state = p.stateFor(function, std::move(args), std::move(kwargs));
  NativeStore store(state);
  Impl::Records records{p, function, store, std::nullopt};
  Misses misses;
  p.timing.calls++;
  if (auto outcome = dispatch(records, misses, p.timing)) return std::move(*outcome);
  throw NoMatchingRecord(p.file.functions[function].name, std::move(misses));
}

std::vector<std::optional<GuardMiss>> Session::explain(size_t function, const std::vector<Value>& args,
                                                       const Value& kwargs) {
  Impl& p = *impl_;
  at::NoGradGuard noGrad;  // as call() checks them
  CallState state = p.stateFor(function, args, kwargs);
  NativeStore store(state);
  std::vector<std::optional<GuardMiss>> out;
  for (size_t r = 0; r < p.plans[function].size(); ++r) {
    Resolution<NativeStore> values(store, p.records[function][r].access.tree());
    out.push_back(p.missFor(function, r, values));
  }
  return out;
}

void Session::setScriptGradMode(bool on) {
  impl_->scriptGradMode = on;
  ++impl_->stateVersion;
}

void Session::applyLoggedUpdates(size_t call, bool sharedOnly) {
  Impl& p = *impl_;
  MemoryBudgetScope building(p.buildBudget);
  const record::Value& rng = p.file.calls.at(call).rng;
  if (rng.kind == record::Value::Kind::Tensor && !sharedOnly) {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    generator.set_state(materialize(rng, p.file).tensor);
  }
  for (auto& u : p.file.calls.at(call).updates) {
    if (sharedOnly && u.path.root != record::AccessPath::Root::Global && u.path.root != record::AccessPath::Root::Runtime)
      continue;
    bool gradMode = u.path == record::AccessPath::runtime("grad_enabled");
    if (gradMode || u.path == record::AccessPath::runtime("inference_mode")) {  // the script's, for guards
      const record::Value& v = u.value;
      if (v.kind != record::Value::Kind::Atom || v.atom.kind != record::Atom::Kind::Bool)
        throw Error("a logged update sets " + record::toString(u.path) + " to something not a bool");
      if (gradMode) setScriptGradMode(v.atom.i != 0);
      else p.scriptInferenceMode = v.atom.i != 0;
      ++p.stateVersion;
      continue;
    }
    size_t f = u.function >= 0 ? size_t(u.function) : p.file.calls[call].function;
    CallState state = p.stateFor(f, {}, Value::dict({}, {}));
    // State no record read when it was first read (read only by records
    // with graph breaks) is not native state: records that read it later
    // find it missing and miss.
    if (!parentExists(u.path, state)) continue;
    switch (u.how) {
      case record::StateUpdate::How::Replace: assign(u.path, materialize(u.value, p.file), state); break;
      case record::StateUpdate::How::Remove: remove(u.path, state); break;
      case record::StateUpdate::How::Refill: refill(u.path, materialize(u.value, p.file), state); break;
    }
    ++p.stateVersion;
  }
}

namespace {

// Why native replay cannot run a call the way capture ran it with record
// r, or "": r needs Python (graph breaks).
std::string whyNotNative(const record::Record& r) {
  return r.breaks.empty() ? "" : record::toString(r.breaks.front());
}

}  // namespace

std::vector<bool> Session::replayLog(const std::function<bool(const LoggedStep&)>& visit, size_t end) {
  const record::RecordFile& f = impl_->file;
  std::vector<bool> stopped(f.functions.size(), false);
  for (size_t i = 0; i < f.calls.size() && i < end; ++i) {
    const record::LoggedCall& logged = f.calls[i];
    if (stopped[logged.function]) {
      applyLoggedUpdates(i, true);  // other functions see the globals it changed
      continue;
    }
    LoggedStep step;
    step.call = i;
    try {
      applyLoggedUpdates(i);
      step.outcome = call(logged.function, loggedArgs(i), loggedKwargs(i));
    } catch (const NoMatchingRecord& e) {
      step.kind = LoggedStep::Kind::NoRecord;
      step.misses = e.misses();
    } catch (const Error& e) {
      throw Error("logged call " + std::to_string(i) + ": " + e.what());
    }
    const auto& records = f.functions[logged.function].records;
    if (step.kind == LoggedStep::Kind::Replayed && logged.record >= 0 && int(step.outcome.record) != logged.record) {
      std::string why = whyNotNative(records.at(size_t(logged.record)));
      if (!why.empty()) {
        step.kind = LoggedStep::Kind::NeedsPython;
        step.why = why;
      }
    }
    if (step.kind != LoggedStep::Kind::Replayed) stopped[logged.function] = true;
    if (!visit(step)) break;
  }
  return stopped;
}

// Callers may change what they get: guards on state are checked afresh.
Value& Session::self(size_t function) {
  ++impl_->stateVersion;
  return impl_->selves.at(function);
}
Globals& Session::globals() {
  ++impl_->stateVersion;
  return impl_->globals;
}

Value Session::materializeLogged(const record::Value& v, const char* what) const {
  return withinBuildBudget(impl_->buildBudget, std::string("building its ") + what,
                           [&] { return materialize(v, impl_->file); });
}
std::vector<Value> Session::loggedArgs(size_t call) const {
  return materializeLogged(impl_->file.calls.at(call).args, "arguments").heap->items;
}
Value Session::loggedKwargs(size_t call) const { return materializeLogged(impl_->file.calls.at(call).kwargs, "keyword arguments"); }
Value Session::loggedResult(size_t call) const { return materializeLogged(impl_->file.calls.at(call).result, "result"); }

}  // namespace magpy::replay

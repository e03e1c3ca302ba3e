#include "replay/compiled_graph.h"

#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/frozen_conv_add_relu_fusion.h>
#include <torch/csrc/jit/passes/frozen_graph_optimizations.h>
#include <torch/csrc/jit/passes/frozen_linear_transpose.h>
#include <torch/csrc/jit/passes/frozen_ops_to_mkldnn.h>
#include <torch/csrc/jit/runtime/interpreter.h>

#include <malloc.h>

#include <algorithm>
#include <map>

#include "magpy/record/op_policy.h"
#include "magpy/replay/state.h"
#include "magpy/support/error.h"
#include "replay/page_out.h"

namespace magpy::replay {

namespace jit = torch::jit;

std::string loweringRefusal(const std::vector<Step>& steps, bool dynamic) {
  for (const Step& step : steps) {
    if (step.control != Control::None)
      return step.node + " bounds a loop or a branch, which the compiled backend does not lower yet";
    if (step.number != NumberOp::None) return step.node + " is Python number arithmetic, which replay checks per call";
    if (step.backward) return step.node + " runs autograd's backward, which the compiled backend does not lower";
    if (step.collective) return step.node + " is a collective, which replay runs and waits for per call";
    if (step.expect != Expect::None) return step.node + " checks what the program read into Python, which replay does per call";
    if (dynamic && step.op && record::mayHaveDataDependentSizes(step.op->schema().name(), step.op->schema().overload_name()))
      return step.node + " gives results whose sizes depend on tensor contents, in a record with dynamic sizes";
    if (step.check == record::ArgumentCheck::Geometry)
      return step.node + " makes a view whose geometry the record gives, which replay checks per call";
    if (step.check == record::ArgumentCheck::BatchSizes) return step.node + " takes batch sizes replay checks per call";
    for (const Operand& op : step.operands)
      if (op.kind == Operand::Kind::WrappedNumber) return step.node + " takes a lifted number";
  }
  return "";
}

namespace {

const void* storageOf(const c10::IValue& v) {
  if (!v.isTensor() || !v.toTensor().has_storage()) return nullptr;
  return v.toTensor().storage().unsafeGetStorageImpl();
}

jit::Value* constant(jit::Graph& g, const c10::IValue& v, const std::string& where) {
  try {
    return g.insertConstant(v);
  } catch (const c10::Error&) {
    throw Error(where + ": a constant of type " + v.tagKind() + " cannot be a TorchScript constant");
  }
}

// Builds the TorchScript graph of the steps: one node per operator with
// the schema's overload, lists made with prim::ListConstruct, list results
// split with prim::ListUnpack.
class Lowering {
 public:
  Lowering(const LoweringInput& plan, jit::Graph& g) : plan_(plan), g_(g), values_(plan.numSlots, nullptr) {}

  void input(int slot, jit::Value* v) { values_[size_t(slot)] = v; }

  void steps() {
    for (const Step& step : plan_.steps) lower(step);
  }

  jit::Value* value(int slot, const std::string& where) const {
    jit::Value* v = values_[size_t(slot)];
    if (!v) throw Error(where + ": reads a value no step made");
    return v;
  }

 private:
  jit::Value* list(const Operand& op, const std::string& where) {
    std::vector<jit::Value*> items;
    c10::TypePtr element = c10::TensorType::get();
    if (op.kind == Operand::Kind::OptionalTensorList) element = c10::OptionalType::ofTensor();
    if (op.kind == Operand::Kind::SizeList) element = c10::IntType::get();
    if (op.kind == Operand::Kind::NumberList && op.scalars) element = c10::NumberType::get();
    if (op.kind == Operand::Kind::NumberList && !op.scalars) element = c10::FloatType::get();
    for (size_t k = 0; k < op.slots.size(); ++k) {
      int s = op.slots[k];
      if (s >= 0) items.push_back(value(s, where));
      else if (op.kind == Operand::Kind::SizeList) items.push_back(constant(g_, c10::IValue(op.sizes[k]), where));
      else if (op.kind == Operand::Kind::NumberList) items.push_back(constant(g_, c10::IValue(op.floats[k]), where));
      else items.push_back(constant(g_, c10::IValue(), where));
    }
    return g_.insertNode(g_.createList(element, items))->output();
  }

  void lower(const Step& step) {
    const c10::FunctionSchema& schema = step.op->schema();
    std::vector<jit::Value*> args;
    for (const Operand& op : step.operands) {
      switch (op.kind) {
        case Operand::Kind::Const: args.push_back(constant(g_, op.constant, step.node)); break;
        case Operand::Kind::Slot: args.push_back(value(op.slot, step.node)); break;
        case Operand::Kind::TensorList:
        case Operand::Kind::OptionalTensorList:
        case Operand::Kind::SizeList:
        case Operand::Kind::NumberList: args.push_back(list(op, step.node)); break;
        case Operand::Kind::WrappedNumber: throw Error(step.node + ": takes a lifted number");
        case Operand::Kind::Group: throw Error(step.node + ": takes a process group");
      }
    }
    jit::Node* node = g_.insertNode(g_.create(c10::Symbol::fromQualString(schema.name()), args, schema.returns().size()));
    for (size_t r = 0; r < schema.returns().size(); ++r) node->output(r)->setType(schema.returns()[r].type());
    if (!node->maybeOperator())
      throw Error(step.node + ": TorchScript finds no overload of " + schema.name() + " for the recorded arguments");
    if (step.unpackList) {
      jit::Node* unpack = g_.insertNode(g_.createListUnpack(node->output(0), step.outputs.size()));
      for (size_t r = 0; r < step.outputs.size(); ++r) values_[size_t(step.outputs[r])] = unpack->output(r);
      return;
    }
    for (size_t r = 0; r < step.outputs.size(); ++r) values_[size_t(step.outputs[r])] = node->output(r);
  }

  const LoweringInput& plan_;
  jit::Graph& g_;
  std::vector<jit::Value*> values_;  // per slot
};

// libtorch's passes: torch.jit.freeze's (without the folding that changes
// numerics, for Exact), then (ForInference) torch.jit.optimize_for_inference's.
void freezePasses(std::shared_ptr<jit::Graph>& g, CompiledPasses passes) {
  jit::ConstantPropagation(g);
  jit::OptimizeFrozenGraph(g, /*optimize_numerics=*/passes != CompiledPasses::Exact);
  jit::EliminateDeadCode(g);
}

void inferencePasses(std::shared_ptr<jit::Graph>& g) {
  jit::FuseFrozenConvAddRelu(g);
  jit::ConvertFrozenOpsToMKLDNN(g);
  jit::FrozenLinearTranspose(g);
}

void cleanUp(std::shared_ptr<jit::Graph>& g) {
  jit::ConstantPropagation(g);
  jit::EliminateDeadCode(g);
}

// Runs libtorch's passes or code generation: its errors become magpy's.
template <class Run>
void compiling(Run&& run) {
  try {
    run();
  } catch (const c10::Error& e) {
    throw Error(std::string("libtorch could not compile the graph: ") + e.what_without_backtrace());
  }
}

template <class Visit>
void forEachTensorConstant(const jit::Graph& g, Visit&& visit) {
  for (const jit::Node* n : g.nodes())
    if (n->kind() == c10::prim::Constant && n->output()->type()->kind() == c10::TypeKind::TensorType)
      visit(n->t(c10::attr::value));
}

// The storages of the graph's tensor constants, sorted.
std::vector<const void*> constantStorages(const jit::Graph& g) {
  std::vector<const void*> out;
  forEachTensorConstant(g, [&](const at::Tensor& t) {
    if (const void* s = storageOf(c10::IValue(t))) out.push_back(s);
  });
  std::sort(out.begin(), out.end());
  return out;
}

// The inference passes copy every weight into oneDNN's layout and drop the
// sources only when they end: two copies of all the weights at once. The
// tensors the graph made itself (folded weights: no program holds them,
// `state` are the storages of those it froze, sorted) are paged out first,
// and each goes back to the file once the operator that copied it returns:
// one weight at a time is resident twice.
void inferencePassesPagingOut(std::shared_ptr<jit::Graph>& g, const std::vector<const void*>& state) {
  bool paged = false;
  forEachTensorConstant(*g, [&](const at::Tensor& t) {
    const void* s = storageOf(c10::IValue(t));
    if (s && !std::binary_search(state.begin(), state.end(), s)) paged = pageOut(t) || paged;
  });
  if (paged) malloc_trim(0);
  PagesReadGoBack goBack;
  inferencePasses(g);
}

std::string describe(const jit::Graph& g, size_t lowered, const std::string& passes) {
  std::map<std::string, size_t> kinds;
  size_t total = 0;
  for (const jit::Node* n : g.nodes()) {
    if (n->kind() == c10::prim::Constant || n->kind() == c10::prim::ListConstruct || n->kind() == c10::prim::ListUnpack ||
        n->kind() == c10::Symbol::fromQualString("prim::ConstantMKLDNNTensor"))
      continue;
    ++kinds[n->kind().toQualString()];
    ++total;
  }
  std::vector<std::pair<size_t, std::string>> order;
  for (auto& [name, count] : kinds) order.push_back({count, name});
  std::sort(order.begin(), order.end(), [](auto& a, auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  std::string out = std::to_string(lowered) + " operators lowered, " + std::to_string(total) + " after " + passes;
  for (size_t k = 0; k < order.size() && k < 6; ++k) out += (k ? ", " : ": ") + std::to_string(order[k].first) + " " + order[k].second;
  if (order.size() > 6) out += ", ...";
  return out;
}

}  // namespace

CompiledGraph::CompiledGraph(const LoweringInput& plan, const std::vector<c10::IValue>& inputs, CompiledPasses passes)
    : graph_(std::make_shared<jit::Graph>()), passes_(passes), lowered_(plan.steps.size()), pageOut_(plan.pageOutReplaced) {
  if (std::string why = loweringRefusal(plan.steps, false); !why.empty()) throw Error(why);
  Lowering lowering(plan, *graph_);
  for (size_t i = 0; i < plan.inputSlots.size(); ++i) {
    const c10::IValue& v = inputs.at(i);
    if (plan.freezable[i] && v.isTensor() && v.toTensor().defined() && v.toTensor().has_storage()) {
      const at::Tensor& t = v.toTensor();
      frozen_.push_back({i, t.unsafeGetTensorImpl(), t.unsafeGetTensorImpl()->version_counter().current_version(), storageOf(v),
                         t.data_ptr()});
      lowering.input(plan.inputSlots[i], constant(*graph_, c10::IValue(t.requires_grad() ? t.detach() : t), "frozen state"));
      continue;
    }
    jit::Value* in = graph_->addInput();
    if (v.isTensor()) in->setType(c10::TensorType::create(v.toTensor()));
    else in->setType(v.type());
    graphInputs_.push_back(i);
    lowering.input(plan.inputSlots[i], in);
  }
  for (const PlanConstant& k : plan.constants) {
    if (!k.copyPerRun) {
      lowering.input(k.slot, constant(*graph_, k.value, "a record constant"));
      continue;
    }
    jit::Value* in = graph_->addInput();
    in->setType(c10::TensorType::create(k.value.toTensor()));
    constantValues_.push_back(k.value);
    lowering.input(k.slot, in);
  }
  lowering.steps();
  for (int s : plan.outputSlots) graph_->registerOutput(lowering.value(s, "the output"));
  outputs_ = plan.outputSlots.size();
  for (auto& f : frozen_) frozenStorages_.push_back(f.storage);
  std::sort(frozenStorages_.begin(), frozenStorages_.end());
  compiling([&] {
    freezePasses(graph_, passes);
    // What freezing replaced goes before the oneDNN copies are made.
    if (pageOut_) pageOutReplaced(inputs, constantStorages(*graph_));
    if (passes == CompiledPasses::ForInference) runInferencePasses();
    cleanUp(graph_);
  });
  finish(inputs);
}

CompiledGraph::CompiledGraph(const CompiledGraph& frozen, const std::vector<c10::IValue>& inputs)
    : graph_(frozen.graph_->copy()),
      passes_(CompiledPasses::ForInference),
      graphInputs_(frozen.graphInputs_),
      constantValues_(frozen.constantValues_),
      frozen_(frozen.frozen_),
      frozenStorages_(frozen.frozenStorages_),
      outputs_(frozen.outputs_),
      lowered_(frozen.lowered_),
      pageOut_(frozen.pageOut_) {
  if (frozen.passes_ != CompiledPasses::Freeze) throw Error("the inference passes start from a graph with the freeze passes");
  // The oneDNN copies are made while the folded weights are alive: the
  // heap's free memory (what the trials ran in, kept by magpy-run's raised
  // trim threshold) goes back first, or it would stay resident beside them.
  malloc_trim(0);
  compiling([&] {
    runInferencePasses();
    cleanUp(graph_);
  });
  finish(inputs);
}

void CompiledGraph::runInferencePasses() {
  if (pageOut_) inferencePassesPagingOut(graph_, frozenStorages_);
  else inferencePasses(graph_);
}

void CompiledGraph::finish(const std::vector<c10::IValue>& inputs) {
  compiling([&] { code_ = std::make_unique<jit::Code>(graph_, "magpy_record"); });
  constantStorages_ = constantStorages(*graph_);
  forEachTensorConstant(*graph_, [&](const at::Tensor& t) {
    constantVersions_.push_back({t.unsafeGetTensorImpl(), t.unsafeGetTensorImpl()->version_counter().current_version()});
  });
  size_t pagedOut = pageOut_ ? pageOutReplaced(inputs, constantStorages_) : 0;
  const char* names[] = {"freeze passes without folding", "freeze passes", "freeze and inference passes"};
  summary_ = describe(*graph_, lowered_, names[size_t(passes_)]);
  if (pagedOut > 0) {
    char text[64];
    bool mb = pagedOut >= (1u << 20);
    std::snprintf(text, sizeof text, "; %.1f %s of state it replaced paged out", double(pagedOut) / (mb ? 1 << 20 : 1 << 10),
                  mb ? "MB" : "KB");
    summary_ += text;
  }
}

size_t CompiledGraph::pageOutReplaced(const std::vector<c10::IValue>& inputs, const std::vector<const void*>& held) {
  size_t bytes = 0;
  bool freed = false;
  std::vector<const void*> done;  // storages two frozen inputs share count once
  for (Frozen& f : frozen_) {
    if (std::binary_search(held.begin(), held.end(), f.storage)) continue;
    const at::Tensor& t = inputs[f.input].toTensor();
    bool was = pagedOut(t);
    if (!was && !pageOut(t)) continue;
    f.data = t.data_ptr();
    if (std::find(done.begin(), done.end(), f.storage) != done.end()) continue;
    done.push_back(f.storage);
    freed = freed || !was;
    dropResident(t);
    bytes += t.storage().nbytes();
  }
  // The heap keeps what it frees (magpy-run raises glibc's trim threshold):
  // the bytes paged out go back to the system here, once.
  if (freed) malloc_trim(0);
  return bytes;
}

CompiledGraph::~CompiledGraph() = default;

bool CompiledGraph::constantsIntact() const {
  return std::all_of(constantVersions_.begin(), constantVersions_.end(),
                     [](const auto& c) { return c.first->version_counter().current_version() == c.second; });
}

bool CompiledGraph::stillFrozen(const std::vector<c10::IValue>& inputs) const {
  for (const Frozen& f : frozen_) {
    const c10::IValue& v = inputs[f.input];
    if (!v.isTensor() || v.toTensor().unsafeGetTensorImpl() != f.impl || f.impl->version_counter().current_version() != f.version ||
        storageOf(v) != f.storage || v.toTensor().data_ptr() != f.data)
      return false;
  }
  for (size_t i : graphInputs_)  // a frozen tensor seen through another input could be written by the graph
    if (const void* s = storageOf(inputs[i]); s && std::binary_search(frozenStorages_.begin(), frozenStorages_.end(), s))
      return false;
  return true;
}

std::vector<c10::IValue> CompiledGraph::run(const std::vector<c10::IValue>& inputs) const {
  jit::Stack stack;
  stack.reserve(graphInputs_.size() + constantValues_.size());
  for (size_t i : graphInputs_) stack.push_back(inputs[i]);
  for (const c10::IValue& c : constantValues_) stack.emplace_back(c.toTensor().clone());
  jit::InterpreterState(*code_).run(stack);
  if (stack.size() != outputs_) throw Error("the compiled graph returned " + std::to_string(stack.size()) + " values");
  // An output the passes computed at compile time (a constant, or a view of
  // one) is the caller's own in every call, as operator by operator.
  for (c10::IValue& v : stack)
    if (const void* s = storageOf(v); s && std::binary_search(constantStorages_.begin(), constantStorages_.end(), s))
      v = v.toTensor().clone();
  return stack;
}

namespace {

// Which of the values share memory: for each value, the first earlier one
// sharing its storage (or itself).
std::vector<size_t> sharing(const std::vector<c10::IValue>& values) {
  std::vector<size_t> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    out[i] = i;
    for (size_t j = 0; j < i && out[i] == i; ++j)
      if (storageOf(values[i]) && storageOf(values[i]) == storageOf(values[j])) out[i] = j;
  }
  return out;
}

}  // namespace

std::string disagreement(const std::vector<c10::IValue>& compiled, const std::vector<c10::IValue>& reference,
                         const std::vector<c10::IValue>& compiledInputs, const std::vector<c10::IValue>& referenceInputs) {
  if (compiled.size() != reference.size()) return "it returns another number of values";
  for (size_t i = 0; i < compiled.size(); ++i) {
    const c10::IValue &a = compiled[i], &b = reference[i];
    std::string name = "result " + std::to_string(i);
    if (a.isTensor() && b.isTensor()) {
      Comparison c;
      compareTensors(a.toTensor(), b.toTensor(), Tolerance::compiled(), name, c);
      if (!c.equal()) return c.difference;
    } else if (a.isTensor() || b.isTensor() || !(a == b)) {
      return name + " differs";
    }
  }
  auto joined = [](std::vector<c10::IValue> a, const std::vector<c10::IValue>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  if (sharing(joined(compiled, compiledInputs)) != sharing(joined(reference, referenceInputs)))
    return "its results share memory with each other or with its inputs otherwise";
  return "";
}

}  // namespace magpy::replay

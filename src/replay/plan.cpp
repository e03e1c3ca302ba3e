#include "magpy/replay/plan.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/scalar_tensor.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/grad_layout_contract.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "magpy/record/graph_utils.h"
#include "magpy/record/op_policy.h"
#include "magpy/replay/guards.h"
#include "magpy/replay/tensors.h"
#include "magpy/support/error.h"
#include "magpy/support/strings.h"
#include "replay/collectives.h"
#include "replay/compiled_graph.h"
#include "replay/numbers.h"
#include "replay/plan_steps.h"

namespace magpy::replay {
namespace {

std::vector<record::SymDim> fixedSizes(const std::vector<int64_t>& shape) {
  std::vector<record::SymDim> dims(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) dims[d].offset = shape[d];
  return dims;
}

// The number a schema type is: 'i' int, 'f' float, 0 neither.
char numberType(const c10::Type& t) {
  if (t.kind() == c10::TypeKind::IntType || t.kind() == c10::TypeKind::SymIntType) return 'i';
  if (t.kind() == c10::TypeKind::FloatType) return 'f';
  return 0;
}

// How a lifted number reaches an operator argument: as itself where the
// schema takes that number (or any Scalar), wrapped where it takes a Tensor.
Operand::Kind numberOperand(const c10::Argument& param, char number, const std::string& where) {
  c10::TypePtr t = param.real_type();
  if (t->kind() == c10::TypeKind::OptionalType) t = t->containedType(0);
  if (t->kind() == c10::TypeKind::TensorType) return Operand::Kind::WrappedNumber;
  if (t->kind() == c10::TypeKind::NumberType || numberType(*t) == number) return Operand::Kind::Slot;
  throw Error(where + ": argument '" + param.name() + "' takes " + t->str() + ", the record passes a lifted " +
              (number == 'i' ? "int" : "float"));
}

bool isScalarTypeArgument(const c10::Argument& a) {
  auto type = a.real_type();
  if (type->kind() == c10::TypeKind::OptionalType) type = type->containedType(0);
  return type->kind() == c10::TypeKind::ScalarTypeType;
}

// Whether an argument is a Scalar[] (boxed as a list of Scalars, which
// kernels refuse to read as a list of floats).
bool takesScalarList(const c10::Argument& a) {
  auto list = a.real_type()->cast<c10::ListType>();
  return list && list->getElementType()->kind() == c10::TypeKind::NumberType;
}

c10::IValue scalarList(const std::vector<double>& floats) {
  c10::List<c10::Scalar> list;
  list.reserve(floats.size());
  for (double f : floats) list.push_back(f);
  return c10::IValue(std::move(list));
}

c10::IValue constantFor(const record::Arg& a, const c10::Argument& schemaArg, const std::string& where) {
  using K = record::Arg::Kind;
  switch (a.kind) {
    case K::None: return c10::IValue();
    case K::Bool: return c10::IValue(bool(a.i));
    case K::Int:
      if (takesReduceOp(schemaArg)) {
        if (!record::isRecordedReduceOp(a.i))
          throw Error(where + ": argument '" + schemaArg.name() + "' is reduce op " + std::to_string(a.i) +
                      ", which is none a record may hold");
        return reduceOpFor(a.i);
      }
      // An int where a dtype goes is one (a record from elsewhere may hold any).
      if (isScalarTypeArgument(schemaArg) && (a.i < 0 || a.i >= int64_t(c10::ScalarType::NumOptions)))
        throw Error(where + ": argument '" + schemaArg.name() + "' is dtype number " + std::to_string(a.i) +
                    ", which names no dtype");
      return c10::IValue(a.i);
    case K::Float: return c10::IValue(a.f);
    case K::Str: return c10::IValue(a.s);
    case K::IntList: return c10::IValue(a.ints);
    case K::FloatList: return takesScalarList(schemaArg) ? scalarList(a.floats) : c10::IValue(a.floats);
    case K::BoolList: {
      c10::List<bool> list;
      for (auto b : a.ints) list.push_back(b != 0);
      return c10::IValue(list);
    }
    case K::DType: return c10::IValue(dtypeFromName(a.s));
    case K::WrappedScalar: {
      // A Python number where a Tensor is expected: the same 0-dim "wrapped
      // number" tensor Python makes, so type promotion treats it as a scalar.
      c10::ScalarType type = dtypeFromName(a.s);
      at::Tensor t = c10::isFloatingType(type) ? at::scalar_tensor(a.f, at::TensorOptions().dtype(type))
                                               : at::scalar_tensor(a.i, at::TensorOptions().dtype(type));
      t.unsafeGetTensorImpl()->set_wrapped_number(true);
      return c10::IValue(t);
    }
    case K::Device:
      try {
        return c10::IValue(c10::Device(a.s));
      } catch (const c10::Error&) {
        throw Error(where + ": argument '" + schemaArg.name() + "' is device " + quote(a.s) + ", which names no device");
      }
    case K::Layout:
      if (a.s == "strided") return c10::IValue(c10::kStrided);
      throw Error(where + ": layout " + a.s + " is not supported by replay");
    case K::MemoryFormat:
      if (a.s == "contiguous_format") return c10::IValue(c10::MemoryFormat::Contiguous);
      if (a.s == "channels_last") return c10::IValue(c10::MemoryFormat::ChannelsLast);
      if (a.s == "preserve_format") return c10::IValue(c10::MemoryFormat::Preserve);
      if (a.s == "channels_last_3d") return c10::IValue(c10::MemoryFormat::ChannelsLast3d);
      throw Error(where + ": memory format " + a.s + " is not supported by replay");
    default: throw Error(where + ": argument '" + schemaArg.name() + "' is not a constant");
  }
}

bool takesStorage(const c10::FunctionSchema& schema) {
  auto isStorage = [](const c10::Argument& a) { return a.type()->kind() == c10::TypeKind::StorageType; };
  return std::any_of(schema.arguments().begin(), schema.arguments().end(), isStorage) ||
         std::any_of(schema.returns().begin(), schema.returns().end(), isStorage);
}

void refuseOutsidePolicy(const record::Node& n, const c10::FunctionSchema& schema, const std::string& where) {
  std::string why = record::outsidePolicy(n.target, n.overload);
  if (why.empty() && takesStorage(schema)) why = "takes a raw storage";
  if (const char* trusted = record::trustedArgument(n.target); why.empty() && trusted) {
    const auto& params = schema.arguments();
    for (size_t i = 0; i < params.size() && i < n.args.size(); ++i)
      if (params[i].name() == trusted && n.args[i].kind != record::Arg::Kind::None)
        why = std::string("is given its '") + trusted + "' argument, which the kernel does not check";
  }
  if (!why.empty())
    throw Error(where + ": operator " + n.opName() + " " + why + ", which magpy-run's operator policy does not allow "
                "for records from others; replay it only if you trust the record's source (--trust-record)");
}

// The elements a view with these sizes, strides and offset reaches must lie
// inside its base's storage (libtorch checks this for as_strided, not for
// every operator that takes strides).
void checkGeometry(const Step& step, const std::vector<c10::IValue>& stack) {
  bool scatter = step.name.rfind("aten::as_strided_scatter", 0) == 0;
  size_t first = scatter ? 2 : 1;  // as_strided_scatter(self, src, size, stride, offset)
  if (stack.size() < first + 2 || !stack[0].isTensor() || !stack[first].isIntList() || !stack[first + 1].isIntList()) return;
  const at::Tensor& base = stack[0].toTensor();
  auto sizes = stack[first].toIntVector(), strides = stack[first + 1].toIntVector();
  int64_t offset = base.storage_offset();
  if (stack.size() > first + 2 && stack[first + 2].isInt()) offset = stack[first + 2].toInt();
  auto bad = [&](const std::string& why) { throw Error(step.name + " " + why); };
  if (sizes.size() != strides.size()) bad("has " + std::to_string(strides.size()) + " strides for " + std::to_string(sizes.size()) + " sizes");
  int64_t last = offset;  // the furthest element reached
  bool empty = false;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 0 || strides[i] < 0) bad("has a negative size or stride");
    if (sizes[i] == 0) empty = true;
    int64_t reach;
    if (__builtin_mul_overflow(sizes[i] ? sizes[i] - 1 : 0, strides[i], &reach) || __builtin_add_overflow(last, reach, &last))
      bad("reaches past any storage");
  }
  if (offset < 0) bad("has a negative storage offset");
  uint64_t needed = 0;
  if (!empty && __builtin_mul_overflow(uint64_t(last) + 1, uint64_t(base.element_size()), &needed)) bad("reaches past any storage");
  if (!base.has_storage() || needed > base.storage().nbytes())
    bad("views " + std::to_string(needed) + " bytes of a " + std::to_string(base.has_storage() ? base.storage().nbytes() : 0) +
        "-byte storage");
}

// _pad_packed_sequence(data, batch_sizes, ...) walks batch_sizes with raw
// pointers: it must be what _pack_padded_sequence makes, one or more
// positive sizes that never grow, covering data's rows exactly.
void checkBatchSizes(const Step& step, const std::vector<c10::IValue>& stack) {
  auto bad = [&](const std::string& why) { throw Error(step.name + "'s batch sizes " + why); };
  if (stack.size() < 2 || !stack[0].isTensor() || !stack[1].isTensor()) bad("are missing");
  const at::Tensor& data = stack[0].toTensor();
  const at::Tensor& sizes = stack[1].toTensor();
  if (sizes.dim() != 1 || !sizes.is_cpu() || sizes.scalar_type() != at::kLong || sizes.numel() < 1 || data.dim() < 1)
    bad("are not a non-empty 1-D CPU int64 tensor beside data with rows");
  at::Tensor dense = sizes.contiguous();
  const int64_t* s = dense.data_ptr<int64_t>();
  int64_t rows = 0;
  for (int64_t i = 0; i < dense.numel(); ++i) {
    if (s[i] < 1 || (i > 0 && s[i] > s[i - 1])) bad("are not positive and non-increasing");
    if (__builtin_add_overflow(rows, s[i], &rows)) bad("overflow");
  }
  if (rows != data.size(0)) bad("cover " + std::to_string(rows) + " rows of data with " + std::to_string(data.size(0)));
}

// Python's semantics: int arithmetic stays exact, / gives a float, //
// floors. Where Python would do something a graph cannot (raise
// ZeroDivisionError, grow an int beyond 64 bits, divide ints beyond 2^53
// exactly), the record does not describe the call: a miss, so the call runs
// as Python does.
// decided: a check found the program would decide otherwise (not that the
// record computes wrong sizes).
[[noreturn]] void notThisCall(const std::string& why, bool decided = false) {
  SizeMismatch e(why + ": the record does not describe this call");
  e.decidedOtherwise = decided;
  throw e;
}

std::string joinSizes(c10::IntArrayRef sizes) {
  std::string out;
  for (int64_t d : sizes) out += (out.empty() ? "" : ", ") + std::to_string(d);
  return "[" + out + "]";
}

// The program read this value into Python at capture and decided with it:
// another call's value is not the one the record holds.
void expect(const Step& step, const std::vector<c10::IValue>& operands) {
  if (step.expect == Expect::True) {
    if (operands[0].toBool()) return;
    notThisCall("the comparison the program decided on at capture does not hold for this call", true);
  }
  const at::Tensor& t = operands[0].toTensor();
  if (step.expect == Expect::Sizes) {
    if (t.sizes() == c10::IntArrayRef(step.expectedSizes)) return;
    notThisCall("the program read sizes " + joinSizes(step.expectedSizes) + " of a result whose shape depends on "
                "tensor contents, and this call's are " + joinSizes(t.sizes()), true);
  }
  const at::Tensor& seen = operands[1].toTensor();
  if (t.sizes() == seen.sizes() && t.scalar_type() == seen.scalar_type() && at::equal(t, seen.to(t.device()))) return;
  notThisCall("the program read the contents of this tensor into Python, and this call's differ from the capture's", true);
}

bool isOptionalTensorList(const c10::Argument& a) {
  auto list = a.type()->cast<c10::ListType>();
  return list && list->getElementType()->kind() == c10::TypeKind::OptionalType;
}

}  // namespace

std::string autogradHooks(const at::Tensor& leaf, bool reducesGradients) {
  const auto* meta = torch::autograd::impl::get_autograd_meta(leaf);
  if (!meta) return "";
  if (!meta->hooks_.empty() || meta->retains_grad_ >= 0) return "the tensor has hooks (register_hook, retain_grad)";
  auto accumulator = meta->grad_accumulator_.lock();
  size_t allowed = reducesGradients ? 1 : 0;
  if (accumulator && (!accumulator->pre_hooks().empty() || accumulator->post_hooks().size() > allowed))
    return "the node that accumulates its gradient has hooks";
  return "";
}

namespace {

// magpy.backward: libtorch's autograd engine over the graph this call's
// operators built, each gradient then laid out as autograd's accumulation
// stores a first one (in grad mode off, as the engine runs it).
void runBackward(const Step& step, std::vector<c10::IValue>& slots, std::vector<c10::IValue>& stack) {
  const at::Tensor& root = stack[0].toTensor();
  if (!root.requires_grad())
    throw Error("the tensor it differentiates does not require grad in this call: replay it with autograd, "
                "from state whose leaves require grad");
  at::Tensor grad = stack[1].isNone() ? at::Tensor() : stack[1].toTensor();
  if (!grad.defined()) {
    if (root.numel() != 1) throw Error("a gradient can be made only for a one-element tensor");
    grad = at::ones_like(root, at::MemoryFormat::Preserve);
  }
  std::vector<at::Tensor> leaves = stack[2].toTensorVector();
  auto grads = torch::autograd::grad({root}, leaves, {grad}, stack[3].toBool(), false, /*allow_unused=*/true);
  at::NoGradGuard engineMode;
  for (size_t k = 0; k < leaves.size(); ++k) {
    if (!grads[k].defined())
      throw Error("autograd gives leaf " + std::to_string(k) + " no gradient in this call, where capture saw one");
    slots[size_t(step.outputs[k])] = torch::autograd::utils::clone_obey_contract(grads[k], leaves[k]);
  }
}

// Runs one step on the slots: its operands onto the stack, the operator, its
// results into their slots. Failures are the caller's to attribute to the
// step's node.
void runStep(const Step& step, std::vector<c10::IValue>& slots, std::vector<c10::IValue>& stack) {
  stack.clear();
  for (const Operand& op : step.operands) {
    switch (op.kind) {
      case Operand::Kind::Const: stack.push_back(op.constant); break;
      case Operand::Kind::Slot: stack.push_back(slots[size_t(op.slot)]); break;
      case Operand::Kind::TensorList: {
        c10::List<at::Tensor> list;
        list.reserve(op.slots.size());
        for (int s : op.slots) list.push_back(slots[size_t(s)].toTensor());
        stack.emplace_back(std::move(list));
        break;
      }
      case Operand::Kind::OptionalTensorList: {
        c10::List<c10::optional<at::Tensor>> list;
        for (int s : op.slots)
          list.push_back(s < 0 ? c10::optional<at::Tensor>() : c10::optional<at::Tensor>(slots[size_t(s)].toTensor()));
        stack.emplace_back(std::move(list));
        break;
      }
      case Operand::Kind::WrappedNumber: {
        const c10::IValue& v = slots[size_t(op.slot)];
        at::Tensor t = v.isInt() ? at::scalar_tensor(v.toInt(), at::TensorOptions().dtype(at::kLong))
                                 : at::scalar_tensor(v.toDouble(), at::TensorOptions().dtype(at::kDouble));
        t.unsafeGetTensorImpl()->set_wrapped_number(true);
        stack.emplace_back(std::move(t));
        break;
      }
      case Operand::Kind::SizeList: {  // sizes read from this call's tensors, and constants
        c10::List<int64_t> list;
        list.reserve(op.slots.size());
        for (size_t k = 0; k < op.slots.size(); ++k) {
          if (op.slots[k] < 0) {
            list.push_back(op.sizes[k]);
            continue;
          }
          const c10::IValue& v = slots[size_t(op.slots[k])];
          if (!v.isInt()) throw Error("a size list entry is not an integer");
          list.push_back(v.toInt());
        }
        stack.emplace_back(std::move(list));
        break;
      }
      case Operand::Kind::Group: {
        c10::IValue group = currentGroup();
        if (group.isNone())
          throw Error("it is a collective, and this process has no process group: start magpy-run once per rank "
                      "with torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), or with --nproc-per-node");
        stack.push_back(std::move(group));
        break;
      }
      case Operand::Kind::NumberList: {
        std::vector<double> floats = op.floats;
        for (size_t k = 0; k < op.slots.size(); ++k)
          if (op.slots[k] >= 0) floats[k] = slots[size_t(op.slots[k])].toDouble();
        stack.push_back(op.scalars ? scalarList(floats) : c10::IValue(std::move(floats)));
        break;
      }
    }
  }
  if (step.number != NumberOp::None) {
    slots[size_t(step.outputs[0])] = numberOp(step.number, stack[0], stack[1]);
    return;
  }
  if (step.expect != Expect::None) return expect(step, stack);
  if (step.backward) return runBackward(step, slots, stack);
  if (step.check == record::ArgumentCheck::Geometry) checkGeometry(step, stack);
  if (step.check == record::ArgumentCheck::BatchSizes) checkBatchSizes(step, stack);
  if (step.grad == record::GradMode::Ambient) {
    step.op->callBoxed(&stack);
  } else {
    c10::AutoGradMode region(step.grad == record::GradMode::On);  // restored on every exit
    step.op->callBoxed(&stack);
  }
  if (step.collective) waitFor(stack[1]);
  if (step.unpackList || step.collective) {
    auto list = stack[0].toTensorVector();
    if (list.size() != step.outputs.size())  // x.chunk(n): another n
      throw SizeMismatch(step.name + " returned " + std::to_string(list.size()) + " tensors, the record expects " +
                         std::to_string(step.outputs.size()));
    for (size_t r = 0; r < list.size(); ++r) slots[size_t(step.outputs[r])] = std::move(list[r]);
  } else {
    for (size_t r = 0; r < step.outputs.size(); ++r) slots[size_t(step.outputs[r])] = std::move(stack[r]);
  }
}

}  // namespace

struct Plan::Impl {
  bool differentiates = false;
  std::vector<size_t> leafInputs;  // inputs a magpy.backward accumulates into (indices into inputSlots)
  bool reducesGradients = false;   // runs collectives (DistributedDataParallel's reduction): autogradHooks
  mutable std::vector<std::string> applied;
  std::vector<PlanConstant> constants;
  // Folding: the inputs folded steps read, and their results as last computed.
  std::vector<size_t> foldInputs;  // indices into inputSlots
  std::vector<int> foldOutputs;    // slots
  mutable std::vector<std::pair<const c10::TensorImpl*, uint32_t>> foldKey;
  mutable std::vector<c10::IValue> foldValues;
  std::vector<int> inputSlots;
  std::vector<char> inputNumbers;  // per input: 0 a tensor, 'i'/'f' a lifted int/float
  std::vector<record::AccessPath> inputPaths;
  std::vector<Step> steps;
  std::vector<int> outputSlots;
  size_t numSlots = 0;
  size_t numLoops = 0;
  bool changesGeometry = false;
  bool dynamic = false;
  bool stopsCleanly = true;

  // The compiled backend (compiled_graph.h), chosen on the first run.
  Backend backend = Backend::Aten;
  bool pageOutReplaced = false;    // PlanOptions::pageOutReplacedState
  std::vector<bool> freezable;     // per input: a state tensor the graph neither writes nor returns
  std::vector<bool> writtenInput;  // per input: written or returned by the graph
  std::vector<size_t> writtenInputs;  // the inputs the graph writes
  std::string refusal;             // why the steps cannot be lowered
  enum class Use : uint8_t { Undecided, Steps, Compiled };
  mutable Use use = Use::Undecided;
  mutable bool ranCompiled = false;
  // Compiled graphs, per binding of the symbols (one for a static graph).
  struct Compiled {
    SymbolValues binding;
    std::unique_ptr<CompiledGraph> graph;
  };
  mutable std::vector<Compiled> compiled;
  mutable int refreezes = 0;
  mutable CompiledPasses passes = CompiledPasses::Exact;  // those the first call chose
  static constexpr size_t kMaxBindings = 8;
  double timeBudget = 0;  // seconds per run, 0: none (PlanOptions)

  std::vector<c10::IValue> runSteps(std::vector<c10::IValue> inputs, const SymbolValues* symbols) const;
  std::vector<c10::IValue> decide(std::vector<c10::IValue> inputs, const SymbolValues* symbols) const;
  struct FirstCall;
  struct Candidate {
    std::unique_ptr<CompiledGraph> graph;  // null where it failed or disagreed
    double seconds = 0;
    std::string failure;
  };
  Candidate tryCompiled(CompiledPasses passes, const FirstCall& call,
                        std::unique_ptr<CompiledGraph> frozenFrom = nullptr) const;
  static std::string candidates(const Candidate (&tried)[3]);
  std::vector<c10::IValue> runCompiled(std::vector<c10::IValue> inputs, const SymbolValues* symbols) const;
  // The steps' folded results are theirs: a compiled graph folds its own.
  // Dropped before one is made (a later run of the steps computes them again).
  void dropFolded() const {
    foldValues.clear();
    foldKey.clear();
  }
  LoweringInput lowering() const {
    return {steps, inputSlots, constants, outputSlots, numSlots, freezable, pageOutReplaced};
  }
  struct Builder;
};


// Makes a plan's steps from a graph, node by node: a slot for each value,
// an operand for each argument, and where each slot is last read.
struct Plan::Impl::Builder {
  Impl& plan;
  const OptimizedGraph& optimized;
  const std::vector<record::TensorBlob>& blobs;
  const PlanOptions& options;
  c10::Device device;
  StorageFacts storage;                     // of the optimized graph
  std::vector<std::vector<int>> nodeSlots;  // per node: the slots of its values
  std::vector<int> lastUse;                 // per slot: the last step that reads it
  // Per slot: 0 a tensor, or the Python number it holds ('i' int, 'f'
  // float); lifted: computed from a number the call's state supplies.
  std::vector<char> slotNumber;
  std::vector<bool> slotLifted;
  std::vector<size_t> openLoops;     // their LoopBegin steps
  // Branches open: their IfBegin steps, and their IfElse steps once the else side began (else SIZE_MAX).
  std::vector<std::pair<size_t, size_t>> openBranches;

  Builder(Impl& p, const OptimizedGraph& g, StorageFacts facts, const std::vector<record::TensorBlob>& b,
          const PlanOptions& o)
      : plan(p), optimized(g), blobs(b), options(o), device(o.device), storage(std::move(facts)),
        nodeSlots(g.graph.nodes.size()) {}

  int newSlot(char number = 0, bool lifted = false) {
    lastUse.push_back(-1);
    slotNumber.push_back(number);
    slotLifted.push_back(lifted);
    return int(plan.numSlots++);
  }
  int slotOf(int64_t node, const std::string& where) const {
    if (node < 0 || size_t(node) >= nodeSlots.size() || nodeSlots[size_t(node)].size() != 1)
      throw Error(where + ": uses a value that is not a single tensor");
    return nodeSlots[size_t(node)][0];
  }

  void build() {
    const record::Graph& graph = optimized.graph;
    for (size_t ni = 0; ni < graph.nodes.size(); ++ni) {
      const record::Node& n = graph.nodes[ni];
      std::string where = "node " + record::nameAndSource(n);
      try {
        node(ni, where);
      } catch (const c10::Error& e) {  // libtorch refused what the record says: name the node
        throw Error(where + ": " + messageOf(e));
      }
    }
    if (!openLoops.empty()) throw Error("the graph's loop " + plan.steps[openLoops.back()].node + " never ends");
    if (!openBranches.empty()) throw Error("the graph's branch " + plan.steps[openBranches.back().first].node + " never ends");
    foldAndRelease();
  }

  void node(size_t ni, const std::string& where) {
    const record::Node& n = optimized.graph.nodes[ni];
    switch (n.kind) {
      case record::NodeKind::Placeholder:
      case record::NodeKind::GetAttr: input(ni, where); break;
      case record::NodeKind::Output:
        for (auto& a : n.args) {
          if (a.kind != record::Arg::Kind::Node) throw Error(where + ": outputs must be graph values");
          plan.outputSlots.push_back(slotOf(a.i, where));
          if (slotNumber[size_t(plan.outputSlots.back())] == 'l')
            throw Error(where + ": a loop's scan list goes to an operator's Tensor[] only");
        }
        break;
      case record::NodeKind::CallMethod:
      case record::NodeKind::CallModule:
        throw Error(where + ": " + record::toString(n.kind) + " nodes cannot be replayed natively");
      case record::NodeKind::CallFunction:
        if (n.target == "getitem") getitem(ni, where);
        else if (n.target == record::kLoop) loopBegin(ni, where);
        else if (n.target == record::kCarried) carried(ni, where);
        else if (n.target == record::kLoopEnd) loopEnd(ni, where);
        else if (n.target == record::kIf) ifBegin(ni, where);
        else if (n.target == record::kIfElse || n.target == record::kIfEnd) ifSide(ni, where);
        else if (record::isCheck(n.target)) checkStep(ni, where);
        else if (n.target == record::kBackward) backwardStep(ni, where);
        else if ((!n.number.empty() && !record::readsItem(n)) || record::isNumberOp(n.target)) numberStep(ni, where);
        else opStep(ni, where);
        break;
    }
  }

  void input(size_t ni, const std::string& where) {
    const record::Node& n = optimized.graph.nodes[ni];
    int s = newSlot(n.number.empty() ? 0 : n.number[0], !n.number.empty());
    nodeSlots[ni] = {s};
    if (n.blob >= 0 && !n.number.empty()) throw Error(where + ": a number input holds tensor contents");
    if (n.blob >= 0) {
      if (size_t(n.blob) >= blobs.size() || n.outputs.empty()) throw Error(where + ": constant without contents");
      plan.constants.push_back({s, c10::IValue(tensorFromBlob(blobs[size_t(n.blob)], n.outputs[0]).to(device)), storage.writtenOrEscaping[ni]});
      return;
    }
    plan.inputSlots.push_back(s);
    plan.inputNumbers.push_back(slotNumber[size_t(s)]);
    plan.freezable.push_back(options.freezeState && n.kind == record::NodeKind::GetAttr && n.number.empty() &&
                             !storage.writtenOrEscaping[ni]);
    plan.writtenInput.push_back(storage.writtenOrEscaping[ni]);
    if (storage.writtenInPlace[ni] && plan.backend != Backend::Aten) plan.writtenInputs.push_back(plan.inputSlots.size() - 1);
    plan.inputPaths.push_back(n.source);
  }

  void getitem(size_t ni, const std::string& where) {
    const record::Node& n = optimized.graph.nodes[ni];
    if (n.args.size() != 2 || n.args[0].kind != record::Arg::Kind::Node || n.args[1].kind != record::Arg::Kind::Int)
      throw Error(where + ": getitem takes (node, index)");
    if (n.args[0].i < 0 || size_t(n.args[0].i) >= nodeSlots.size()) throw Error(where + ": getitem of a missing node");
    auto& source = nodeSlots[size_t(n.args[0].i)];
    if (n.args[1].i < 0 || size_t(n.args[1].i) >= source.size()) throw Error(where + ": getitem index out of range");
    nodeSlots[ni] = {source[size_t(n.args[1].i)]};
  }

  void addStep(size_t ni, Step step) {
    // A branch whose sides hold the first effect decides before it.
    step.beforeEffects = ni < storage.firstEffect || (ni == storage.firstEffect && step.control == Control::IfBegin);
    for (int s : step.operandSlots())
      if (s >= 0) lastUse[size_t(s)] = int(plan.steps.size());
    nodeSlots[ni] = step.outputs;
    plan.steps.push_back(std::move(step));
  }

  // A loop region (record::kLoop), as the validator shaped it: a LoopBegin
  // step, the body's steps, a LoopEnd step; carried values are slots the
  // two steps set.
  int tensorSlot(int64_t node, const std::string& where) const {
    int s = slotOf(node, where);
    if (slotNumber[size_t(s)] != 0) throw Error(where + ": takes a number where it needs a tensor");
    return s;
  }

  void loopBegin(size_t ni, const std::string& where) {
    const record::Node& n = optimized.graph.nodes[ni];
    if (n.args.size() != 2 || n.args[1].kind != record::Arg::Kind::NodeList)
      throw Error(where + ": a loop takes (trip count, [initial values])");
    Step step;
    step.control = Control::LoopBegin;
    step.loop = plan.numLoops++;
    step.name = n.target;
    step.node = record::nameAndSource(n);
    Operand trip;
    if (n.args[0].kind == record::Arg::Kind::Int) {
      trip.constant = c10::IValue(n.args[0].i);
    } else {
      trip.kind = Operand::Kind::Slot;
      trip.slot = slotOf(n.args[0].i, where);
      if (slotNumber[size_t(trip.slot)] != 'i') throw Error(where + ": a loop's trip count is not an int");
    }
    step.operands.push_back(std::move(trip));
    for (int64_t init : n.args[1].ints) {
      Operand op;
      op.kind = Operand::Kind::Slot;
      op.slot = tensorSlot(init, where);
      step.operands.push_back(std::move(op));
    }
    // The index is not the state's, but results that take it are checked
    // against the sizes capture saw (as for lifted numbers).
    step.outputs.push_back(newSlot('i', true));
    openLoops.push_back(plan.steps.size());
    addStep(ni, std::move(step));
  }

  void carried(size_t ni, const std::string& where) {
    if (openLoops.empty()) throw Error(where + ": a carried value outside a loop");
    int s = newSlot();
    plan.steps[openLoops.back()].outputs.push_back(s);
    nodeSlots[ni] = {s};
  }

  void loopEnd(size_t ni, const std::string& where) {
    const record::Node& n = optimized.graph.nodes[ni];
    if (openLoops.empty() || n.args.size() != 3 || n.args[1].kind != record::Arg::Kind::NodeList ||
        n.args[2].kind != record::Arg::Kind::NodeList ||
        n.args[1].ints.size() + 1 != plan.steps[openLoops.back()].outputs.size())
      throw Error(where + ": a loop's end does not match the loop open before it");
    size_t begin = openLoops.back();
    if (!openBranches.empty() && openBranches.back().first > begin)
      throw Error(where + ": a loop ends inside a branch begun in it");
    openLoops.pop_back();
    Step step;
    step.control = Control::LoopEnd;
    step.loop = plan.steps[begin].loop;
    step.jump = begin;
    step.name = n.target;
    step.node = record::nameAndSource(n);
    for (size_t k = 1; k <= 2; ++k)
      for (int64_t v : n.args[k].ints) {
        Operand op;
        op.kind = Operand::Kind::Slot;
        op.slot = tensorSlot(v, where);
        step.operands.push_back(std::move(op));
      }
    for (size_t k = 0; k < n.args[2].ints.size(); ++k) step.outputs.push_back(newSlot('l'));
    plan.steps[begin].jump = plan.steps.size();
    const auto& loopOutputs = plan.steps[begin].outputs;
    std::vector<int> values(loopOutputs.begin() + 1, loopOutputs.end());  // carried slots hold the last values
    values.insert(values.end(), step.outputs.begin(), step.outputs.end());
    addStep(ni, std::move(step));
    nodeSlots[ni] = std::move(values);
  }

  // A branch (record::kIf), as the validator shaped it: an IfBegin step,
  // the then side's steps, an IfElse step, the else side's, an IfEnd step.
  void ifBegin(size_t ni, const std::string& where) {
    const record::Node& n = optimized.graph.nodes[ni];
    if (n.args.size() != 4 || n.args[0].kind != record::Arg::Kind::Node || n.args[1].kind != record::Arg::Kind::Bool ||
        n.args[2].kind != record::Arg::Kind::Bool)
      throw Error(where + ": a branch takes (condition, then seen, else seen, places)");
    Step step;
    step.control = Control::IfBegin;
    step.name = n.target;
    step.node = record::nameAndSource(n);
    step.seen = uint8_t((n.args[1].i ? kThenSeen : 0) | (n.args[2].i ? kElseSeen : 0));
    Operand cond;
    cond.kind = Operand::Kind::Slot;
    cond.slot = tensorSlot(n.args[0].i, where);
    step.operands.push_back(std::move(cond));
    openBranches.push_back({plan.steps.size(), SIZE_MAX});
    addStep(ni, std::move(step));
  }

  // magpy.if_else (then side ends) or magpy.if_end (else side ends).
  void ifSide(size_t ni, const std::string& where) {
    const record::Node& n = optimized.graph.nodes[ni];
    bool elseSide = n.target == record::kIfEnd;
    if (openBranches.empty() || (!openLoops.empty() && openLoops.back() > openBranches.back().first) ||
        (openBranches.back().second != SIZE_MAX) != elseSide || n.args.size() != 2 ||
        n.args[1].kind != record::Arg::Kind::NodeList)
      throw Error(where + ": a branch side's end does not match the branch open before it");
    Step step;
    step.control = elseSide ? Control::IfEnd : Control::IfElse;
    step.name = n.target;
    step.node = record::nameAndSource(n);
    for (int64_t v : n.args[1].ints) {
      Operand op;
      op.kind = Operand::Kind::Slot;
      op.slot = tensorSlot(v, where);
      step.operands.push_back(std::move(op));
    }
    auto [begin, thenEnd] = openBranches.back();
    size_t here = plan.steps.size();
    if (!elseSide) {
      for (size_t k = 0; k < step.operands.size(); ++k) step.outputs.push_back(newSlot());
      plan.steps[begin].jump = here;
      openBranches.back().second = here;
    } else {
      Step& side = plan.steps[thenEnd];
      uint8_t seen = plan.steps[begin].seen;
      if ((seen & kThenSeen) && (seen & kElseSeen) && side.operands.size() != step.operands.size())
        throw Error(where + ": the branch's sides give different numbers of values");
      if (!(seen & kThenSeen))
        for (size_t k = 0; k < step.operands.size(); ++k) side.outputs.push_back(newSlot());
      step.outputs = side.outputs;
      side.jump = here;
      openBranches.pop_back();
    }
    std::vector<int> values = step.outputs;
    addStep(ni, std::move(step));
    nodeSlots[ni] = std::move(values);
  }

  // magpy.expect_equal(t, constant) or magpy.expect_sizes(t, sizes), as
  // the validator shaped them, take tensors; magpy.expect_true(b) a
  // comparison's bool.
  void checkStep(size_t ni, const std::string& where) {
    const record::Node& n = optimized.graph.nodes[ni];
    Step step;
    step.name = n.target;
    step.node = record::nameAndSource(n);
    bool equal = n.target == record::kExpectEqual, decision = n.target == record::kExpectTrue;
    step.expect = equal ? Expect::Equal : decision ? Expect::True : Expect::Sizes;
    for (size_t k = 0; k < (equal ? 2 : 1); ++k) {
      Operand op;
      op.kind = Operand::Kind::Slot;
      op.slot = slotOf(n.args[k].i, where);
      char number = slotNumber[size_t(op.slot)];
      if (decision ? number != 'b' : number != 0)
        throw Error(where + ": " + n.target + (decision ? " checks something other than a comparison" : " checks a number, not a tensor"));
      step.operands.push_back(std::move(op));
    }
    if (step.expect == Expect::Sizes) step.expectedSizes = n.args[1].ints;
    if (decision) step.node = record::nameAndSource(optimized.graph.nodes[size_t(n.args[0].i)]);
    addStep(ni, std::move(step));
  }

  // magpy.backward(root, gradient or None, [leaves], retain_graph), as the
  // validator shaped it; its plan runs with autograd (Plan::differentiates).
  void backwardStep(size_t ni, const std::string& where) {
    const record::Node& n = optimized.graph.nodes[ni];
    Step step;
    step.backward = true;
    step.name = n.target;
    step.node = record::nameAndSource(n);
    auto slot = [&](int64_t node) {
      Operand op;
      op.kind = Operand::Kind::Slot;
      op.slot = tensorSlot(node, where);
      return op;
    };
    step.operands.push_back(slot(n.args[0].i));
    step.operands.push_back(n.args[1].kind == record::Arg::Kind::Node ? slot(n.args[1].i) : Operand{});
    Operand leaves;
    leaves.kind = Operand::Kind::TensorList;
    for (int64_t leaf : n.args[2].ints) {
      leaves.slots.push_back(tensorSlot(leaf, where));
      auto input = std::find(plan.inputSlots.begin(), plan.inputSlots.end(), leaves.slots.back());
      if (input == plan.inputSlots.end()) throw Error(where + ": a leaf of magpy.backward is not a graph input");
      plan.leafInputs.push_back(size_t(input - plan.inputSlots.begin()));
    }
    step.operands.push_back(std::move(leaves));
    step.operands.push_back(Operand{});
    step.operands.back().constant = c10::IValue(n.args[3].i != 0);
    for (size_t k = 0; k < n.args[2].ints.size(); ++k) step.outputs.push_back(newSlot(0, false));
    std::vector<int> values = step.outputs;
    addStep(ni, std::move(step));
    nodeSlots[ni] = std::move(values);
  }

  // operator.add(a, b) and its kin: each operand a number of the graph
  // or a constant; the result's type must be the one Python's arithmetic
  // gives.
  void numberStep(size_t ni, const std::string& where) {
    const record::Node& n = optimized.graph.nodes[ni];
    Step step;
    step.number = numberOpOf(n.target);
    step.name = n.target;
    step.node = record::nameAndSource(n);
    size_t arity = size_t(record::numberOpArity(n.target));
    if (step.number == NumberOp::None || n.args.size() != arity || n.number.empty())
      throw Error(where + ": " + n.target + " is no number operator magpy-run knows (operator.add, sub, mul, truediv, "
                  "floordiv, mod, neg, lt, le, gt, ge, eq, ne; builtins.min, max, abs, int, float; math.sqrt, ceil, "
                  "floor), with as many operands as it takes");
    std::string types[2];
    bool lifted = false;
    for (size_t k = 0; k < arity; ++k) {
      const record::Arg& a = n.args[k];
      Operand op;
      if (a.kind == record::Arg::Kind::Node) {
        if (a.i < 0 || size_t(a.i) >= nodeSlots.size() || nodeSlots[size_t(a.i)].size() != 1)
          throw Error(where + ": " + n.target + " takes a value that is not a number");
        op.kind = Operand::Kind::Slot;
        op.slot = nodeSlots[size_t(a.i)][0];
        char number = slotNumber[size_t(op.slot)];
        if (number != 'i' && number != 'f') throw Error(where + ": " + n.target + " takes a value that is not a number");
        types[k] = number == 'i' ? "int" : "float";
        lifted = lifted || slotLifted[size_t(op.slot)];
      } else if (a.kind == record::Arg::Kind::Int || a.kind == record::Arg::Kind::Float) {
        op.constant = a.kind == record::Arg::Kind::Int ? c10::IValue(a.i) : c10::IValue(a.f);
        types[k] = a.kind == record::Arg::Kind::Int ? "int" : "float";
      } else {
        throw Error(where + ": " + n.target + " takes numbers");
      }
      step.operands.push_back(std::move(op));
    }
    if (record::numberOpResult(n.target, types[0], types[1]) != n.number)
      throw Error(where + ": " + n.target + " of " + types[0] + (arity == 2 ? " and " + types[1] : "") +
                  " does not give " + n.number);
    if (arity == 1) step.operands.push_back(Operand{});  // numberOp reads two: the second is unused
    step.outputs.push_back(newSlot(n.number[0], lifted));
    addStep(ni, std::move(step));
  }

  // An aten operator: its schema in this libtorch, checked against the
  // policy and the record's arguments.
  void opStep(size_t ni, const std::string& where) {
    const record::Node& n = optimized.graph.nodes[ni];
    auto handle = c10::Dispatcher::singleton().findSchema({n.target, n.overload});
    if (!handle)
      throw Error(where + ": operator " + n.opName() + " does not exist in this libtorch (" + libtorchVersion() +
                  "); replay with the libtorch the record was captured with, or capture again");
    const auto& schema = handle->schema();
    const auto& params = schema.arguments();
    if (!options.trustRecord) refuseOutsidePolicy(n, schema, where);
    if (n.args.size() > params.size())
      throw Error(where + ": " + n.opName() + " takes " + std::to_string(params.size()) +
                  " arguments in this libtorch, the record passes " + std::to_string(n.args.size()));
    Step step;
    step.op = *handle;
    step.name = n.opName();
    step.node = record::nameAndSource(n);
    step.check = record::checksArguments(n.target);
    step.folded = optimized.folded[ni];
    if (!options.inference) step.grad = n.grad;  // without autograd, grad mode changes nothing
    plan.changesGeometry = plan.changesGeometry || record::changesGeometry(n.target);
    bool lifted = false;  // takes a number the call's state supplies
    for (size_t ai = 0; ai < params.size(); ++ai) {
      if (ai < n.args.size()) {
        step.operands.push_back(operand(n.args[ai], params[ai], lifted, where + " (" + n.opName() + ")"));
      } else if (params[ai].default_value()) {  // a newer libtorch added a trailing argument
        step.operands.push_back(Operand{});
        step.operands.back().constant = *params[ai].default_value();
      } else {
        throw Error(where + ": " + n.opName() + " needs argument '" + params[ai].name() + "', which the record lacks");
      }
    }
    size_t returns = schema.returns().size();
    if (returns == 1 && schema.returns()[0].type()->kind() == c10::TypeKind::ListType) {
      step.unpackList = true;  // split/unbind/chunk: one slot per element seen at capture
      returns = n.outputs.size();
    }
    if (record::isCollective(n.target)) {
      if (returns != 2 || !n.args.size() || n.args[0].kind != record::Arg::Kind::NodeList)
        throw Error(where + ": " + n.opName() + " in this libtorch is not the collective the record names");
      step.collective = true;  // its tensors, once the group completed it
      returns = n.outputs.size();
    }
    if (record::readsItem(n)) {
      step.outputs.push_back(newSlot(itemType(n, where), true));  // another number at every call
      addStep(ni, std::move(step));
      return;
    }
    for (size_t r = 0; r < returns; ++r) {
      char number = step.unpackList || step.collective ? 0 : numberType(*schema.returns()[r].real_type());
      step.outputs.push_back(newSlot(number, number && lifted));
    }
    if (n.outputs.size() == step.outputs.size())
      for (size_t r = 0; r < returns; ++r) {
        const record::TensorMeta& m = n.outputs[r];
        if (m.dynamic()) step.sizeChecks.push_back({step.outputs[r], sizesOf(m, where)});
        else if (lifted) step.sizeChecks.push_back({step.outputs[r], fixedSizes(m.shape)});
      }
    addStep(ni, std::move(step));
  }

  // aten::item's number: a float from a floating tensor, an int from an
  // integral one, as the record says.
  char itemType(const record::Node& n, const std::string& where) const {
    const record::Node& from = optimized.graph.nodes[size_t(n.args.at(0).i)];
    if (from.outputs.size() != 1) throw Error(where + ": aten::item reads a value that is not a single tensor");
    c10::ScalarType dtype = dtypeFromName(from.outputs[0].dtype);
    char type = at::isFloatingType(dtype) ? 'f' : at::isIntegralType(dtype, false) ? 'i' : 0;
    if (!type || n.number[0] != type)
      throw Error(where + ": aten::item of a " + from.outputs[0].dtype + " tensor does not give " + n.number);
    return type;
  }

  // A result's dynamic sizes, those the value of a node gives read from
  // that node's slot.
  std::vector<record::SymDim> sizesOf(const record::TensorMeta& m, const std::string& where) {
    std::vector<record::SymDim> dims = m.sym;
    for (auto& d : dims)
      if (d.node >= 0) {
        d.node = slotOf(d.node, where);
        if (slotNumber[size_t(d.node)] != 'i') throw Error(where + ": a result's size names a value that is not an int");
      }
    return dims;
  }

  // A float[] or Scalar[] whose entries are float constants and float
  // numbers the graph computes (record::Arg::Kind::NumberList).
  Operand numberList(const record::Arg& a, const c10::Argument& param, bool& lifted, const std::string& where) {
    auto list = param.real_type()->cast<c10::ListType>();
    bool floats = list && list->getElementType()->kind() == c10::TypeKind::FloatType;
    if (!floats && !takesScalarList(param))
      throw Error(where + ": argument '" + param.name() + "' takes " + param.real_type()->str() + ", the record passes a list of floats");
    Operand op;
    op.kind = Operand::Kind::NumberList;
    op.scalars = !floats;
    for (size_t k = 0; k < a.ints.size(); ++k) {
      int s = a.ints[k] >= 0 ? slotOf(a.ints[k], where) : -1;
      if (s >= 0 && slotNumber[size_t(s)] != 'f') throw Error(where + ": a number list entry is not a float");
      if (s >= 0) lifted = lifted || slotLifted[size_t(s)];
      op.slots.push_back(s);
      op.floats.push_back(a.floats[k]);
    }
    return op;
  }

  // One argument of an operator; `lifted` is set when it reads a number
  // the call's state supplies.
  Operand operand(const record::Arg& a, const c10::Argument& param, bool& lifted, const std::string& where) {
    Operand op;
    if (a.kind == record::Arg::Kind::Node) {
      op.kind = Operand::Kind::Slot;
      op.slot = slotOf(a.i, where);
      if (char number = slotNumber[size_t(op.slot)]; number == 'l') {
        auto list = param.type()->cast<c10::ListType>();
        if (!list || list->getElementType()->kind() != c10::TypeKind::TensorType)
          throw Error(where + ": a loop's scan list goes to an operator's Tensor[] only");
      } else if (number) {
        if (number == 'b') throw Error(where + ": a comparison's result goes to magpy.expect_true only");
        op.kind = numberOperand(param, number, where);
        lifted = lifted || slotLifted[size_t(op.slot)];
      }
    } else if (a.kind == record::Arg::Kind::SizeList) {
      op.kind = Operand::Kind::SizeList;
      for (size_t k = 0; k + 1 < a.ints.size(); k += 2) {
        int s = a.ints[k] ? slotOf(a.ints[k + 1], where) : -1;
        if (s >= 0 && slotNumber[size_t(s)] != 'i') throw Error(where + ": a size list entry is not an integer");
        if (s >= 0) lifted = lifted || slotLifted[size_t(s)];
        op.slots.push_back(s);
        op.sizes.push_back(a.ints[k] ? 0 : a.ints[k + 1]);
      }
    } else if (a.kind == record::Arg::Kind::NumberList) {
      op = numberList(a, param, lifted, where);
    } else if (a.kind == record::Arg::Kind::Group || takesGroup(param)) {
      if (a.kind != record::Arg::Kind::Group || !takesGroup(param))
        throw Error(where + ": argument '" + param.name() + "' " +
                    (takesGroup(param) ? "takes a process group, the record passes something else"
                                       : "takes no process group, the record passes one"));
      op.kind = Operand::Kind::Group;
    } else if (a.kind == record::Arg::Kind::NodeList) {
      op.kind = isOptionalTensorList(param) ? Operand::Kind::OptionalTensorList : Operand::Kind::TensorList;
      for (auto i : a.ints) {
        if (i < 0 && op.kind == Operand::Kind::TensorList) throw Error(where + ": None in a Tensor[] argument");
        op.slots.push_back(i < 0 ? -1 : slotOf(i, where));
        if (i >= 0 && slotNumber[size_t(op.slots.back())] != 0) throw Error(where + ": a Tensor[] argument holds a non-tensor");
      }
    } else {
      op.constant = constantFor(a, param, where);
      // Tensors a factory makes go where the record replays.
      if (param.name() == "device" && !device.is_cpu() &&
          (op.constant.isNone() || (op.constant.isDevice() && op.constant.toDevice().is_cpu())))
        op.constant = c10::IValue(device);
    }
    checkScalarOperand(op, param, where);
    return op;
  }

  // A kernel reads a Scalar argument with IValue::toScalar, which throws a
  // bare std::runtime_error for anything but a number: refuse it here, with
  // the node's name, instead.
  void checkScalarOperand(const Operand& op, const c10::Argument& param, const std::string& where) const {
    c10::TypePtr t = param.real_type();
    bool optional = t->kind() == c10::TypeKind::OptionalType;
    if (optional) t = t->containedType(0);
    if (t->kind() != c10::TypeKind::NumberType) return;
    bool number = op.kind == Operand::Kind::Slot ? slotNumber[size_t(op.slot)] != 0
                  : op.kind == Operand::Kind::Const
                      ? op.constant.isInt() || op.constant.isDouble() || op.constant.isBool() ||
                            op.constant.isComplexDouble() || (optional && op.constant.isNone())
                      : false;
    if (!number) throw Error(where + ": argument '" + param.name() + "' takes a number, the record passes something else");
  }

  // A slot a loop's body reads that was set before the loop (or by its
  // LoopBegin: the index, carried values) is read again by the next
  // iteration: it lives until the outermost such loop ends.
  void keepThroughLoops() {
    std::vector<int> defined(plan.numSlots, -1);  // the step that first sets it; -1: inputs, constants
    for (size_t si = plan.steps.size(); si-- > 0;)
      for (int s : plan.steps[si].outputs) defined[size_t(s)] = int(si);
    std::vector<size_t> open;  // LoopBegin steps
    for (size_t si = 0; si < plan.steps.size(); ++si) {
      const Step& step = plan.steps[si];
      for (int s : step.operandSlots()) {
        auto outer = std::find_if(open.begin(), open.end(), [&](size_t b) { return int(b) >= defined[size_t(s)]; });
        if (outer != open.end()) lastUse[size_t(s)] = std::max(lastUse[size_t(s)], int(plan.steps[*outer].jump));
      }
      if (step.control == Control::LoopBegin) open.push_back(si);
      if (step.control == Control::LoopEnd) open.pop_back();
    }
  }

  // Folded steps: the inputs they read and the results they keep. Then
  // every slot is released after its last use, except graph outputs;
  // slots never read again (unused results) right after the step that made
  // them.
  void foldAndRelease() {
    std::vector<int> inputIndex(plan.numSlots, -1);
    for (size_t i = 0; i < plan.inputSlots.size(); ++i) inputIndex[size_t(plan.inputSlots[i])] = int(i);
    std::set<size_t> foldInputs;
    for (auto& step : plan.steps) {
      if (!step.folded) continue;
      for (auto& op : step.operands) {
        if (op.kind == Operand::Kind::Slot && inputIndex[size_t(op.slot)] >= 0)
          foldInputs.insert(size_t(inputIndex[size_t(op.slot)]));
        for (int s : op.slots)
          if (s >= 0 && inputIndex[size_t(s)] >= 0) foldInputs.insert(size_t(inputIndex[size_t(s)]));
      }
      plan.foldOutputs.insert(plan.foldOutputs.end(), step.outputs.begin(), step.outputs.end());
    }
    plan.foldInputs.assign(foldInputs.begin(), foldInputs.end());

    std::vector<bool> isOutput(plan.numSlots, false);
    for (int s : plan.outputSlots) isOutput[size_t(s)] = true;
    for (size_t si = 0; si < plan.steps.size(); ++si)
      for (int s : plan.steps[si].outputs)
        if (lastUse[size_t(s)] < 0) lastUse[size_t(s)] = int(si);
    keepThroughLoops();
    for (size_t s = 0; s < plan.numSlots; ++s)
      if (!isOutput[s] && lastUse[s] >= 0) plan.steps[size_t(lastUse[s])].release.push_back(int(s));
  }
};

Plan::Plan(const record::Graph& input, const std::vector<record::TensorBlob>& blobs, const PlanOptions& given)
    : impl_(std::make_unique<Impl>()) {
  if (std::string why = readsUninitialized(input); !why.empty()) throw Error(why);
  PlanOptions options = given;
  impl_->differentiates = record::hasBackward(input);
  impl_->reducesGradients = impl_->differentiates && record::hasCollectives(input);
  options.inference = options.inference && !impl_->differentiates;  // a backward needs autograd
  OptimizedGraph optimized = optimize(input, options.passes, options.inference, options.freezeState);
  impl_->applied = optimized.applied;
  StorageFacts storage = storageFacts(optimized.graph);
  impl_->stopsCleanly = storage.firstEffect == optimized.graph.nodes.size();
  impl_->backend = options.inference && c10::Device(options.device).is_cpu() ? options.backend : Backend::Aten;
  if (options.timeBudget > 0 && impl_->backend != Backend::Aten)
    throw Error("a time budget stops a call between operators, and a compiled graph runs as one: use the aten backend");
  impl_->timeBudget = options.timeBudget;
  impl_->pageOutReplaced = options.pageOutReplacedState;
  for (auto& n : optimized.graph.nodes)
    for (auto& m : n.outputs) impl_->dynamic = impl_->dynamic || m.dynamic();
  Impl::Builder(*impl_, optimized, std::move(storage), blobs, options).build();
  if (impl_->backend != Backend::Aten) {
    impl_->refusal = loweringRefusal(impl_->steps, impl_->dynamic);
    for (size_t i = 0; i < impl_->inputNumbers.size() && impl_->refusal.empty(); ++i)
      if (impl_->inputNumbers[i])
        impl_->refusal = "it takes the lifted number " + record::toString(impl_->inputPaths[i]) + ", checked per call";
  }
}

Plan::~Plan() = default;
Plan::Plan(Plan&&) noexcept = default;
Plan& Plan::operator=(Plan&&) noexcept = default;

const std::vector<record::AccessPath>& Plan::inputPaths() const { return impl_->inputPaths; }
const std::vector<std::string>& Plan::optimizations() const { return impl_->applied; }

bool Plan::changesGeometry() const { return impl_->changesGeometry; }
bool Plan::dynamic() const { return impl_->dynamic; }
bool Plan::stopsCleanly() const { return impl_->stopsCleanly; }
bool Plan::ranCompiled() const { return impl_->ranCompiled; }
bool Plan::differentiates() const { return impl_->differentiates; }

namespace {

// The sizes a result must have for this call's symbols.
void checkSizes(const Step& step, const std::vector<c10::IValue>& slots, const SymbolValues& symbols) {
  for (auto& [slot, dims] : step.sizeChecks) {
    const c10::IValue& v = slots[size_t(slot)];
    if (!v.isTensor()) continue;
    auto sizes = v.toTensor().sizes();
    bool same = sizes.size() == dims.size();
    auto evaluate = [&](const record::SymDim& d) -> std::optional<int64_t> {
      if (d.node < 0) return symbols.evaluate(d);
      return slots[size_t(d.node)].toInt();
    };
    for (size_t d = 0; same && d < dims.size(); ++d) {
      auto want = evaluate(dims[d]);
      same = want && *want == sizes[d];
    }
    if (same) continue;
    std::string want;
    for (auto& d : dims) {
      auto size = evaluate(d);
      std::string dim = d.node >= 0 ? std::to_string(*size) + " (computed by the graph)"
                                    : record::toString(d) + (size && d.symbol >= 0 ? "=" + std::to_string(*size) : "");
      want += (want.empty() ? "" : ", ") + dim;
    }
    std::string got;
    for (auto x : sizes) got += (got.empty() ? "" : ", ") + std::to_string(x);
    throw SizeMismatch(step.node + " gave a result of sizes [" + got + "] where the record expects [" + want +
                       "]: the record does not describe calls of these sizes");
  }
}

}  // namespace

namespace {

struct LoopCounter {
  int64_t index = 0, trip = 0;
};

// The loops of a run: a counter each, and the iterations all of them ran.
struct LoopCounters {
  std::vector<LoopCounter> loops;
  int64_t iterations = 0;
};

// Runs a loop's bound at steps[pc]; returns the step run last, so that the
// next is the one after it. `exited`: a LoopBegin, or the LoopEnd of the
// last iteration (its slots may be released).
size_t loopControl(const std::vector<Step>& steps, size_t pc, std::vector<c10::IValue>& slots,
                   LoopCounters& loops, std::vector<c10::IValue>& values, bool& exited) {
  const Step& step = steps[pc];
  LoopCounter& counter = loops.loops[step.loop];
  if (step.control == Control::LoopBegin) {
    const Operand& trip = step.operands[0];
    int64_t n = (trip.kind == Operand::Kind::Const ? trip.constant : slots[size_t(trip.slot)]).toInt();
    if (n < 1) {
      SizeMismatch miss(step.node + " runs " + std::to_string(n) + " times at this call; the record's loop runs at least once");
      miss.decidedOtherwise = true;  // another path through the program, not sizes the record got wrong
      throw miss;
    }
    if (n > record::kMaxTripCount)
      throw Error(step.node + " would run " + std::to_string(n) + " times, more than a record's loop may (" +
                  std::to_string(record::kMaxTripCount) + ")");
    counter = {0, n};
    slots[size_t(step.outputs[0])] = c10::IValue(int64_t(0));
    for (size_t j = 1; j < step.outputs.size(); ++j) slots[size_t(step.outputs[j])] = slots[size_t(step.operands[j].slot)];
    for (int list : steps[step.jump].outputs) slots[size_t(list)] = c10::List<at::Tensor>();
    exited = true;
    return pc;
  }
  const Step& begin = steps[step.jump];
  size_t carried = begin.outputs.size() - 1;
  for (size_t s = carried; s < step.operands.size(); ++s)
    slots[size_t(step.outputs[s - carried])].toTensorList().push_back(slots[size_t(step.operands[s].slot)].toTensor());
  values.clear();  // next values first: one may be another carried value
  for (size_t j = 0; j < carried; ++j) values.push_back(slots[size_t(step.operands[j].slot)]);
  for (size_t j = 0; j < carried; ++j) slots[size_t(begin.outputs[j + 1])] = std::move(values[j]);
  if (++loops.iterations > record::kMaxTripCount)
    throw Error(step.node + ": the call's loops ran " + std::to_string(record::kMaxTripCount) +
                " iterations, as many as a record's call may");
  if (++counter.index < counter.trip) {
    slots[size_t(begin.outputs[0])] = c10::IValue(counter.index);
    return step.jump;
  }
  exited = true;
  return pc;
}

// Runs a branch's bound at steps[pc]; returns the step run last, so that
// the next is the one after it.
size_t branchControl(const std::vector<Step>& steps, size_t pc, std::vector<c10::IValue>& slots) {
  const Step& step = steps[pc];
  if (step.control == Control::IfBegin) {
    const at::Tensor& cond = slots[size_t(step.operands[0].slot)].toTensor();
    if (cond.numel() != 1)
      notThisCall(step.node + " decides on a tensor of " + std::to_string(cond.numel()) + " elements, Python's bool() on it raises");
    bool taken = cond.is_nonzero();
    if (!(step.seen & (taken ? kThenSeen : kElseSeen)))
      notThisCall(step.node + " takes its " + (taken ? "then" : "else") + " side, which capture never saw", true);
    return taken ? pc : step.jump;
  }
  for (size_t k = 0; k < step.operands.size(); ++k) slots[size_t(step.outputs[k])] = slots[size_t(step.operands[k].slot)];
  return step.control == Control::IfElse ? step.jump : pc;
}

}  // namespace

std::vector<c10::IValue> Plan::runWith(std::vector<c10::IValue> inputs, const SymbolValues* symbols) const {
  const Impl& p = *impl_;
  if (p.dynamic && !symbols) throw Error("a graph with dynamic sizes runs only with the sizes its record's guards bound");
  if (inputs.size() != p.inputSlots.size())
    throw Error("the graph takes " + std::to_string(p.inputSlots.size()) + " inputs, got " + std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const c10::IValue& v = inputs[i];
    char number = p.inputNumbers[i];
    bool ok = number == 'i' ? v.isInt() : number == 'f' ? v.isDouble() : v.isTensor();
    if (!ok)
      throw Error("graph input " + record::toString(p.inputPaths[i]) + " must be " +
                  (number == 'i' ? "an int" : number == 'f' ? "a float" : "a tensor") + ", got a " + v.tagKind());
  }
  p.ranCompiled = false;
  for (size_t i : p.leafInputs) {
    std::string hooks = autogradHooks(inputs[i].toTensor(), p.reducesGradients);
    if (hooks.empty()) continue;
    SizeMismatch e("graph input " + record::toString(p.inputPaths[i]) + " is a leaf of the record's backward pass, and " +
                   hooks + ": the record does not describe this call");
    e.changedNothing = e.decidedOtherwise = true;  // before the first step
    throw e;
  }
  // Some operators write their arguments without a version bump (batch
  // norm's running statistics in training mode); a compiled graph of
  // another record that froze them must see they changed. (Only with a
  // compiled backend, which runs without autograd: autograd would take the
  // bump for a change of a tensor it saved.)
  struct BumpWritten {
    const std::vector<c10::IValue> written;
    ~BumpWritten() {
      for (const c10::IValue& v : written)
        if (v.isTensor() && v.toTensor().defined() && !v.toTensor().is_inference()) v.toTensor().unsafeGetTensorImpl()->bump_version();
    }
  };
  std::vector<c10::IValue> written;
  for (size_t i : p.writtenInputs) written.push_back(inputs[i]);
  BumpWritten bump{std::move(written)};
  switch (p.backend == Backend::Aten ? Impl::Use::Steps : p.use) {
    case Impl::Use::Undecided: return p.decide(std::move(inputs), symbols);
    case Impl::Use::Compiled: return p.runCompiled(std::move(inputs), symbols);
    case Impl::Use::Steps: break;
  }
  return p.runSteps(std::move(inputs), symbols);
}

// The time budget of one run, checked before each operator: a record can
// chain operators that together run for hours, and a service replaying
// records from others must be able to stop such a call.
class Deadline {
 public:
  explicit Deadline(double seconds) : seconds_(seconds) {
    if (seconds > 0) end_ = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                                   std::chrono::duration<double>(seconds));
  }
  void check(const std::string& node) const {
    if (seconds_ > 0 && std::chrono::steady_clock::now() > end_)
      throw Error("the call ran past its time budget of " + formatDouble(seconds_) + " s before " + node +
                  " (--time-budget)");
  }

 private:
  double seconds_;
  std::chrono::steady_clock::time_point end_;
};

std::vector<c10::IValue> Plan::Impl::runSteps(std::vector<c10::IValue> inputs, const SymbolValues* symbols) const {
  const Impl& p = *this;
  std::vector<c10::IValue> slots(p.numSlots);
  for (const auto& c : p.constants) slots[size_t(c.slot)] = c.copyPerRun ? c10::IValue(c.value.toTensor().clone()) : c.value;

  // Folded results stay valid while the tensors they were computed from are
  // the same objects, unchanged since (their version counters say so).
  bool reuseFolded = false;
  if (!p.foldOutputs.empty()) {
    std::vector<std::pair<const c10::TensorImpl*, uint32_t>> key;
    for (size_t i : p.foldInputs) {
      const c10::IValue& v = inputs[i];
      if (!v.isTensor()) {
        key.push_back({nullptr, 0});
        continue;
      }
      const c10::TensorImpl* impl = v.toTensor().unsafeGetTensorImpl();
      key.push_back({impl, impl->version_counter().current_version()});
    }
    reuseFolded = key == p.foldKey && p.foldValues.size() == p.foldOutputs.size();
    if (reuseFolded) {
      for (size_t k = 0; k < p.foldOutputs.size(); ++k) slots[size_t(p.foldOutputs[k])] = p.foldValues[k];
    } else {
      p.foldKey = std::move(key);
      p.foldValues.clear();
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i) slots[size_t(p.inputSlots[i])] = std::move(inputs[i]);

  std::vector<c10::IValue> stack;
  Deadline deadline(p.timeBudget);
  LoopCounters loops{std::vector<LoopCounter>(p.numLoops)};
  for (size_t pc = 0; pc < p.steps.size(); ++pc) {
    const Step& step = p.steps[pc];
    if (step.folded && reuseFolded) continue;
    deadline.check(step.node);
    if (step.control != Control::None) {
      bool exited = false;
      try {
        bool loop = step.control == Control::LoopBegin || step.control == Control::LoopEnd;
        pc = loop ? loopControl(p.steps, pc, slots, loops, stack, exited) : branchControl(p.steps, pc, slots);
        exited = exited || !loop;
      } catch (SizeMismatch& e) {
        e.changedNothing = step.beforeEffects;
        throw;
      }
      if (exited)
        for (int s : step.release) slots[size_t(s)] = c10::IValue();
      continue;
    }
    // A collective fails where another rank failed or left the group.
    const char* why = step.collective ? " (another rank of the group failed or left it)" : "";
    try {
      runStep(step, slots, stack);
    } catch (const c10::Error& e) {
      throw Error("while running " + step.node + ": " + e.what_without_backtrace() + why);
    } catch (const SizeMismatch& e) {
      SizeMismatch stopped("while running " + step.node + ": " + e.what());
      stopped.changedNothing = step.beforeEffects;
      stopped.decidedOtherwise = e.decidedOtherwise;
      throw stopped;
    } catch (const Error& e) {
      throw Error("while running " + step.node + ": " + e.what());
    } catch (const std::exception& e) {
      // Some kernels reject their arguments with a bare std::runtime_error
      // (view's shape check, IValue conversions), not c10::Error; so does Gloo.
      throw Error("while running " + step.node + ": " + e.what() + why);
    }
    static const SymbolValues kNoSymbols;
    try {
      if (!step.sizeChecks.empty()) checkSizes(step, slots, symbols ? *symbols : kNoSymbols);
    } catch (SizeMismatch& e) {
      e.changedNothing = step.beforeEffects;
      throw;
    }
    if (step.folded)  // kept for the next runs, in the order foldOutputs lists them
      for (int s : step.outputs) p.foldValues.push_back(slots[size_t(s)]);
    for (int s : step.release) slots[size_t(s)] = c10::IValue();
  }
  std::vector<c10::IValue> out;
  out.reserve(p.outputSlots.size());
  for (int s : p.outputSlots) out.push_back(slots[size_t(s)]);
  return out;
}

namespace {

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The least time of a few runs of `run` that change nothing (a graph that
// stopsCleanly), beyond the first that took `first` seconds: small graphs
// get more runs, so that a choice between backends is not one sample's.
template <class Run>
double leastTime(double first, Run&& run) {
  constexpr double kBudget = 0.05;  // seconds per backend, beyond two more runs
  double least = first, spent = first;
  for (int k = 0; k < 20 && (k < 2 || spent < kBudget); ++k) {
    auto t0 = Clock::now();
    run();
    double t = secondsSince(t0);
    least = std::min(least, t);
    spent += t;
  }
  return least;
}

std::string milliseconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f ms", seconds * 1e3);
  return text;
}

}  // namespace

namespace {

bool sameBinding(const SymbolValues& a, const SymbolValues& b) {
  if (a.bound != b.bound) return false;
  for (int k = 0; k < record::kMaxSymbols; ++k)
    if ((a.bound & (1u << k)) && a.value[k] != b.value[k]) return false;
  return true;
}

}  // namespace

// What the first call's steps did, for the compiled graphs to agree with.
struct Plan::Impl::FirstCall {
  std::vector<c10::IValue> before;  // the inputs, what the graph writes copied before it did
  std::vector<c10::IValue> inputs;  // the inputs after the steps ran
  std::vector<c10::IValue> outputs;
  at::Tensor rng;                   // the generator's state before the call
};

// One set of passes tried on the first call: the graph runs on copies of
// what it writes, as they were before the call, with the call's random
// draws; results and writes must agree with the steps'.
Plan::Impl::Candidate Plan::Impl::tryCompiled(CompiledPasses passes, const FirstCall& call,
                                              std::unique_ptr<CompiledGraph> frozenFrom) const {
  std::vector<c10::IValue> trialInputs = call.before;
  for (size_t i = 0; i < trialInputs.size(); ++i)
    if (writtenInput[i] && trialInputs[i].isTensor()) trialInputs[i] = trialInputs[i].toTensor().clone();
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  generator.set_state(call.rng);
  Candidate c;
  try {
    c.graph = frozenFrom ? std::make_unique<CompiledGraph>(*frozenFrom, call.inputs)
                         : std::make_unique<CompiledGraph>(lowering(), call.inputs, passes);
    frozenFrom.reset();  // its folded weights, which the inference passes replaced, go before the trial
    auto t0 = Clock::now();
    std::vector<c10::IValue> trial = c.graph->run(trialInputs);
    c.seconds = secondsSince(t0);
    std::string differs = disagreement(trial, call.outputs, trialInputs, call.inputs);
    for (size_t i = 0; differs.empty() && i < call.inputs.size(); ++i)
      if (writtenInput[i] && disagreement({trialInputs[i]}, {call.inputs[i]}, {}, {}) != "")
        differs = "it writes other values into " + record::toString(inputPaths[i]);
    if (!differs.empty()) {
      c.graph.reset();
      c.failure = "the compiled graph disagrees with it: " + differs;
    } else if (stopsCleanly) {
      c.seconds = leastTime(c.seconds, [&] { c.graph->run(call.inputs); });
    }
  } catch (const std::exception& e) {
    c.graph.reset();
    c.failure = std::string("not compiled: ") + e.what();
  }
  return c;
}

// What each set of passes gave on the first call, for --show-optimizations:
// "exact 12.0 ms, freeze 10.1 ms, inference: not compiled: ...".
std::string Plan::Impl::candidates(const Candidate (&tried)[3]) {
  const char* names[] = {"exact", "freeze", "inference"};
  std::string out;
  for (int k = 0; k < 3; ++k) {
    out += std::string(k ? ", " : "") + names[k];
    const std::string& failure = tried[k].failure;
    out += failure.empty() ? " " + milliseconds(tried[k].seconds) : ": " + failure.substr(0, failure.find('\n'));
  }
  return out;
}

// The first run: the steps run the call on the real inputs, then each set
// of libtorch's passes is tried (tryCompiled). The fastest agreeing graph
// is kept (with Auto, only where it beats the steps). A size check the
// steps fail leaves the choice to a later call.
std::vector<c10::IValue> Plan::Impl::decide(std::vector<c10::IValue> inputs, const SymbolValues* symbols) const {
  if (!refusal.empty()) {
    use = Use::Steps;
    applied.push_back("backend: operator by operator, not compiled: " + refusal);
    return runSteps(std::move(inputs), symbols);
  }
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  FirstCall call{inputs, inputs, {}, generator.get_state()};
  for (size_t i = 0; i < inputs.size(); ++i)
    if (writtenInput[i] && inputs[i].isTensor()) call.before[i] = inputs[i].toTensor().clone();
  auto t0 = Clock::now();
  call.outputs = runSteps(std::move(inputs), symbols);
  double stepsTime = secondsSince(t0);
  at::Tensor rngAfter = generator.get_state();
  if (stopsCleanly) stepsTime = leastTime(stepsTime, [&] { runSteps(call.inputs, symbols); });

  // Each set of passes is tried; ForInference starts from Freeze's graph
  // (which it consumes), so the weights are folded once and at most two
  // copies of them are alive at a time. Only the best graph so far is kept.
  dropFolded();
  const CompiledPasses order[] = {CompiledPasses::Exact, CompiledPasses::Freeze, CompiledPasses::ForInference};
  Candidate tried[3];
  std::string failure;
  int bestIndex = -1;
  for (int k = 0; k < 3; ++k) {
    bool derived = order[k] == CompiledPasses::ForInference && tried[1].graph;
    tried[k] = tryCompiled(order[k], call, derived ? std::move(tried[1].graph) : nullptr);
    if (!tried[k].graph) {
      failure = tried[k].failure;
      continue;
    }
    if (bestIndex < 0 || tried[k].seconds < tried[bestIndex].seconds) bestIndex = k;
    for (int j = 0; j <= k; ++j)  // Freeze's graph waits for the inference passes
      if (j != bestIndex && !(j == 1 && k == 1)) tried[j].graph.reset();
  }
  generator.set_state(rngAfter);
  use = Use::Steps;
  if (bestIndex < 0) {
    applied.push_back("backend: operator by operator, " + failure);
    return std::move(call.outputs);
  }
  std::unique_ptr<CompiledGraph> best = std::move(tried[bestIndex].graph);
  std::string times = milliseconds(tried[bestIndex].seconds) + " compiled vs " + milliseconds(stepsTime) +
                      " operator by operator, least of the first call's runs; " + candidates(tried);
  if (backend == Backend::Auto && tried[bestIndex].seconds >= stepsTime) {
    applied.push_back("backend: operator by operator, faster (" + times + ")");
    return std::move(call.outputs);
  }
  use = Use::Compiled;
  passes = order[bestIndex];
  // A graph consumed, made before a later one paged out what it froze, or
  // whose constants a graph made from it wrote, is made again.
  if (!best || !best->stillFrozen(call.inputs) || !best->constantsIntact())
    best = std::make_unique<CompiledGraph>(lowering(), call.inputs, passes);
  applied.push_back("backend: compiled (" + times + "): " + best->summary());
  compiled.push_back({symbols ? *symbols : SymbolValues{}, std::move(best)});
  return std::move(call.outputs);
}

// A compiled run, with the graph compiled for this call's binding of the
// symbols (a binding seen first runs operator by operator, whose size
// checks must hold, then is compiled), after checking the tensors frozen
// into it; where they changed, it is lowered again with their new values (a
// few times: state that keeps changing runs operator by operator from then
// on).
std::vector<c10::IValue> Plan::Impl::runCompiled(std::vector<c10::IValue> inputs, const SymbolValues* symbols) const {
  constexpr int kMaxRefreezes = 3;
  const SymbolValues binding = symbols ? *symbols : SymbolValues{};
  auto it = std::find_if(compiled.begin(), compiled.end(), [&](const Compiled& c) { return sameBinding(c.binding, binding); });
  if (it == compiled.end()) {
    std::vector<c10::IValue> kept = inputs;
    std::vector<c10::IValue> out = runSteps(std::move(inputs), symbols);
    if (compiled.size() < kMaxBindings) {
      try {
        compiled.push_back({binding, std::make_unique<CompiledGraph>(lowering(), kept, passes)});
        dropFolded();
      } catch (const Error&) {  // this binding stays operator by operator
      }
    }
    return out;
  }
  if (!it->graph->stillFrozen(inputs)) {
    if (++refreezes > kMaxRefreezes) {
      use = Use::Steps;
      compiled.clear();
      applied.push_back("backend: operator by operator from here on, the state tensors frozen into the compiled graph "
                        "changed between calls " + std::to_string(kMaxRefreezes + 1) + " times");
      return runSteps(std::move(inputs), symbols);
    }
    it->graph = std::make_unique<CompiledGraph>(lowering(), inputs, passes);
  }
  try {
    std::vector<c10::IValue> out = it->graph->run(inputs);
    ranCompiled = true;
    return out;
  } catch (const std::exception& e) {
    // Nothing observable happened yet: the steps name the failing node.
    if (stopsCleanly) return runSteps(std::move(inputs), symbols);
    throw Error(std::string("while running the compiled graph: ") + e.what());
  }
}

}  // namespace magpy::replay

#include "capture/op_recorder.h"

#include <algorithm>
#include <cstring>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>
#include <ATen/record_function.h>

#include "magpy/record/op_policy.h"
#include "magpy/replay/passes.h"
#include "magpy/replay/tensors.h"
#include "magpy/support/error.h"
#include "replay/collectives.h"

namespace magpy::capture {
namespace {

thread_local OpRecorder* tRecorder = nullptr;
thread_local int tDepth = 0;  // nesting of ATen calls: only the outermost is recorded

// Installed while a recorded operator runs: notes the warnings its kernel
// gives and passes them on to the handler it replaced (torch's bindings
// give them to Python when the binding returns, where the monitor asks
// OpRecorder::fromRecordedOperator).
class OperatorWarnings : public c10::WarningHandler {
 public:
  void process(const c10::SourceLocation& where, const std::string& msg, bool verbatim) override {
    if (tRecorder) tRecorder->operatorWarned(msg);
    previous->process(where, msg, verbatim);
  }
  c10::WarningHandler* previous = nullptr;
};
thread_local OperatorWarnings tOperatorWarnings;

struct Observed : at::ObserverContext {
  std::string name, overload;
  std::vector<c10::IValue> inputs;
};

// Operators whose results are metadata, not data: Python reads them through
// tensor attributes, so they never need a graph node.
bool isMetadataOp(const std::string& name) {
  static const std::unordered_set<std::string> kOps = {
      "aten::size", "aten::stride", "aten::dim", "aten::numel", "aten::sym_size", "aten::sym_numel",
      "aten::sym_stride", "aten::is_contiguous", "aten::is_floating_point", "aten::is_complex",
      "aten::is_signed", "aten::storage_offset", "aten::is_same_size", "aten::result_type",
      "aten::_has_compatible_shallow_copy_type", "aten::sym_storage_offset", "aten::is_leaf",
      "aten::output_nr", "aten::_version",
  };
  return kOps.count(name) > 0;
}

// A profiler range's start or end (torch.autograd.profiler.record_function):
// it computes nothing, and a record replays without a profiler.
bool isProfilerRange(const std::string& name) { return name.rfind("profiler::_record_function_", 0) == 0; }

// Operators that give Python a number or bool computed from their tensor
// arguments' contents alone (is_pinned, q_scale and the like read other
// things: they stay breaks).
bool readsContentsOnly(const std::string& name) {
  static const std::unordered_set<std::string> kOps = {"aten::is_nonzero", "aten::item", "aten::_local_scalar_dense",
                                                        "aten::equal", "aten::allclose"};
  return kOps.count(name) > 0;
}

// Operators whose result shape depends on tensor contents.
bool hasDataDependentOutputShape(const std::string& name, const std::string& overload,
                                 const std::vector<c10::IValue>& inputs) {
  if (!record::mayHaveDataDependentSizes(name, overload)) return false;
  if (name != "aten::index") return true;
  if (inputs.size() > 1 && inputs[1].isList()) {
    for (const auto& idx : inputs[1].toListRef())
      if (idx.isTensor() && (idx.toTensor().scalar_type() == c10::kBool || idx.toTensor().scalar_type() == c10::kByte))
        return true;
  }
  return false;
}

// Operators that write their running-statistics arguments in training mode
// although their schemas do not say so.
bool writesRunningStats(const std::string& name, c10::ArrayRef<const c10::IValue> inputs) {
  static const std::unordered_set<std::string> kOps = {
      "aten::batch_norm", "aten::native_batch_norm", "aten::_batch_norm_impl_index", "aten::instance_norm",
      "aten::_native_batch_norm_legit"};
  return kOps.count(name) && inputs.size() > 5 && inputs[5].isBool() && inputs[5].toBool();
}

// While the recorder's own code runs, operators it calls are not the program's.
struct Reentry {
  Reentry() { ++tDepth; }
  ~Reentry() { --tDepth; }
};

// Ranges that name no operator (a custom autograd Function's apply marks
// one around its forward) do not nest: the operators inside are the program's.
bool isOperator(const at::RecordFunction& fn) {
  return fn.scope() == at::RecordScope::FUNCTION && fn.operator_name().has_value();
}

std::unique_ptr<at::ObserverContext> onStart(const at::RecordFunction& fn) {
  if (!isOperator(fn)) return nullptr;
  bool top = tDepth++ == 0;
  OpRecorder* r = tRecorder;
  if (!r || !top || !r->enabled()) return nullptr;
  auto op = fn.operator_name();
  auto ctx = std::make_unique<Observed>();
  ctx->name = op->name;
  ctx->overload = op->overload_name;
  auto inputs = fn.inputs();
  ctx->inputs.assign(inputs.begin(), inputs.end());
  Reentry busy;
  r->onBeforeOperator(ctx->name, ctx->overload, inputs);
  tOperatorWarnings.previous = c10::Warning::get_warning_handler();
  c10::Warning::set_warning_handler(&tOperatorWarnings);
  return ctx;
}

void onEnd(const at::RecordFunction& fn, at::ObserverContext* c) {
  if (!isOperator(fn)) return;
  --tDepth;
  auto* ctx = static_cast<Observed*>(c);
  if (!ctx) return;
  c10::Warning::set_warning_handler(tOperatorWarnings.previous);
  if (!tRecorder) return;
  Reentry busy;
  try {
    tRecorder->onOperator(ctx->name, ctx->overload, ctx->inputs, fn.outputs());
  } catch (const std::exception& e) {  // not out of a RecordFunction callback, which would only log it
    tRecorder->breakOn("internal: recording " + ctx->name + " failed: " + messageOf(e));
  }
}

// The value of a 0-dim CPU "wrapped number", read without dispatching.
void wrappedValue(const at::Tensor& t, record::Arg& out) {
  const void* p = t.data_ptr();
  switch (t.scalar_type()) {
    case c10::kDouble: out.f = *static_cast<const double*>(p); break;
    case c10::kFloat: out.f = *static_cast<const float*>(p); break;
    case c10::kLong: out.i = *static_cast<const int64_t*>(p); break;
    case c10::kInt: out.i = *static_cast<const int32_t*>(p); break;
    case c10::kBool: out.i = *static_cast<const bool*>(p); break;
    default: out.f = t.item<double>();
  }
}

const c10::OperatorHandle* handleFor(const std::string& name, const std::string& overload) {
  static std::unordered_map<std::string, c10::OperatorHandle> cache;
  std::string key = name + "." + overload;
  auto it = cache.find(key);
  if (it == cache.end()) {
    auto h = c10::Dispatcher::singleton().findSchema({name, overload});
    if (!h) return nullptr;
    it = cache.emplace(key, *h).first;
  }
  return &it->second;
}

}  // namespace

OpRecorder::OpRecorder(Delegate& delegate) : delegate_(delegate), gradEnabledAtEntry_(at::GradMode::is_enabled()) {
  tRecorder = this;
  tDepth = 0;
  callbackHandle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(onStart, onEnd).needsInputs(true).needsOutputs(true));
}

bool OpRecorder::fromRecordedOperator(const char* text) {
  for (auto it = operatorWarnings_.begin(); it != operatorWarnings_.end(); ++it) {
    size_t n = it->size();
    if (std::strncmp(text, it->c_str(), n) != 0) continue;
    if (text[n] != '\0' && std::strncmp(text + n, " (Triggered internally at ", 26) != 0) continue;
    operatorWarnings_.erase(it);
    return true;
  }
  return false;
}

OpRecorder::~OpRecorder() {
  at::removeCallback(callbackHandle_);
  tRecorder = nullptr;
}

namespace {
std::string viewKey(const at::Tensor& t) {
  if (!t.has_storage()) return "";
  std::string k = std::to_string(reinterpret_cast<uintptr_t>(t.storage().unsafeGetStorageImpl())) + "/" +
                  std::to_string(t.storage_offset()) + "/" + std::to_string(int(t.scalar_type()));
  for (auto d : t.sizes()) k += "," + std::to_string(d);
  k += "/";
  for (auto d : t.strides()) k += "," + std::to_string(d);
  return k;
}
}  // namespace

int OpRecorder::valueOf(const at::Tensor& t) {
  auto it = values_.find(t.unsafeGetTensorImpl());
  if (it != values_.end()) return it->second;
  auto view = byView_.find(viewKey(t));
  if (view == byView_.end() || view->first.empty()) return -1;
  return bind(t, view->second);
}

// Whether an operator wrote the storage of graph value `value` in place
// once the graph had `position` nodes.
bool OpRecorder::writtenAfter(int value, size_t position) const {
  auto storage = storageOf_.find(value);
  if (storage == storageOf_.end()) return false;
  auto written = lastWrite_.find(storage->second);
  return written != lastWrite_.end() && written->second > position;
}

// Only constants and checked values reach t's value, through operators
// that draw no random numbers, and no operator wrote the storage of a
// value on the way after the value was made, or checked (a view keeps its
// graph value when its base is written: replay sees the write through the
// real aliasing, this walk would not).
bool OpRecorder::contentsFixedByGuards(const at::Tensor& t) {
  int start = valueOf(t);
  if (start < 0) return false;
  std::vector<bool> seen(graph_.nodes.size(), false);
  std::vector<int64_t> stack{start};
  while (!stack.empty()) {
    int64_t i = stack.back();
    stack.pop_back();
    if (seen[size_t(i)]) continue;
    seen[size_t(i)] = true;
    if (auto checked = checkedAt_.find(int(i)); checked != checkedAt_.end() && !writtenAfter(int(i), checked->second))
      continue;
    const record::Node& n = graph_.nodes[size_t(i)];
    if (n.isInput() ? readsState(int(i)) : (!n.number.empty() || replay::isRandom(n))) return false;
    if (writtenAfter(int(i), size_t(i))) return false;
    record::forEachNodeArg(n, [&](int64_t j) { stack.push_back(j); });
  }
  return true;
}

std::string OpRecorder::addContentsCheck(int value, int seen, const std::string& where) {
  int node = addNode(record::kExpectEqual, "expect_equal", {record::Arg::node(value), record::Arg::node(seen)}, where);
  checkedAt_[value] = graph_.nodes.size();
  return graph_.nodes[size_t(node)].name;
}

std::string OpRecorder::addSizesCheck(int value, std::vector<int64_t> sizes, const std::string& where) {
  record::Arg expected;
  expected.kind = record::Arg::Kind::IntList;
  expected.ints = std::move(sizes);
  int node = addNode(record::kExpectSizes, "expect_sizes", {record::Arg::node(value), std::move(expected)}, where);
  sizesChecked_.insert(value);
  return graph_.nodes[size_t(node)].name;
}

// A number read from tensors whose contents the guards fix (.item() of
// arithmetic on torch.tensor(x.shape)) is a constant of the run: no node.
bool OpRecorder::readsFixedNumbers(const std::vector<c10::IValue>& inputs, const std::vector<c10::IValue>& outputs) {
  if (outputs.empty()) return false;
  for (const c10::IValue& v : outputs)
    if (!v.isDouble() && !v.isInt() && !v.isBool()) return false;
  for (const c10::IValue& v : inputs)
    if (v.isTensor() && !contentsFixedByGuards(v.toTensor())) return false;
  return true;
}

// An operator gave Python a number or bool computed from its tensor
// arguments (if t: runs aten::is_nonzero): checked, they fix it.
bool OpRecorder::checksInputs(const std::vector<c10::IValue>& inputs) {
  for (const c10::IValue& v : inputs)
    if (v.isTensor() && !contentsFixedByGuards(v.toTensor()) && !delegate_.checksContents(v.toTensor())) return false;
  return true;
}

bool OpRecorder::hasDataDependentShape(const at::Tensor& t) {
  if (!dataDependentShape_.count(t.unsafeGetTensorImpl())) return false;
  int value = valueOf(t);
  return value < 0 || !sizesChecked_.count(value);
}

// A result's storage is the operator's allocation when no argument has it
// (a tensor, an element of a list, a storage: set_ hands one over) and the
// results are all that hold it. Arguments of other kinds (a tuple, an
// object) could hide a tensor: then nothing counts as allocated.
void OpRecorder::noteAllocations(const std::vector<c10::IValue>& inputs,
                                 const std::vector<std::pair<int64_t, at::Tensor>>& results) {
  std::unordered_set<const c10::StorageImpl*> argued;
  auto argue = [&](const c10::IValue& v) {
    if (v.isTensor() && v.toTensor().has_storage()) argued.insert(v.toTensor().storage().unsafeGetStorageImpl());
    if (v.isStorage()) argued.insert(v.toStorage().unsafeGetStorageImpl());
    return v.isTensor() || v.isStorage() || v.isNone() || v.isScalar() || v.isString() || v.isDevice() ||
           v.isGenerator();
  };
  for (const c10::IValue& v : inputs) {
    if (v.isList()) {
      for (const c10::IValue& e : v.toListRef())
        if (!argue(e)) return;
    } else if (!argue(v)) {
      return;
    }
  }
  for (const auto& [index, t] : results) {
    if (!t.has_storage()) continue;
    const c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
    size_t holders = size_t(std::count_if(results.begin(), results.end(), [&](const auto& r) {
      return r.second.has_storage() && r.second.storage().unsafeGetStorageImpl() == s;
    }));
    if (!argued.count(s) && t.storage().use_count() == holders && allocated_.insert(s).second) holding_.push_back(s);
  }
}

int OpRecorder::bind(const at::Tensor& t, int node) {
  values_[t.unsafeGetTensorImpl()] = node;
  if (t.has_storage()) storageOf_[node] = t.storage().unsafeGetStorageImpl();
  std::string key = viewKey(t);
  if (!key.empty()) byView_[key] = node;
  bound_[t.has_storage() ? t.storage().unsafeGetStorageImpl() : nullptr].push_back(t);
  return node;
}

void OpRecorder::releaseBindings() {
  bound_.clear();
  holding_.clear();
}

size_t OpRecorder::bindings(const at::Tensor& t) const {
  auto found = bound_.find(t.has_storage() ? t.storage().unsafeGetStorageImpl() : nullptr);
  if (found == bound_.end()) return 0;
  return size_t(std::count_if(found->second.begin(), found->second.end(),
                              [&](const at::Tensor& o) { return o.unsafeGetTensorImpl() == t.unsafeGetTensorImpl(); }));
}

void OpRecorder::releaseUnreachable() {
  static const std::vector<at::Tensor> kNone;
  delegate_.settleReachability();
  for (size_t i = 0; i < holding_.size();) {
    const c10::StorageImpl* storage = holding_[i];
    auto found = bound_.find(storage);
    const std::vector<at::Tensor>& bound = found == bound_.end() ? kNone : found->second;
    auto isOn = [&](const at::Tensor& t) { return t.has_storage() && t.storage().unsafeGetStorageImpl() == storage; };
    auto on = std::find_if(bound.begin(), bound.end(), isOn);
    if (on != bound.end()) {  // else no tensor bound here is on it any more: not the run's to free
      if (!unreachable(on->storage(), bound)) {
        ++i;
        continue;
      }
      on->storage().unsafeGetStorageImpl()->reset();
      for (const at::Tensor& t : bound)
        if (isOn(t)) delegate_.freed(t);
    }
    holding_[i] = holding_.back();
    holding_.pop_back();
  }
}

// Nothing the program can reach holds the storage: each tensor on it was
// bound here and is held only by its bindings and by a Python object the
// program cannot reach, and nothing else holds the storage, not even
// weakly (a weak reference could hand it back).
bool OpRecorder::unreachable(const c10::Storage& storage, const std::vector<at::Tensor>& bound) {
  if (storage.use_count() > bound.size()) return false;  // some holder was never bound here
  size_t holders = 0;
  for (size_t i = 0; i < bound.size(); ++i) {
    const at::Tensor& t = bound[i];
    auto same = [&](const at::Tensor& o) { return o.unsafeGetTensorImpl() == t.unsafeGetTensorImpl(); };
    if (std::any_of(bound.begin(), bound.begin() + long(i), same)) continue;  // counted
    if (!t.has_storage() || t.storage().unsafeGetStorageImpl() != storage.unsafeGetStorageImpl()) continue;
    int python = delegate_.unreachableHolds(t);
    size_t bindings = size_t(std::count_if(bound.begin(), bound.end(), same));
    if (python < 0 || t.use_count() != bindings + size_t(python) || t.weak_use_count() != 1) return false;
    ++holders;
  }
  return storage.use_count() == holders && storage.getWeakStorageImpl().weak_use_count() == 2;
}

int OpRecorder::addInput(const at::Tensor& t, std::string name) {
  record::Node n;
  n.kind = record::NodeKind::Placeholder;  // the monitor decides placeholder vs get_attr from the path
  n.name = names_.create(name);
  n.target = n.name;
  n.outputs.push_back(replay::metaOf(t));
  graph_.nodes.push_back(std::move(n));
  return bind(t, int(graph_.nodes.size() - 1));
}

int OpRecorder::addNumberInput(const record::Atom& seen) {
  record::Node n;
  n.kind = record::NodeKind::Placeholder;  // the record builder decides placeholder vs get_attr from the path
  n.name = names_.create("number");
  n.target = n.name;
  n.number = seen.kind == record::Atom::Kind::Int ? "int" : "float";
  n.seen = seen;
  graph_.nodes.push_back(std::move(n));
  return int(graph_.nodes.size() - 1);
}

int OpRecorder::addNumberOp(const std::string& target, std::vector<record::Arg> args, const std::string& type,
                            const record::Atom& seen) {
  int node = addNode(target, target.substr(target.find('.') + 1), std::move(args), delegate_.sourceLocation());
  graph_.nodes[size_t(node)].number = type;
  graph_.nodes[size_t(node)].seen = seen;
  return node;
}

int OpRecorder::addItem(int value, const record::Atom& seen) {
  int node = addNode(record::kItem, "item", {record::Arg::node(value)}, delegate_.sourceLocation());
  graph_.nodes[size_t(node)].number = seen.kind == record::Atom::Kind::Int ? "int" : "float";
  graph_.nodes[size_t(node)].seen = seen;
  return node;
}

std::string OpRecorder::addDecisionCheck(int comparison, const std::string& where) {
  int node = addNode(record::kExpectTrue, "expect_true", {record::Arg::node(comparison)}, where);
  return graph_.nodes[size_t(node)].name;
}

int OpRecorder::addNode(const std::string& target, const std::string& name, std::vector<record::Arg> args,
                        const std::string& where) {
  record::Node n;
  n.kind = record::NodeKind::CallFunction;
  n.target = target;
  n.name = names_.create(name);
  n.args = std::move(args);
  n.where = where;
  graph_.nodes.push_back(std::move(n));
  return int(graph_.nodes.size() - 1);
}

std::vector<int> OpRecorder::addBackward(int root, int grad, const std::vector<int>& leaves, bool retainGraph,
                                         const std::vector<record::TensorMeta>& gradients, const std::string& where) {
  record::Arg leafList;
  leafList.kind = record::Arg::Kind::NodeList;
  leafList.ints.assign(leaves.begin(), leaves.end());
  int node = addNode(record::kBackward, "backward",
                     {record::Arg::node(root), grad >= 0 ? record::Arg::node(grad) : record::Arg::none(),
                      std::move(leafList), record::Arg::boolean(retainGraph)},
                     where);
  graph_.nodes[size_t(node)].outputs = gradients;
  std::vector<int> values;
  for (size_t k = 0; k < gradients.size(); ++k) {
    int get = addNode("getitem", "grad", {record::Arg::node(node), record::Arg::integer(int64_t(k))}, where);
    graph_.nodes[size_t(get)].outputs = {gradients[k]};
    values.push_back(get);
  }
  return values;
}

bool OpRecorder::addAccumulation(const at::Tensor& grad, int gradient, const std::string& where) {
  int64_t into = tensorArg(grad, "aten::add_.Tensor");
  if (into < 0) return false;
  delegate_.beforeWrite(grad);
  if (grad.has_storage()) lastWrite_[grad.storage().unsafeGetStorageImpl()] = graph_.nodes.size();
  int node = addNode("aten::add_", "add_", {record::Arg::node(into), record::Arg::node(gradient), record::Arg::integer(1)},
                     where);
  graph_.nodes[size_t(node)].overload = "Tensor";
  graph_.nodes[size_t(node)].outputs = {replay::metaOf(grad)};
  bind(grad, node);
  return true;
}

void OpRecorder::addDetached(const at::Tensor& alias, int value, const std::string& where) {
  int node = addNode("aten::detach", "data", {record::Arg::node(value)}, where);
  graph_.nodes[size_t(node)].outputs = {replay::metaOf(alias)};
  bind(alias, node);
}

int OpRecorder::addConstant(const at::Tensor& t, int64_t blob) {
  record::Node n;
  n.kind = record::NodeKind::GetAttr;
  n.name = names_.create("_tensor_constant");
  n.target = n.name;
  n.blob = blob;
  n.outputs.push_back(replay::metaOf(t));
  graph_.nodes.push_back(std::move(n));
  constants_.insert(int(graph_.nodes.size() - 1));
  return bind(t, int(graph_.nodes.size() - 1));
}

bool OpRecorder::writesArgument(const std::string& name, const c10::FunctionSchema& schema, size_t i,
                                c10::ArrayRef<const c10::IValue> inputs) {
  const auto& params = schema.arguments();
  if (i >= params.size()) return false;
  if (params[i].alias_info() && params[i].alias_info()->isWrite()) return true;
  if (i == 0 && record::isCollective(name)) return true;  // their schemas mark no write (graph.h)
  return (i == 3 || i == 4) && writesRunningStats(name, inputs);
}

void OpRecorder::onBeforeOperator(const std::string& name, const std::string& overload,
                                  c10::ArrayRef<const c10::IValue> inputs) {
  const c10::OperatorHandle* h = handleFor(name, overload);
  if (!h) return;
  if (!holding_.empty()) releaseUnreachable();
  // A tensor Python got from a factory is often a shallow copy of the one
  // the operator returned (same storage and view, another TensorImpl), found
  // by its view. An operator that changes the view (resize_, t_, squeeze_)
  // must be matched before it runs.
  if (record::changesGeometry(name))
    for (const c10::IValue& v : inputs)
      if (v.isTensor()) valueOf(v.toTensor());
  auto written = [&](const at::Tensor& t) {
    delegate_.beforeWrite(t);
    if (t.has_storage()) lastWrite_[t.storage().unsafeGetStorageImpl()] = graph_.nodes.size();
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!writesArgument(name, h->schema(), i, inputs)) continue;
    if (inputs[i].isTensor()) written(inputs[i].toTensor());
    if (inputs[i].isTensorList())  // Tensor(a!)[]: the foreach operators' in-place forms
      for (const at::Tensor& t : inputs[i].toTensorList()) written(t);
  }
}

// The graph value of this very tensor, else an input for a tensor from
// outside, and only then a value with the same storage and view: two
// arguments that alias at capture are two inputs, since the next call may
// pass unrelated tensors. -2 (and a graph break) for none.
int64_t OpRecorder::tensorArg(const at::Tensor& t, const std::string& op) {
  auto it = values_.find(t.unsafeGetTensorImpl());
  if (it != values_.end()) return it->second;
  int value = delegate_.externalTensor(t);
  if (value >= 0) return value;
  value = valueOf(t);
  if (value >= 0) return value;
  if (op == "aten::lift_fresh" || op == "aten::lift") return delegate_.pythonDataTensor(t);
  delegate_.breakGraph(op + " reads a tensor that neither the graph nor the function's inputs produced");
  return -2;
}

namespace {

// An int where the schema takes a dtype, layout or memory format is one.
record::Arg intArg(int64_t i, const c10::Argument& param) {
  using K = record::Arg::Kind;
  auto is = [&](c10::TypeKind kind) {
    auto real = param.real_type();
    return real->kind() == kind || (real->kind() == c10::TypeKind::OptionalType && real->containedType(0)->kind() == kind);
  };
  record::Arg out;
  if (is(c10::TypeKind::ScalarTypeType)) {
    out.kind = K::DType;
    out.s = replay::dtypeName(static_cast<c10::ScalarType>(i));
  } else if (is(c10::TypeKind::LayoutType)) {
    out.kind = K::Layout;
    out.s = i == int64_t(c10::kStrided) ? "strided" : "layout" + std::to_string(i);
  } else if (is(c10::TypeKind::MemoryFormatType)) {
    static const char* kFormats[] = {"contiguous_format", "preserve_format", "channels_last", "channels_last_3d"};
    out.kind = K::MemoryFormat;
    out.s = i >= 0 && i < 4 ? kFormats[i] : "memory_format" + std::to_string(i);
  } else {
    out = record::Arg::integer(i);
  }
  return out;
}

}  // namespace

// Tensor[], Tensor?[] and (in this libtorch) SymInt[] arrive as lists.
bool OpRecorder::listArg(const c10::IValue& v, const c10::Argument& param, record::Arg& out, const std::string& op) {
  using K = record::Arg::Kind;
  auto items = v.isTensorList() ? c10::impl::toList(v.toTensorList()).vec() : v.toListRef().vec();
  bool allInts = !items.empty() && std::all_of(items.begin(), items.end(), [](auto& x) { return x.isInt(); });
  if (allInts) {
    out.kind = K::IntList;
    for (auto& x : items) out.ints.push_back(x.toInt());
    return true;
  }
  bool allFloats = !items.empty() && std::all_of(items.begin(), items.end(), [](auto& x) { return x.isDouble(); });
  if (allFloats) {  // a Scalar[] of floats (the foreach optimizers' step sizes)
    out.kind = K::FloatList;
    for (auto& x : items) out.floats.push_back(x.toDouble());
    return true;
  }
  out.kind = K::NodeList;
  for (auto& x : items) {
    if (x.isNone()) {
      out.ints.push_back(-1);
    } else if (x.isTensor()) {
      int64_t node = tensorArg(x.toTensor(), op);
      if (node < 0) return false;
      out.ints.push_back(node);
    } else {
      delegate_.breakGraph(op + " takes a list holding a " + std::string(x.tagKind()));
      return false;
    }
  }
  if (items.empty() && param.real_type()->kind() == c10::TypeKind::ListType &&
      param.real_type()->containedType(0)->kind() == c10::TypeKind::IntType)
    out.kind = K::IntList;
  return true;
}

bool OpRecorder::argFor(const c10::IValue& v, const c10::Argument& param, record::Arg& out, const std::string& op) {
  using K = record::Arg::Kind;
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (t.unsafeGetTensorImpl()->is_wrapped_number()) {
      if (!c10::isFloatingType(t.scalar_type()) && !c10::isIntegralType(t.scalar_type(), true)) {
        delegate_.breakGraph(op + " takes a complex Python number, which records do not hold");
        return false;
      }
      out.kind = K::WrappedScalar;
      out.s = replay::dtypeName(t.scalar_type());
      wrappedValue(t, out);
      return true;
    }
    int64_t node = tensorArg(t, op);
    if (node < 0) return false;
    out = record::Arg::node(node);
    return true;
  }
  if (v.isNone()) {
    out = record::Arg::none();
  } else if (v.isBool()) {
    out = record::Arg::boolean(v.toBool());
  } else if (v.isInt()) {
    out = intArg(v.toInt(), param);
  } else if (v.isDouble()) {
    out = record::Arg::floating(v.toDouble());
  } else if (v.isString()) {
    out.kind = K::Str;
    out.s = v.toStringRef();
  } else if (v.isDevice()) {
    out.kind = K::Device;
    out.s = v.toDevice().str();
  } else if (v.isIntList()) {
    out.kind = K::IntList;
    out.ints = v.toIntVector();
  } else if (v.isDoubleList()) {
    out.kind = K::FloatList;
    out.floats = v.toDoubleVector();
  } else if (v.isBoolList()) {
    out.kind = K::BoolList;
    for (bool b : v.toBoolList()) out.ints.push_back(b);
  } else if (v.isTensorList() || v.isList()) {  // after the typed lists, which are lists too
    return listArg(v, param, out, op);
  } else if (v.isGenerator()) {
    delegate_.breakGraph(op + " takes an explicit random generator");
    return false;
  } else if (replay::takesGroup(param)) {
    if (!replay::isCurrentGroup(v)) {
      delegate_.breakGraph(op + " runs on a process group other than torch.distributed's default group, which "
                                "records do not name yet");
      return false;
    }
    out.kind = K::Group;
  } else if (replay::takesReduceOp(param)) {
    auto code = replay::reduceOpCode(v);
    if (!code) {
      delegate_.breakGraph(op + " reduces with an op a record cannot hold (PREMUL_SUM, AVG or a supplement)");
      return false;
    }
    out = record::Arg::integer(*code);
  } else if (v.isScalar()) {  // complex numbers
    delegate_.breakGraph(op + " takes a complex scalar, which records cannot hold");
    return false;
  } else {
    delegate_.breakGraph(op + " takes an argument of kind " + v.tagKind() + ", which records cannot hold");
    return false;
  }
  return true;
}

// The size hint a number stands for, when exactly one size (and no plain
// number of the call) has that value.
namespace {

bool sameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// How many of an operator's scalar arguments have a hint's value.
size_t occurrences(const record::Arg& a, const OpRecorder::NumberHint& h) {
  using K = record::Arg::Kind;
  bool wrappedInt = a.kind == K::WrappedScalar && a.s == "int64", wrappedReal = a.kind == K::WrappedScalar && a.s == "float64";
  if (a.kind == K::Int || wrappedInt) return !h.real && a.i == h.number;
  if (a.kind == K::Float || wrappedReal) return h.real && sameBits(a.f, h.f);
  if (a.kind == K::IntList && !h.real) return size_t(std::count(a.ints.begin(), a.ints.end(), h.number));
  return 0;
}

}  // namespace

// The hint a number argument is: the one hint with its value, where that
// names a size or lifted number. Where several hints (or a plain number)
// have the value, none is taken, and lifted numbers with it conflict.
OpRecorder::NumberHint* OpRecorder::hintFor(bool real, int64_t i, double f) {
  NumberHint* found = nullptr;
  bool ambiguous = false;
  auto same = [&](const NumberHint& h) { return h.real == real && (real ? sameBits(h.f, f) : h.number == i); };
  for (auto& h : hints_) {
    if (!same(h)) continue;
    bool named = h.value >= 0 || h.node >= 0;
    if (!named || (found && (found->value != h.value || found->dim != h.dim || found->node != h.node))) ambiguous = true;
    found = &h;
  }
  if (ambiguous) {
    for (auto& h : hints_)
      if (same(h) && h.node >= 0) h.conflict = true;
    return nullptr;
  }
  return found && !found->conflict ? found : nullptr;
}

int OpRecorder::hintNode(NumberHint& h, const std::string& where) {
  if (h.node >= 0) {
    h.lifted = h.liftedHere = true;
    return h.node;
  }
  return sizeNode(h.value, h.dim, where);
}

int OpRecorder::sizeNode(int value, int64_t dim, const std::string& where) {
  auto [it, fresh] = sizeNodes_.try_emplace({value, dim}, 0);
  if (!fresh) return it->second;
  record::Node n;
  n.kind = record::NodeKind::CallFunction;
  n.target = "aten::size";
  n.overload = "int";
  n.name = names_.create("size");
  n.args = {record::Arg::node(value), record::Arg::integer(dim)};
  n.where = where;
  graph_.nodes.push_back(std::move(n));
  return it->second = int(graph_.nodes.size() - 1);
}

// An operator's arguments that are sizes the program read or numbers it
// lifted. A lifted number's value in two arguments of one operator
// (slice(x, 1, 0, 1, 1) for x[:, :n] with n = 1) cannot be told apart: it
// conflicts, and the run then depends on its value.
void OpRecorder::liftHints(std::vector<record::Arg>& args, const std::vector<bool>& candidate, const std::string& where) {
  for (auto& h : hints_) {
    if (h.node < 0) continue;
    size_t seen = 0;
    for (size_t i = 0; i < args.size(); ++i)
      if (candidate[i]) seen += matchesByPosition(args[i]) ? 1 : occurrences(args[i], h);  // by position: its own entry
    if (seen > 1) h.conflict = true;
  }
  for (size_t i = 0; i < args.size(); ++i)
    if (candidate[i]) liftHint(args[i], where);
  for (auto& h : hints_) {
    if (h.liftedHere && ++h.takenBy > 1) h.conflict = true;
    h.liftedHere = false;
  }
}

// x.view(b, t // 2, 4): an int list of as many entries as the call passed
// numbers, each equal to the number in its place, takes them by position;
// so does a float list (the foreach optimizers' step sizes, one per
// parameter and often all equal).
bool OpRecorder::matchesByPosition(const record::Arg& a) const {
  using K = record::Arg::Kind;
  size_t n = a.kind == K::IntList ? a.ints.size() : a.kind == K::FloatList ? a.floats.size() : 0;
  if (n == 0 || n != hints_.size()) return false;
  for (size_t k = 0; k < n; ++k) {
    const NumberHint& h = hints_[k];
    if (a.kind == K::IntList ? h.real || a.ints[k] != h.number : !h.real || !sameBits(a.floats[k], h.f)) return false;
  }
  return true;
}

// An int list equal to the call's numbers matches them by position
// (x.view(b, n, 4, 64)), anything else by value where that is unambiguous.
void OpRecorder::liftHint(record::Arg& a, const std::string& where) {
  using K = record::Arg::Kind;
  auto liftTo = [&](NumberHint* h, bool numbersOnly) {
    if (h && (!numbersOnly || h->node >= 0)) a = record::Arg::node(hintNode(*h, where));
  };
  switch (a.kind) {
    case K::Int: return liftTo(hintFor(false, a.i, 0), false);
    case K::Float: return liftTo(hintFor(true, 0, a.f), true);
    case K::WrappedScalar:
      if (a.s == "int64") liftTo(hintFor(false, a.i, 0), true);
      if (a.s == "float64") liftTo(hintFor(true, 0, a.f), true);
      return;
    case K::IntList: break;
    case K::FloatList: return liftFloatList(a, where);
    default: return;
  }
  bool positional = matchesByPosition(a);
  std::vector<int64_t> pairs;
  bool lifted = false;
  for (size_t k = 0; k < a.ints.size(); ++k) {
    NumberHint* h = nullptr;
    if (!positional) h = hintFor(false, a.ints[k], 0);
    else if ((hints_[k].value >= 0 || hints_[k].node >= 0) && !hints_[k].conflict) h = &hints_[k];
    pairs.push_back(h ? 1 : 0);
    pairs.push_back(h ? hintNode(*h, where) : a.ints[k]);
    lifted = lifted || h;
  }
  if (!lifted) return;
  a.kind = K::SizeList;
  a.ints = std::move(pairs);
}

// A float list takes numbers the graph computes by position, else each
// entry by value where that is unambiguous; a float the program computed
// from constants alone stays a constant.
void OpRecorder::liftFloatList(record::Arg& a, const std::string& where) {
  bool positional = matchesByPosition(a);
  std::vector<int64_t> nodes;
  bool lifted = false;
  for (size_t k = 0; k < a.floats.size(); ++k) {
    NumberHint* h = positional ? &hints_[k] : hintFor(true, 0, a.floats[k]);
    bool take = h && h->node >= 0 && !h->conflict;
    nodes.push_back(take ? hintNode(*h, where) : -1);
    lifted = lifted || take;
  }
  if (!lifted) return;
  a.kind = record::Arg::Kind::NumberList;
  a.ints = std::move(nodes);
}

std::vector<int> OpRecorder::takeUnliftedNumbers() {
  std::vector<int> out;
  for (auto& h : hints_)
    if (h.node >= 0 && (!h.lifted || h.conflict)) out.push_back(h.node);
  hints_.clear();
  return out;
}

// A collective outside grad regions, whose record then guards the group's
// size and backend; the other c10d operators (barrier, all_gather, ...)
// are breaks.
bool OpRecorder::collectiveAllowed(const std::string& op, record::GradMode grad) {
  if (grad != record::GradMode::Ambient) {
    delegate_.breakGraph(op + " runs inside a grad mode region, which records do not hold collectives in");
    return false;
  }
  delegate_.readRuntimeState("dist_world_size");
  delegate_.readRuntimeState("dist_backend");
  return true;
}

void OpRecorder::onOperator(const std::string& name, const std::string& overload,
                            const std::vector<c10::IValue>& inputs, const std::vector<c10::IValue>& outputs) {
  if (isMetadataOp(name) || isProfilerRange(name) || readsFixedNumbers(inputs, outputs)) return;
  std::string op = overload.empty() ? name : name + "." + overload;
  if (name == "aten::requires_grad_" || name == "aten::retain_grad") {
    delegate_.breakGraph(op + " changes a tensor's autograd flags, which a record cannot replay");
    return;
  }
  bool gradEnabled = at::GradMode::is_enabled();
  if (gradEnabled != gradEnabledAtEntry_ && !gradRegions_) {
    delegate_.breakGraph(op + " runs with grad mode " + (gradEnabled ? "enabled" : "disabled") +
                         ", switched by code magpy did not trace, so the record cannot say where the region starts");
    return;
  }
  const c10::OperatorHandle* h = handleFor(name, overload);
  if (!h) {
    delegate_.breakGraph(op + " has no schema in this libtorch");
    return;
  }
  if (name.rfind("c10d::", 0) == 0 && !record::isCollective(name)) {
    delegate_.breakGraph(op + " is a torch.distributed operator records do not hold (all_reduce and broadcast are)");
    return;
  }
  const auto& params = h->schema().arguments();
  record::Node n;
  n.kind = record::NodeKind::CallFunction;
  n.target = name;
  n.overload = overload;
  n.where = delegate_.sourceLocation();
  if (gradEnabled != gradEnabledAtEntry_) n.grad = gradEnabled ? record::GradMode::On : record::GradMode::Off;
  bool dataShape = hasDataDependentOutputShape(name, overload, inputs);
  bool collective = record::isCollective(name);
  if (collective && !collectiveAllowed(op, n.grad)) return;
  for (size_t i = 0; i < inputs.size() && i < params.size(); ++i) {
    record::Arg a;
    if (!argFor(inputs[i], params[i], a, op)) return;
    if (inputs[i].isTensor() && hasDataDependentShape(inputs[i].toTensor())) dataShape = true;
    n.args.push_back(std::move(a));
  }
  if (!hints_.empty()) {
    // x + n passes alpha=1 itself: an alpha of 1 is not the program's number
    // (torch.add(x, y, alpha=n) with n == 1 then leaves n untaken).
    std::vector<bool> candidate(n.args.size(), true);
    for (size_t i = 0; i < n.args.size(); ++i)
      candidate[i] = !(params[i].name() == "alpha" && n.args[i].kind == record::Arg::Kind::Int && n.args[i].i == 1);
    liftHints(n.args, candidate, n.where);
  }

  // Flatten the results, each with its index among the operator's returns
  // (in a tensor list, among the list's elements): one tensor, several, or
  // a list. An undefined tensor (Python's None, the attention weights the
  // fused attention does not compute) is no value of the graph.
  std::vector<std::pair<int64_t, at::Tensor>> results;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const c10::IValue& out = outputs[i];
    if (out.isTensor()) {
      if (out.toTensor().defined()) results.emplace_back(int64_t(i), out.toTensor());
    } else if (out.isTensorList()) {
      int64_t k = 0;
      for (const at::Tensor& t : out.toTensorList()) results.emplace_back(k++, t);
    } else if (out.isNone() || (collective && replay::isWork(out))) {
      continue;  // a collective's Work: replay waits for it
    } else if (outputs.size() == 1 && readsContentsOnly(name) && checksInputs(inputs)) {
      return;
    } else {
      delegate_.breakGraph(op + " returns a " + std::string(out.tagKind()) +
                        " computed from tensor contents; Python code that uses it cannot become a graph");
      return;
    }
  }
  for (auto& result : results) n.outputs.push_back(replay::metaOf(result.second));
  noteAllocations(inputs, results);

  std::string base = name.substr(name.find("::") == std::string::npos ? 0 : name.find("::") + 2);
  n.name = names_.create(base);
  graph_.nodes.push_back(std::move(n));
  int node = int(graph_.nodes.size() - 1);
  bool single = outputs.size() == 1 && outputs[0].isTensor();
  for (auto& [index, tensor] : results) {
    int value = node;
    if (!single) {
      record::Node get;
      get.kind = record::NodeKind::CallFunction;
      get.target = "getitem";
      get.name = names_.create("getitem");
      get.args = {record::Arg::node(node), record::Arg::integer(index)};
      get.outputs.push_back(replay::metaOf(tensor));
      get.where = graph_.nodes[size_t(node)].where;
      graph_.nodes.push_back(std::move(get));
      value = int(graph_.nodes.size() - 1);
    }
    bind(tensor, value);
    if (dataShape) dataDependentShape_.insert(tensor.unsafeGetTensorImpl());
  }
}

}  // namespace magpy::capture

#include "magpy/replay/state.h"

#include <ATen/ops/abs.h>
#include <ATen/ops/max.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/any.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/logical_not.h>
#include <ATen/ops/logical_or.h>
#include <ATen/ops/masked_fill.h>
#include <ATen/ops/masked_select.h>
#include <ATen/ops/nan_to_num.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/isnan.h>

#include <ATen/Context.h>
#include <c10/core/DefaultDtype.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <ATen/PythonTorchFunctionTLS.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/csrc/autograd/anomaly_mode.h>

#include <set>

#include "magpy/replay/tensors.h"
#include "magpy/support/error.h"
#include "replay/collectives.h"
#include "replay/native_store.h"

namespace magpy::replay {

Value& Globals::of(const std::string& module) {
  auto it = modules.find(module);
  if (it == modules.end()) it = modules.emplace(module, Value::dict({}, {})).first;
  return it->second;
}

std::optional<record::Atom> runtimeState(const std::string& name) {
  if (name == "grad_enabled") return record::Atom::boolean(c10::GradMode::is_enabled());
  if (name == "inference_mode") return record::Atom::boolean(c10::InferenceMode::is_enabled());
  if (name == "deterministic_algorithms") return record::Atom::boolean(at::globalContext().deterministicAlgorithms());
  if (name == "num_threads") return record::Atom::integer(at::get_num_threads());
  if (name == "anomaly_mode") return record::Atom::boolean(torch::autograd::AnomalyMode::is_enabled());
  if (name == "autocast") return record::Atom::boolean(at::autocast::is_enabled());
  if (name == "autocast_cpu") return record::Atom::boolean(at::autocast::is_cpu_enabled());
  if (name == "autocast_dtype") return record::Atom::named(record::Atom::Kind::DType, dtypeName(at::autocast::get_autocast_gpu_dtype()));
  if (name == "autocast_cpu_dtype")
    return record::Atom::named(record::Atom::Kind::DType, dtypeName(at::autocast::get_autocast_cpu_dtype()));
  if (name == "torch_modes")
    return record::Atom::integer(at::impl::PythonTorchFunctionTLS::stack_len() +
                                 c10::impl::TorchDispatchModeTLS::stack_len());
  if (name == "default_dtype")
    return record::Atom::named(record::Atom::Kind::DType, dtypeName(c10::typeMetaToScalarType(c10::get_default_dtype())));
  return groupState(name);
}

const std::map<std::string, record::Atom>& settableRuntimeStates() {
  static const std::map<std::string, record::Atom> kStates = {
      {"default_dtype", record::Atom::named(record::Atom::Kind::DType, "float32")},
      {"grad_enabled", record::Atom::boolean(false)},  // native replay's default: no script grad mode
      {"inference_mode", record::Atom::boolean(false)},
      {"deterministic_algorithms", record::Atom::boolean(false)},
      {"anomaly_mode", record::Atom::boolean(false)},
      {"autocast", record::Atom::boolean(false)},
      {"autocast_cpu", record::Atom::boolean(false)},
      {"autocast_dtype", record::Atom::named(record::Atom::Kind::DType, "float16")},  // libtorch's defaults
      {"autocast_cpu_dtype", record::Atom::named(record::Atom::Kind::DType, "bfloat16")},
  };
  return kStates;
}

Value resolve(const record::AccessPath& path, const CallState& state) {
  return *resolvePath(NativeStore(state), path);
}

namespace {

// Sets interpreter state a logged update changed (the script called
// torch.set_default_dtype between calls).
void setRuntimeState(const record::AccessPath& path, const Value& value) {
  const record::Atom* atom = value.kind == Value::Kind::Atom ? &value.atom : nullptr;
  if (path.name == "default_dtype" && atom && atom->kind == record::Atom::Kind::DType &&
      (atom->s == "float32" || atom->s == "float64")) {
    c10::set_default_dtype(c10::scalarTypeToTypeMeta(dtypeFromName(atom->s)));
    return;
  }
  bool lowPrecision = atom && atom->kind == record::Atom::Kind::DType && (atom->s == "float16" || atom->s == "bfloat16");
  if (path.name == "autocast_dtype" && lowPrecision) return at::autocast::set_autocast_gpu_dtype(dtypeFromName(atom->s));
  if (path.name == "autocast_cpu_dtype" && lowPrecision) return at::autocast::set_autocast_cpu_dtype(dtypeFromName(atom->s));
  bool flag = atom && atom->kind == record::Atom::Kind::Bool && atom->i != 0;
  if (atom && atom->kind == record::Atom::Kind::Bool) {
    if (path.name == "deterministic_algorithms") return at::globalContext().setDeterministicAlgorithms(flag, false);
    if (path.name == "anomaly_mode") return torch::autograd::AnomalyMode::set_enabled(flag);
    if (path.name == "autocast") return at::autocast::set_enabled(flag);
    if (path.name == "autocast_cpu") return at::autocast::set_cpu_enabled(flag);
  }
  throw Error("cannot set " + record::toString(path) + " to " + describe(value) +
              " (replay sets default_dtype to float32 or float64, autocast_dtype and autocast_cpu_dtype to float16 "
              "or bfloat16, and deterministic_algorithms, anomaly_mode, autocast and autocast_cpu to a bool)");
}

// x.grad = g, checked as torch checks it in Python: None, or a tensor of
// x's shape, dtype and device.
}  // namespace

bool parentExists(const record::AccessPath& path, const CallState& state) {
  if (path.steps.empty()) return true;
  record::AccessPath parent = path;
  parent.steps.pop_back();
  if (path.steps.size() >= 2 && record::isInstanceDictKey(path, path.steps.size() - 2)) parent.steps.pop_back();
  return bool(resolvePath(NativeStore(state), parent, true));
}

// Through the store's writers: logged updates and mocks store the same way.
namespace {

// The object a path's last step names into, and that step: obj.__dict__['name']
// is obj.name.
std::pair<record::AccessPath, record::PathStep> splitLast(const record::AccessPath& path, const char* what) {
  if (path.steps.empty()) throw Error(std::string("cannot ") + what + " the root " + record::toString(path));
  record::AccessPath parentPath = path;
  parentPath.steps.pop_back();
  record::PathStep last = path.steps.back();
  if (path.steps.size() >= 2 && record::isInstanceDictKey(path, path.steps.size() - 2)) {
    parentPath.steps.pop_back();
    last = record::PathStep::attr(last.key.s);
  }
  return {std::move(parentPath), std::move(last)};
}

}  // namespace

void remove(const record::AccessPath& path, const CallState& state) {
  auto [parentPath, last] = splitLast(path, "remove");
  NativeStore store(state);
  NativeStore::Handle parent = resolvePath(store, parentPath);
  try {
    switch (last.kind) {
      case record::PathStep::Kind::Attr: return store.delAttr(parent, last.name);
      case record::PathStep::Kind::Key: return store.delItem(parent, last.key);
      case record::PathStep::Kind::Index: return store.delItem(parent, record::Atom::integer(last.index));
      case record::PathStep::Kind::ObjectKey: break;
    }
  } catch (const Error& e) {
    throw Error("cannot remove " + record::toString(path) + ": " + e.what());
  }
  throw Error("cannot remove " + record::toString(path) + ": a dict key that is an object is not removed natively");
}

namespace {

// A tensor the script wrote in place or gave new memory (w.data = t)
// between calls: the same tensor natively, so every path holding it (tied
// weights, an optimizer's parameters) sees the change. Its .grad stays: a
// change to that is an update of its own.
void refillTensor(at::Tensor& target, const at::Tensor& value) {
  at::NoGradGuard noGrad;
  if (target.sizes() == value.sizes() && target.strides() == value.strides() &&
      target.scalar_type() == value.scalar_type() && target.device() == value.device())
    target.copy_(value);
  else
    target.set_data(value);
  if (target.requires_grad() == value.requires_grad()) return;
  if (!target.is_leaf()) throw Error("its requires_grad changed, and it is not a leaf tensor");
  target.set_requires_grad(value.requires_grad());
}

}  // namespace

void refill(const record::AccessPath& path, const Value& value, const CallState& state) {
  NativeStore store(state);
  NativeStore::Handle target = resolvePath(store, path, true);
  // Not native state until now (no record read it), or native state holds
  // no such object there (a placeholder for memory a record file keeps
  // apart): the value is stored whole.
  if (!target || target->kind != value.kind) return assign(path, value, state);
  try {
    if (value.kind == Value::Kind::Tensor) return refillTensor(target->tensor, value.tensor);
    store.assignContents(target, value);
    if (target->kind == Value::Kind::Dict) target->heap->defaultFactory = value.heap->defaultFactory;
  } catch (const Error& e) {
    throw Error("cannot change " + record::toString(path) + " in place: " + e.what());
  }
}

void assign(const record::AccessPath& path, Value value, const CallState& state) {
  if (path.root == record::AccessPath::Root::Runtime && path.steps.empty()) return setRuntimeState(path, value);
  auto [parentPath, last] = splitLast(path, "replace");
  NativeStore store(state);
  NativeStore::Handle parent = resolvePath(store, parentPath);
  try {
    switch (last.kind) {
      case record::PathStep::Kind::Attr: store.setAttr(parent, last.name, std::move(value)); return;
      case record::PathStep::Kind::Key: store.setItem(parent, last.key, std::move(value)); return;
      case record::PathStep::Kind::Index: store.setItem(parent, record::Atom::integer(last.index), std::move(value)); return;
      case record::PathStep::Kind::ObjectKey:
        store.setItemOf(parent, resolvePath(store, last.keyOf.at(0)), std::move(value));
        return;
    }
  } catch (const Error& e) {
    throw Error("cannot store " + record::toString(path) + ": " + e.what());
  }
}

namespace {

// Where build() takes tensor contents from: blobs it may take the bytes of
// (adoptable, in a file it may change) are not copied.
struct BlobSource {
  const record::RecordFile& file;
  record::RecordFile* adopting = nullptr;
  const std::vector<bool>* adoptable = nullptr;

  at::Tensor tensor(const record::Value& v) const {
    if (adopting && v.blob < adoptable->size() && (*adoptable)[v.blob])
      return tensorAdoptingBlob(adopting->blobs.at(v.blob), v.meta);
    return tensorFromBlob(file.blobs.at(v.blob), v.meta);
  }
};

// What build() has made: values by id, so a Ref is the same heap object
// (or tensor) again, and the dicts whose keys are objects, which may be
// defined after the dict: their keys are set once the tree is built.
struct Made {
  std::map<uint32_t, Value> byId;
  std::set<uint32_t> open;  // objects whose elements or attributes are being built
  std::vector<std::pair<std::shared_ptr<HeapObject>, const std::vector<uint32_t>*>> objectKeyed;

  void setObjectKeys() {
    for (auto& [dict, refs] : objectKeyed) {
      dict->keyObjects.resize(refs->size());
      for (size_t i = 0; i < refs->size(); ++i) {
        if (!(*refs)[i]) continue;
        auto it = byId.find((*refs)[i]);
        if (it == byId.end() || it->second.kind != Value::Kind::Tensor)
          throw Error("the record is corrupted: a dict's key is object #" + std::to_string((*refs)[i]) + ", no tensor");
        dict->keyObjects[i] = it->second;
      }
    }
  }
};

// A weakref.ref whose referent holds it (validated: only there may a Ref
// name an object being built) keeps it weakly, so that neither keeps the
// other alive.
void holdReferentWeakly(const record::Value& v, HeapObject& object, const Made& made) {
  auto at = std::find(object.names.begin(), object.names.end(), record::kWeakReferent);
  if (at == object.names.end()) return;
  size_t i = size_t(at - object.names.begin());
  const record::Value& item = v.items[i];
  if (item.kind != record::Value::Kind::Ref || !made.open.count(item.id) || !object.items[i].heap) return;
  object.referent = object.items[i].heap;
  object.referentKind = object.items[i].kind;
  object.names.erase(at);
  object.items.erase(object.items.begin() + std::ptrdiff_t(i));
}

// Builds runtime values depth first.
Value build(const record::Value& v, const BlobSource& file, Made& made) {
  using K = record::Value::Kind;
  if (v.kind == K::Ref) {
    auto it = made.byId.find(v.id);
    if (it == made.byId.end()) throw Error("the record is corrupted: a value refers to object #" + std::to_string(v.id) + ", defined nowhere before");
    return it->second;
  }
  auto children = [&] {
    std::vector<Value> out;
    out.reserve(v.items.size());
    for (auto& item : v.items) out.push_back(build(item, file, made));
    return out;
  };
  Value out;
  switch (v.kind) {
    case K::Atom: out = Value::ofAtom(v.atom); break;
    case K::Tensor:
      out = Value::ofTensor(file.tensor(v));
      if (!v.items.empty()) {  // its .grad (validated: a tensor like it, or a Ref checked here)
        Value grad = build(v.items[0], file, made);
        if (grad.kind != Value::Kind::Tensor || !grad.tensor.sizes().equals(out.tensor.sizes()) ||
            grad.tensor.scalar_type() != out.tensor.scalar_type())
          throw Error("the record is corrupted: a tensor's .grad is not a tensor like it");
        out.tensor.mutable_grad() = grad.tensor;
      }
      break;
    case K::Tuple:
    case K::List:
    case K::Dict:
      out = v.kind == K::Tuple ? Value::tuple({}) : v.kind == K::List ? Value::list({}) : Value::dict(v.keys, {});
      if (!v.type.empty()) out.heap->type = v.type;  // torch.Size, OrderedDict, ...
      if (v.atom.kind == record::Atom::Kind::Str) out.heap->defaultFactory = v.atom.s;
      if (v.id) made.byId[v.id] = out, made.open.insert(v.id);  // registered before its elements: they may refer to it
      if (!v.keyRefs.empty()) made.objectKeyed.emplace_back(out.heap, &v.keyRefs);
      out.heap->items = children();
      made.open.erase(v.id);
      return out;
    case K::Object:
    case K::Opaque:
      out = v.kind == K::Object ? Value::object(v.type) : Value::opaque(v.type);
      if (v.kind == K::Object) out.atom = v.atom;  // an int, float or str subclass: its value
      if (v.id) made.byId[v.id] = out, made.open.insert(v.id);
      out.heap->names = v.names;
      out.heap->items = children();
      made.open.erase(v.id);
      holdReferentWeakly(v, *out.heap, made);
      return out;
    case K::Ref: break;
  }
  if (v.id) made.byId[v.id] = out;
  return out;
}

}  // namespace

Value materialize(const record::Value& v, const record::RecordFile& file) {
  Made made;
  Value out = build(v, BlobSource{file}, made);
  made.setObjectKeys();
  return out;
}

Value materializeAdopting(const record::Value& v, record::RecordFile& file, const std::vector<bool>& adoptable) {
  Made made;
  Value out = build(v, BlobSource{file, &file, &adoptable}, made);
  made.setObjectKeys();
  return out;
}

namespace {

// torch.testing.assert_close's per-dtype defaults.
std::pair<double, double> defaultTolerance(c10::ScalarType t) {
  switch (t) {
    case c10::kHalf: return {1e-3, 1e-5};
    case c10::kBFloat16: return {1.6e-2, 1e-5};
    case c10::kDouble:
    case c10::kComplexDouble: return {1e-7, 1e-7};
    default: return {1.3e-6, 1e-5};
  }
}

// Pairs of heap objects already compared: values may share sub-objects or
// contain themselves (a list that holds itself), so each pair is compared
// once, whatever the number of paths that reach it.
using Compared = std::set<std::pair<const HeapObject*, const HeapObject*>>;

void compareInto(const Value& actual, const Value& expected, const Tolerance& tol, const std::string& where,
                 Comparison& out, Compared& compared) {
  auto differ = [&](const std::string& what) {
    if (out.difference.empty()) out.difference = where + ": " + what;
  };
  if (actual.kind != expected.kind) return differ("expected " + describe(expected) + ", got " + describe(actual));
  switch (actual.kind) {
    case Value::Kind::Atom:
      if (actual.atom != expected.atom) differ("expected " + describe(expected) + ", got " + describe(actual));
      return;
    case Value::Kind::Tensor: return compareTensors(actual.tensor, expected.tensor, tol, where, out);
    case Value::Kind::Object:
    case Value::Kind::Opaque:
      if (actual.heap->type != expected.heap->type) differ("expected " + describe(expected) + ", got " + describe(actual));
      return;
    default: {
      if (!compared.insert({actual.heap.get(), expected.heap.get()}).second) return;
      auto& ai = actual.heap->items;
      auto& ei = expected.heap->items;
      bool sameKeys = actual.heap->keys == expected.heap->keys;
      for (size_t i = 0; sameKeys && i < ai.size(); ++i)  // object keys: in the same places
        sameKeys = actual.heap->objectKeyAt(i) == expected.heap->objectKeyAt(i);
      if (ai.size() != ei.size() || !sameKeys)
        return differ("expected " + describe(expected) + ", got " + describe(actual));
      for (size_t i = 0; i < ai.size(); ++i) {
        std::string sub = actual.kind == Value::Kind::Dict ? where + "[" + actual.heap->keyText(i) + "]"
                                                           : where + "[" + std::to_string(i) + "]";
        compareInto(ai[i], ei[i], tol, sub, out, compared);
      }
    }
  }
}

}  // namespace

void compareTensors(const at::Tensor& a, const at::Tensor& e, const Tolerance& tol, const std::string& where,
                    Comparison& out) {
  auto differ = [&](const std::string& what) {
    if (out.difference.empty()) out.difference = where + ": " + what;
  };
  if (a.scalar_type() != e.scalar_type() || a.sizes() != e.sizes())
    return differ("expected " + describe(Value::ofTensor(e)) + ", got " + describe(Value::ofTensor(a)));
  at::Tensor ac = a.detach().to(c10::kCPU), ec = e.detach().to(c10::kCPU);
  if (!at::isFloatingType(ac.scalar_type()) && !at::isComplexType(ac.scalar_type())) {
    if (!at::equal(ac, ec)) differ("values differ");
    return;
  }
  // Non-finite values must match exactly (NaN where NaN, the same infinities).
  at::Tensor nonFinite = at::logical_or(at::logical_not(at::isfinite(ac)), at::logical_not(at::isfinite(ec)));
  if (ac.numel() && nonFinite.any().item<bool>()) {
    at::Tensor an = ac.masked_select(nonFinite), en = ec.masked_select(nonFinite);
    if (!at::equal(at::isnan(an), at::isnan(en)) || !at::equal(at::nan_to_num(an, 0.0), at::nan_to_num(en, 0.0)))
      return differ("NaN or infinite values differ");
    ac = ac.masked_fill(nonFinite, 0);
    ec = ec.masked_fill(nonFinite, 0);
  }
  double diff = ac.numel() ? at::abs(at::sub(ac, ec)).max().item<double>() : 0.0;
  double scale = ec.numel() ? at::abs(ec).max().item<double>() : 0.0;
  out.max_abs_diff = std::max(out.max_abs_diff, diff);
  auto [rtol, atol] = defaultTolerance(ac.scalar_type());
  if (diff > tol.atol.value_or(atol) + tol.rtol.value_or(rtol) * scale)
    differ("values differ (max abs diff " + std::to_string(diff) + ", largest magnitude " + std::to_string(scale) + ")");
}

Comparison compare(const Value& actual, const Value& expected, const Tolerance& tol, const std::string& where) {
  Comparison out;
  Compared compared;
  compareInto(actual, expected, tol, where, out, compared);
  return out;
}

}  // namespace magpy::replay

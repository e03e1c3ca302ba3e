#include "replay/native_store.h"

#include <ATen/ops/real.h>

#include "magpy/replay/mock.h"

namespace magpy::replay {
namespace {

bool hasAttributes(const Value& v) { return v.kind == Value::Kind::Object || v.kind == Value::Kind::Opaque; }
bool isSequence(const Value& v) { return v.kind == Value::Kind::List || v.kind == Value::Kind::Tuple; }

// items[i], counting from the end for negative i; null when out of range.
Value* itemAt(std::vector<Value>& items, int64_t i) {
  if (i < 0) i += int64_t(items.size());
  return i >= 0 && size_t(i) < items.size() ? &items[size_t(i)] : nullptr;
}

// The tensor attributes a path may step through, as torch.Tensor gives them
// in Python: .data (the same storage outside autograd), .grad (None until a
// backward pass sets it) and .real (the tensor itself unless complex).
const char* const kTensorAttributes = "data, grad and real";

NativeStore::Handle tensorAttribute(const Value& t, const std::string& name) {
  if (name == "data") return Value::ofTensor(t.tensor.detach());
  if (name == "grad") return t.tensor.grad().defined() ? Value::ofTensor(t.tensor.grad()) : Value::ofAtom({});
  if (name == "real") return t.tensor.is_complex() ? Value::ofTensor(at::real(t.tensor)) : t;
  return std::nullopt;
}

std::vector<Value> unwrap(std::vector<NativeStore::Handle> items) {
  std::vector<Value> out;
  out.reserve(items.size());
  for (auto& item : items) out.push_back(std::move(*item));
  return out;
}

}  // namespace

NativeStore::Handle NativeStore::root(const record::AccessPath& root) const {
  using Root = record::AccessPath::Root;
  switch (root.root) {
    case Root::Self:
      return state_.self;
    case Root::Arg:
      if (root.index == -1) return Value::tuple(state_.args);
      if (root.index < 0 || size_t(root.index) >= state_.args.size()) return std::nullopt;
      return state_.args[size_t(root.index)];
    case Root::Kwarg: {
      if (root.name.empty()) return state_.kwargs;
      Value* v = state_.kwargs.heap->item(record::Atom::string(root.name));
      return v ? Handle(*v) : std::nullopt;
    }
    case Root::Global:
      return state_.globals->of(root.name.empty() ? state_.module : root.name);
    case Root::Runtime: {
      // magpy-run's own thread count says nothing of the script's: a record
      // that depended on the script's is refused.
      if (root.name == "num_threads") return std::nullopt;
      if (root.name == "grad_enabled") return Handle(Value::ofAtom(record::Atom::boolean(state_.scriptGradMode)));
      if (root.name == "inference_mode") return Handle(Value::ofAtom(record::Atom::boolean(state_.scriptInferenceMode)));
      auto value = runtimeState(root.name);
      return value ? Handle(Value::ofAtom(*value)) : std::nullopt;
    }
  }
  return std::nullopt;
}

std::string NativeStore::rootMissing(const record::AccessPath& root) const {
  switch (root.root) {
    case record::AccessPath::Root::Arg:
      return "the call has " + std::to_string(state_.args.size()) + " positional arguments";
    case record::AccessPath::Root::Kwarg:
      return "the call has no keyword argument '" + root.name + "'";
    case record::AccessPath::Root::Runtime:
      if (root.name == "num_threads") return "native replay does not stand for the script's thread count";
      return "magpy knows no interpreter state of that name";
    default:
      return "it is not in the state";
  }
}

NativeStore::Handle NativeStore::step(const Handle& parent, const PathTree& tree, int node) const {
  const PathTree::Node& n = tree.node(node);
  const Value& p = *parent;
  switch (n.kind) {
    case PathTree::StepKind::Attr:
      if (p.kind == Value::Kind::Tensor) return tensorAttribute(p, n.step.name);
      if (p.kind == Value::Kind::Dict && n.step.name == "default_factory" && !p.heap->defaultFactory.empty())
        return Value::opaque(p.heap->defaultFactory);
      [[fallthrough]];
    case PathTree::StepKind::InstanceAttr:  // native objects hold only instance attributes
      if (!hasAttributes(p)) return std::nullopt;
      if (n.step.name == record::kWeakReferent)
        if (auto referent = p.heap->weakReferent()) return referent;
      if (Value* v = p.heap->attr(n.step.name)) return *v;
      return std::nullopt;
    case PathTree::StepKind::Index:
      if (!isSequence(p)) return std::nullopt;
      if (Value* v = itemAt(p.heap->items, n.step.index)) return *v;
      return std::nullopt;
    case PathTree::StepKind::Key:
      if (p.kind != Value::Kind::Dict) return std::nullopt;
      if (Value* v = p.heap->item(n.step.key)) return *v;
      return std::nullopt;
    case PathTree::StepKind::ObjectKey: break;  // itemOf
  }
  return std::nullopt;
}

NativeStore::Handle NativeStore::itemOf(const Handle& parent, const Handle& key) const {
  if (parent->kind != Value::Kind::Dict || key->kind != Value::Kind::Tensor) return std::nullopt;
  if (Value* v = parent->heap->itemOf(*key)) return *v;
  return std::nullopt;
}

std::string NativeStore::lacks(const Handle& parent, const PathTree& tree, int node) const {
  const PathTree::Node& n = tree.node(node);
  const Value& p = *parent;
  switch (n.kind) {
    case PathTree::StepKind::Attr:
    case PathTree::StepKind::InstanceAttr:
      if (p.kind == Value::Kind::Tensor)
        return " is " + replay::describe(p) + ", a tensor: native replay knows its " + kTensorAttributes +
               ", not '" + n.step.name + "'";
      if (!hasAttributes(p)) return " is " + replay::describe(p) + ", which has no attributes";
      return " has no attribute '" + n.step.name + "'";
    case PathTree::StepKind::Index:
      if (!isSequence(p)) return " is " + replay::describe(p) + ", not a list or tuple";
      return " has " + std::to_string(p.heap->items.size()) + " elements";
    case PathTree::StepKind::Key:
      if (p.kind != Value::Kind::Dict) return " is " + replay::describe(p) + ", not a dict";
      return " has no key " + record::toString(n.step.key);
    case PathTree::StepKind::ObjectKey:
      if (p.kind != Value::Kind::Dict) return " is " + replay::describe(p) + ", not a dict";
      return " has no key that is the tensor at " + record::toString(n.step.keyOf.at(0));
  }
  return " lacks it";
}

std::optional<record::Atom> NativeStore::atom(const Handle& v) const {
  if (v->kind == Value::Kind::Atom) return v->atom;
  // An instance of an int, float or str subclass (TorchVersion, numpy.float64)
  if (v->kind == Value::Kind::Object && v->atom.kind != record::Atom::Kind::None) return v->atom;
  return std::nullopt;
}

std::optional<int64_t> NativeStore::length(const Handle& v) const {
  if (isSequence(*v) || v->kind == Value::Kind::Dict) return int64_t(v->heap->items.size());
  return std::nullopt;
}

std::optional<std::vector<record::Atom>> NativeStore::keys(const Handle& v) const {
  if (v->kind == Value::Kind::Dict && v->heap->keyObjects.empty()) return v->heap->keys;
  return std::nullopt;
}

NativeStore::Handle NativeStore::output(const c10::IValue& v) const { return valueOf(v); }

NativeStore::Handle NativeStore::sequence(bool tuple, std::vector<Handle> items) const {
  return tuple ? Value::tuple(unwrap(std::move(items))) : Value::list(unwrap(std::move(items)));
}

NativeStore::Handle NativeStore::dict(const std::vector<record::Atom>& keys, std::vector<Handle> items,
                                      const std::string& type) const {
  Value d = Value::dict(keys, unwrap(std::move(items)));
  if (!type.empty()) d.heap->type = type;
  return d;
}

namespace {

void require(bool ok, const Value& target, const char* what) {
  if (!ok) throw Error("the target is " + describe(target) + ", not " + what);
}

// x.data = y keeps x's identity with y's contents; x.grad takes None or
// a tensor like x.
bool setTensorAttr(const at::Tensor& tensor, const std::string& name, const Value& value) {
  if (name == "data" && value.kind == Value::Kind::Tensor) {
    tensor.set_data(value.tensor);
    return true;
  }
  if (name != "grad") throw Error("a tensor's attribute '" + name + "' cannot be stored");
  if (value.kind == Value::Kind::Atom && value.atom.kind == record::Atom::Kind::None) {
    tensor.mutable_grad() = at::Tensor();
    return true;
  }
  if (value.kind != Value::Kind::Tensor || value.tensor.sizes() != tensor.sizes() ||
      value.tensor.scalar_type() != tensor.scalar_type() || value.tensor.device() != tensor.device())
    throw Error(describe(value) + " is not None or a tensor like " + describe(Value::ofTensor(tensor)));
  tensor.mutable_grad() = value.tensor;
  return true;
}

// d.default_factory = f: f as state values name functions (an opaque
// value of its qualified name). Anything else (None, a partial) native
// replay cannot name: the dict then has none, and guards that read it miss.
bool setDefaultFactory(HeapObject& dict, const Value& value) {
  std::string name = value.kind == Value::Kind::Opaque ? value.heap->type : "";
  if (dict.defaultFactory == name) return false;
  dict.defaultFactory = std::move(name);
  return true;
}

}  // namespace

bool NativeStore::setAttr(const Handle& target, const std::string& name, Handle value) const {
  if (target->kind == Value::Kind::Tensor) return setTensorAttr(target->tensor, name, *value);
  if (target->kind == Value::Kind::Dict && name == "default_factory") return setDefaultFactory(*target->heap, *value);
  require(hasAttributes(*target), *target, "an object");
  const Value* was = target->heap->attr(name);
  if (was && was->sameAs(*value)) return false;
  target->heap->setAttr(name, std::move(*value));
  return true;
}

void NativeStore::delAttr(const Handle& target, const std::string& name) const {
  require(target->kind == Value::Kind::Object, *target, "an object");
  target->heap->delAttr(name);
}

void NativeStore::setItem(const Handle& target, const record::Atom& key, Handle value) const {
  if (target->kind == Value::Kind::List) {
    Value* item = key.kind == record::Atom::Kind::Int ? itemAt(target->heap->items, key.i) : nullptr;
    if (!item) throw Error("index " + record::toString(key) + " is out of range");
    *item = std::move(*value);
    return;
  }
  require(target->kind == Value::Kind::Dict, *target, "a list or dict");
  target->heap->setItem(key, std::move(*value));
}

void NativeStore::setItemOf(const Handle& target, const Handle& key, Handle value) const {
  require(target->kind == Value::Kind::Dict, *target, "a dict");
  if (key->kind != Value::Kind::Tensor) throw Error("its key is " + describe(*key) + ", not a tensor");
  target->heap->setItemOf(*key, std::move(*value));
}

void NativeStore::delItem(const Handle& target, const record::Atom& key) const {
  require(target->kind == Value::Kind::Dict, *target, "a dict");
  target->heap->delItem(key);
}

void NativeStore::assignContents(const Handle& target, const Handle& value) const {
  require(target->kind == value->kind && (target->kind == Value::Kind::List || target->kind == Value::Kind::Dict),
          *target, "a list or dict of the assigned kind");
  target->heap->items = value->heap->items;
  target->heap->keys = value->heap->keys;
  target->heap->keyObjects = value->heap->keyObjects;
}

void NativeStore::extendContents(const Handle& target, const Handle& value) const {
  require(target->kind == Value::Kind::List && value->kind == Value::Kind::List, *target, "a list");
  auto& items = target->heap->items;
  items.insert(items.end(), value->heap->items.begin(), value->heap->items.end());
}

template class Resolution<NativeStore>;
template std::optional<GuardMiss> RecordAccess::firstMiss(Resolution<NativeStore>&, Guards,
                                                          const std::vector<NativeStore::Expected>&) const;
template std::vector<c10::IValue> RecordAccess::inputs(Resolution<NativeStore>&) const;
template RecordAccess::MockRun<NativeStore::Handle> RecordAccess::mock(const std::vector<c10::IValue>&,
                                                                       Resolution<NativeStore>&) const;

}  // namespace magpy::replay

#include "magpy/replay/value.h"

#include "magpy/replay/tensors.h"

namespace magpy::replay {

Value Value::ofAtom(record::Atom a) {
  Value v;
  v.atom = std::move(a);
  return v;
}

Value Value::ofTensor(at::Tensor t) {
  Value v;
  v.kind = Kind::Tensor;
  v.tensor = std::move(t);
  return v;
}

namespace {
Value onHeap(Value::Kind kind, std::string type, std::vector<Value> items) {
  Value v;
  v.kind = kind;
  v.heap = std::make_shared<HeapObject>();
  v.heap->type = std::move(type);
  v.heap->items = std::move(items);
  return v;
}
}  // namespace

Value Value::tuple(std::vector<Value> items) { return onHeap(Kind::Tuple, "builtins.tuple", std::move(items)); }
Value Value::list(std::vector<Value> items) { return onHeap(Kind::List, "builtins.list", std::move(items)); }
Value Value::dict(std::vector<record::Atom> keys, std::vector<Value> items) {
  Value v = onHeap(Kind::Dict, "builtins.dict", std::move(items));
  v.heap->keys = std::move(keys);
  return v;
}
Value Value::object(std::string type) { return onHeap(Kind::Object, std::move(type), {}); }
Value Value::opaque(std::string type) { return onHeap(Kind::Opaque, std::move(type), {}); }

std::string Value::typeName() const {
  using K = record::Atom::Kind;
  switch (kind) {
    case Kind::Atom:
      switch (atom.kind) {
        case K::None: return "builtins.NoneType";
        case K::Bool: return "builtins.bool";
        case K::Int: return "builtins.int";
        case K::Float: return "builtins.float";
        case K::Str: return "builtins.str";
        case K::Ellipsis: return "builtins.ellipsis";
        case K::DType: return "torch.dtype";
        case K::Device: return "torch.device";
        case K::Layout: return "torch.layout";
        case K::MemoryFormat: return "torch.memory_format";
        case K::Tuple: return "builtins.tuple";
      }
      return "?";
    case Kind::Tensor: return "torch.Tensor";
    default: return heap->type;
  }
}

bool Value::sameAs(const Value& other) const {
  if (kind != other.kind) return false;
  switch (kind) {
    case Kind::Atom: return atom == other.atom;
    case Kind::Tensor: return tensor.is_same(other.tensor);
    case Kind::Opaque:
      // A module, class, function or enum member named by its qualified
      // name is that one object wherever it was read ("<lambda>" and
      // "<locals>" names are not unique).
      return heap == other.heap || (heap->type == other.heap->type && heap->type.find('<') == std::string::npos);
    default: return heap == other.heap;
  }
}

std::optional<Value> HeapObject::weakReferent() const {
  if (referentKind == Value::Kind::Atom) return std::nullopt;
  Value v;
  v.heap = referent.lock();
  if (!v.heap) return Value::ofAtom(record::Atom::none());
  v.kind = referentKind;
  return v;
}

Value* HeapObject::attr(const std::string& name) {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return &items[i];
  return nullptr;
}

void HeapObject::setAttr(const std::string& name, Value v) {
  if (Value* slot = attr(name)) {
    *slot = std::move(v);
  } else {
    names.push_back(name);
    items.push_back(std::move(v));
  }
}

bool HeapObject::delAttr(const std::string& name) {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) {
      names.erase(names.begin() + long(i));
      items.erase(items.begin() + long(i));
      return true;
    }
  return false;
}

Value* HeapObject::item(const record::Atom& key) {
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i] == key && !objectKeyAt(i)) return &items[i];
  return nullptr;
}

void HeapObject::setItem(const record::Atom& key, Value v) {
  if (Value* slot = item(key)) {
    *slot = std::move(v);
  } else {
    keys.push_back(key);
    items.push_back(std::move(v));
    if (!keyObjects.empty()) keyObjects.resize(keys.size());
  }
}

bool HeapObject::delItem(const record::Atom& key) {
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i] == key && !objectKeyAt(i)) {
      keys.erase(keys.begin() + long(i));
      items.erase(items.begin() + long(i));
      if (i < keyObjects.size()) keyObjects.erase(keyObjects.begin() + long(i));
      return true;
    }
  return false;
}

Value* HeapObject::itemOf(const Value& key) {
  for (size_t i = 0; i < keyObjects.size(); ++i)
    if (objectKeyAt(i) && keyObjects[i].sameAs(key)) return &items[i];
  return nullptr;
}

void HeapObject::setItemOf(const Value& key, Value v) {
  if (Value* slot = itemOf(key)) {
    *slot = std::move(v);
    return;
  }
  keyObjects.resize(keys.size());
  keys.push_back(record::Atom::none());
  keyObjects.push_back(key);
  items.push_back(std::move(v));
}

std::string HeapObject::keyText(size_t i) const {
  return objectKeyAt(i) ? "<" + describe(keyObjects[i]) + ">" : record::toString(keys[i]);
}

std::string describe(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Atom: return record::toString(v.atom);
    case Value::Kind::Tensor: return "tensor " + record::toString(metaOf(v.tensor));
    case Value::Kind::Tuple: return "tuple of " + std::to_string(v.heap->items.size());
    case Value::Kind::List: return "list of " + std::to_string(v.heap->items.size());
    case Value::Kind::Dict: return "dict of " + std::to_string(v.heap->items.size());
    case Value::Kind::Object: return "<" + record::objectLabel(v.heap->type, v.atom) + " object>";
    case Value::Kind::Opaque: return "<" + v.heap->type + ">";
  }
  return "?";
}

}  // namespace magpy::replay

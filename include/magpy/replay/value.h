// Runtime values of native replay: Python-like values held without Python.
//
// Atoms are copied; tensors are at::Tensor; tuples, lists, dicts and
// objects live on the heap and are shared, so identity (aliasing) and
// in-place writes by mocks behave as they did in Python.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "magpy/record/value.h"

namespace magpy::replay {

struct HeapObject;

struct Value {
  enum class Kind : uint8_t { Atom, Tensor, Tuple, List, Dict, Object, Opaque };
  Kind kind = Kind::Atom;
  record::Atom atom;
  at::Tensor tensor;
  std::shared_ptr<HeapObject> heap;  // Tuple, List, Dict, Object, Opaque

  static Value ofAtom(record::Atom a);
  static Value ofTensor(at::Tensor t);
  static Value tuple(std::vector<Value> items);
  static Value list(std::vector<Value> items);
  static Value dict(std::vector<record::Atom> keys, std::vector<Value> items);
  static Value object(std::string type);
  static Value opaque(std::string type);

  // The Python type name guards compare against ("builtins.int", "__main__.MLP").
  std::string typeName() const;
  // Same object (heap identity, tensor identity) or equal atoms.
  bool sameAs(const Value& other) const;
};

struct HeapObject {
  std::string type;                 // Object/Opaque type name
  std::vector<Value> items;         // elements, dict values, or attribute values
  std::vector<record::Atom> keys;   // Dict keys
  // Dict: empty, or parallel to keys: the tensor that is key i (its hash is
  // its identity: torch.optim's state[param]), or an atom None where keys[i] is
  // the key
  std::vector<Value> keyObjects;
  std::vector<std::string> names;   // Object attribute names
  // Dict: a defaultdict's default_factory by qualified name (the record
  // keeps it in the dict value's atom); here, so aliases share a swap.
  std::string defaultFactory;
  // A weakref.ref's referent where it refers back to an object holding
  // it (a scheduler's wrapper of its optimizer's step): held weakly, so
  // the two are freed. Other referents are the attribute __referent__.
  std::weak_ptr<HeapObject> referent;
  Value::Kind referentKind = Value::Kind::Atom;

  // __referent__ held weakly: the object while it lives, None after.
  std::optional<Value> weakReferent() const;
  Value* attr(const std::string& name);
  void setAttr(const std::string& name, Value v);
  bool delAttr(const std::string& name);
  Value* item(const record::Atom& key);  // Dict lookup
  void setItem(const record::Atom& key, Value v);
  bool delItem(const record::Atom& key);
  bool objectKeyAt(size_t i) const { return i < keyObjects.size() && keyObjects[i].kind == Value::Kind::Tensor; }
  Value* itemOf(const Value& key);  // Dict lookup by the key's identity
  void setItemOf(const Value& key, Value v);
  std::string keyText(size_t i) const;  // "'name'", "3", "<tensor float32[4] ...>"
};

// A short description for messages: "tensor float32[2, 3] ...", "list of 3", "3".
std::string describe(const Value& v);

}  // namespace magpy::replay

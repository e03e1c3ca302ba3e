#include "magpy/replay/value_files.h"

#include <ATen/core/Dict.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <optional>

#include <fstream>
#include <sstream>

#include "magpy/record/format.h"
#include "magpy/support/error.h"

namespace magpy::replay {
namespace {

// A dict key read from a file: str, int, bool, None, float, or a tuple of them.
std::optional<record::Atom> keyFromIValue(const c10::IValue& k) {
  if (k.isString()) return record::Atom::string(k.toStringRef());
  if (k.isBool()) return record::Atom::boolean(k.toBool());
  if (k.isInt()) return record::Atom::integer(k.toInt());
  if (k.isDouble()) return record::Atom::floating(k.toDouble());
  if (k.isNone()) return record::Atom::none();
  if (k.isTuple()) {
    std::vector<record::Atom> items;
    for (auto& e : k.toTupleRef().elements()) {
      auto item = keyFromIValue(e);
      if (!item) return std::nullopt;
      items.push_back(*item);
    }
    return record::Atom::tuple(std::move(items));
  }
  return std::nullopt;
}

c10::IValue atomToIValue(const record::Atom& a, const std::string& where) {
  switch (a.kind) {
    case record::Atom::Kind::None: return c10::IValue();
    case record::Atom::Kind::Bool: return c10::IValue(bool(a.i));
    case record::Atom::Kind::Int: return c10::IValue(a.i);
    case record::Atom::Kind::Float: return c10::IValue(a.f);
    case record::Atom::Kind::Str: return c10::IValue(a.s);
    case record::Atom::Kind::Tuple: {
      std::vector<c10::IValue> items;
      for (auto& x : a.items) items.push_back(atomToIValue(x, where));
      return c10::ivalue::Tuple::create(std::move(items));
    }
    default: throw Error(where + ": " + record::toString(a) + " cannot be saved in a tensor file");
  }
}

Value fromIValue(const c10::IValue& v, const std::string& where) {
  if (v.isTensor()) return Value::ofTensor(v.toTensor());
  if (v.isNone()) return Value::ofAtom(record::Atom::none());
  if (v.isBool()) return Value::ofAtom(record::Atom::boolean(v.toBool()));
  if (v.isInt()) return Value::ofAtom(record::Atom::integer(v.toInt()));
  if (v.isDouble()) return Value::ofAtom(record::Atom::floating(v.toDouble()));
  if (v.isString()) return Value::ofAtom(record::Atom::string(v.toStringRef()));
  if (v.isTuple() || v.isList()) {
    std::vector<Value> items;
    auto elems = v.isTuple() ? v.toTupleRef().elements().vec() : v.toListRef().vec();
    for (size_t i = 0; i < elems.size(); ++i) items.push_back(fromIValue(elems[i], where + "[" + std::to_string(i) + "]"));
    return v.isTuple() ? Value::tuple(std::move(items)) : Value::list(std::move(items));
  }
  if (v.isGenericDict()) {
    std::vector<record::Atom> keys;
    std::vector<Value> items;
    for (const auto& entry : v.toGenericDict()) {
      auto key = keyFromIValue(entry.key());
      if (!key) throw Error(where + ": dict keys must be str, int or tuples of them, not " + entry.key().tagKind());
      keys.push_back(*key);
      items.push_back(fromIValue(entry.value(), where + "[" + record::toString(keys.back()) + "]"));
    }
    return Value::dict(std::move(keys), std::move(items));
  }
  throw Error(where + ": a " + std::string(v.tagKind()) + " cannot be a call input (use tensors, numbers, strings, "
              "None, and tuples, lists or dicts of them)");
}

c10::IValue toIValue(const Value& v, const std::string& where) {
  switch (v.kind) {
    case Value::Kind::Tensor: return v.tensor;
    case Value::Kind::Atom: return atomToIValue(v.atom, where);
    case Value::Kind::Tuple:
    case Value::Kind::List: {
      std::vector<c10::IValue> items;
      for (size_t i = 0; i < v.heap->items.size(); ++i)
        items.push_back(toIValue(v.heap->items[i], where + "[" + std::to_string(i) + "]"));
      if (v.kind == Value::Kind::Tuple) return c10::ivalue::Tuple::create(std::move(items));
      c10::impl::GenericList list(c10::AnyType::get());
      for (auto& i : items) list.push_back(std::move(i));
      return list;
    }
    case Value::Kind::Dict: {
      c10::impl::GenericDict dict(c10::AnyType::get(), c10::AnyType::get());
      for (size_t i = 0; i < v.heap->items.size(); ++i) {
        const record::Atom& k = v.heap->keys[i];
        dict.insert(atomToIValue(k, where), toIValue(v.heap->items[i], where + "[" + record::toString(k) + "]"));
      }
      return dict;
    }
    default:
      throw Error(where + ": " + describe(v) + " cannot be saved in a tensor file");
  }
}

}  // namespace

Value loadValueFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open the input file (does it exist?)");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  c10::IValue v;
  try {
    v = torch::jit::pickle_load(bytes);
  } catch (const std::exception& e) {
    std::string what = e.what();
    throw Error(path + ": libtorch cannot read it (" + what.substr(0, what.find('\n')) +
                "); write inputs with torch.save (zip format) as tensors, numbers, or tuples, lists and dicts of them");
  }
  return fromIValue(v, path);
}

void saveValueFile(const std::string& path, const Value& value) {
  std::vector<char> bytes = torch::jit::pickle_save(toIValue(value, "result"));
  record::writeFileAtomically(path, std::string(bytes.begin(), bytes.end()));
}

}  // namespace magpy::replay

#include "magpy/replay/value_files.h"

#include <ATen/core/Dict.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include "magpy/record/format.h"
#include "magpy/support/error.h"
#include "replay/torch_save.h"

namespace magpy::replay {
namespace {

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

Value loadValueFile(const std::string& path) { return readTorchSave(path, "the input file"); }

void saveValueFile(const std::string& path, const Value& value) {
  std::vector<char> bytes = torch::jit::pickle_save(toIValue(value, "result"));
  record::writeFileAtomically(path, std::string(bytes.begin(), bytes.end()));
}

}  // namespace magpy::replay

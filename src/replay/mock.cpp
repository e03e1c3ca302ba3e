#include "magpy/replay/mock.h"

#include "magpy/support/error.h"
#include "replay/native_store.h"

namespace magpy::replay {

Value valueOf(const c10::IValue& v) {
  if (v.isTensor()) return Value::ofTensor(v.toTensor());
  if (v.isInt()) return Value::ofAtom(record::Atom::integer(v.toInt()));
  if (v.isDouble()) return Value::ofAtom(record::Atom::floating(v.toDouble()));
  if (v.isBool()) return Value::ofAtom(record::Atom::boolean(v.toBool()));
  if (v.isNone()) return Value::ofAtom(record::Atom::none());
  if (v.isTuple() || v.isList()) {
    std::vector<Value> items;
    auto elems = v.isTuple() ? v.toTupleRef().elements().vec() : v.toListRef().vec();
    for (auto& e : elems) items.push_back(valueOf(e));
    return v.isTuple() ? Value::tuple(std::move(items)) : Value::list(std::move(items));
  }
  throw Error(std::string("a graph output of type ") + v.tagKind() + " cannot be returned by replay");
}

MockOutcome applyMock(const record::MockSpec& mock, const std::vector<c10::IValue>& outputs, CallState& state) {
  RecordAccess access({}, {}, mock);
  NativeStore store(state);
  Resolution<NativeStore> resolution(store, access.tree());
  auto run = access.mock(outputs, resolution);
  return {std::move(*run.result), run.stateChanged};
}

}  // namespace magpy::replay

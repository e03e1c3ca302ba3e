#include "magpy/replay/mock.h"

#include "magpy/support/error.h"

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

namespace {

Value evaluate(const record::ValueExpr& e, const std::vector<c10::IValue>& outputs, const CallState& state) {
  using K = record::ValueExpr::Kind;
  auto items = [&] {
    std::vector<Value> out;
    for (auto& item : e.items) out.push_back(evaluate(item, outputs, state));
    return out;
  };
  switch (e.kind) {
    case K::Const: return Value::ofAtom(e.atom);
    case K::GraphOutput:
      if (e.index < 0 || size_t(e.index) >= outputs.size())
        throw Error("the mock uses graph output " + std::to_string(e.index) + " of " + std::to_string(outputs.size()));
      return valueOf(outputs[size_t(e.index)]);
    case K::Read: return resolve(e.path, state);
    case K::Tuple: return Value::tuple(items());
    case K::List: return Value::list(items());
    case K::Dict: return Value::dict(e.keys, items());
  }
  throw Error("unknown mock expression");
}

}  // namespace

MockOutcome applyMock(const record::MockSpec& mock, const std::vector<c10::IValue>& outputs, CallState& state) {
  struct Write {
    const record::Effect* effect;
    Value target;
    Value value;
  };
  MockOutcome outcome{evaluate(mock.result, outputs, state), false};
  std::vector<Write> writes;
  for (auto& e : mock.effects) writes.push_back({&e, resolve(e.target, state), evaluate(e.value, outputs, state)});

  for (auto& w : writes) {
    const record::Effect& e = *w.effect;
    std::string target = record::toString(e.target);
    auto needs = [&](bool ok, const char* what) {
      if (!ok) throw Error("the mock writes to " + target + ", which is " + describe(w.target) + ", not " + what);
    };
    switch (e.kind) {
      case record::Effect::Kind::SetAttr: {
        needs(w.target.kind == Value::Kind::Object || w.target.kind == Value::Kind::Opaque, "an object");
        const Value* was = w.target.heap->attr(e.name);
        if (was && was->sameAs(w.value)) continue;
        w.target.heap->setAttr(e.name, std::move(w.value));
        break;
      }
      case record::Effect::Kind::DelAttr:
        needs(w.target.kind == Value::Kind::Object, "an object");
        w.target.heap->delAttr(e.name);
        break;
      case record::Effect::Kind::SetItem:
        if (w.target.kind == Value::Kind::List) {
          auto& items = w.target.heap->items;
          int64_t i = e.key.i < 0 ? e.key.i + int64_t(items.size()) : e.key.i;
          if (e.key.kind != record::Atom::Kind::Int || i < 0 || size_t(i) >= items.size())
            throw Error("the mock writes " + target + "[" + record::toString(e.key) + "], out of range");
          items[size_t(i)] = std::move(w.value);
        } else {
          needs(w.target.kind == Value::Kind::Dict, "a list or dict");
          w.target.heap->setItem(e.key, std::move(w.value));
        }
        break;
      case record::Effect::Kind::DelItem:
        needs(w.target.kind == Value::Kind::Dict, "a dict");
        w.target.heap->delItem(e.key);
        break;
      case record::Effect::Kind::Assign:
        needs(w.target.kind == w.value.kind && (w.target.kind == Value::Kind::List || w.target.kind == Value::Kind::Dict),
              "a list or dict of the assigned kind");
        w.target.heap->items = w.value.heap->items;
        w.target.heap->keys = w.value.heap->keys;
        break;
    }
    outcome.stateChanged = true;
  }
  return outcome;
}

}  // namespace magpy::replay

#include "magpy/replay/guards.h"

#include <algorithm>

#include "magpy/replay/tensors.h"
#include "magpy/support/error.h"

namespace magpy::replay {
namespace {

// Empty when the check holds, else a description of the actual value.
std::string violation(const record::Check& c, const Value& v, const CallState& state) {
  using K = record::Check::Kind;
  switch (c.kind) {
    case K::Type:
      return v.typeName() == c.s ? "" : "type " + v.typeName();
    case K::Identity:
      return v.kind == Value::Kind::Opaque && v.heap->type == c.s ? "" : describe(v);
    case K::Equals:
      return v.kind == Value::Kind::Atom && v.atom == c.atom ? "" : describe(v);
    case K::Length: {
      bool sized = v.kind == Value::Kind::List || v.kind == Value::Kind::Tuple || v.kind == Value::Kind::Dict;
      if (!sized) return describe(v);
      return int64_t(v.heap->items.size()) == c.i ? "" : "len " + std::to_string(v.heap->items.size());
    }
    case K::DictKeys: {
      if (v.kind != Value::Kind::Dict) return describe(v);
      if (v.heap->keys == c.keys) return "";
      std::string keys;
      for (auto& k : v.heap->keys) keys += (keys.empty() ? "" : ", ") + record::toString(k);
      return "keys [" + keys + "]";
    }
    case K::Tensor: {
      if (v.kind != Value::Kind::Tensor) return describe(v);
      // Field by field: building the metadata record is the slow way.
      const at::Tensor& t = v.tensor;
      auto sizes = t.sizes();
      auto strides = t.strides();
      bool same = sizes.size() == c.meta.shape.size() && t.requires_grad() == c.meta.requires_grad &&
                  std::equal(sizes.begin(), sizes.end(), c.meta.shape.begin()) &&
                  std::equal(strides.begin(), strides.end(), c.meta.strides.begin()) &&
                  dtypeName(t.scalar_type()) == c.meta.dtype && (t.is_cpu() ? c.meta.device == "cpu" : deviceName(t.device()) == c.meta.device);
      return same ? "" : "tensor " + record::toString(metaOf(t));
    }
    case K::Alias: {
      Value other = resolve(c.path, state);
      return v.sameAs(other) ? "" : "a different object than " + record::toString(c.path);
    }
    case K::Absent:
      return describe(v);  // it resolved, so it is present
  }
  return "an unknown check";
}

}  // namespace

std::optional<GuardMiss> firstFailingGuard(const std::vector<record::Guard>& guards, const CallState& state) {
  for (auto& g : guards) {
    // The call's shape, without building a tuple of the arguments.
    if (g.check.kind == record::Check::Kind::Length && g.path.root == record::AccessPath::Root::Arg &&
        g.path.index == -1 && g.path.steps.empty()) {
      if (int64_t(state.args.size()) != g.check.i)
        return GuardMiss{record::toString(g.path), record::describe(g.check), "len " + std::to_string(state.args.size())};
      continue;
    }
    std::string actual;
    try {
      actual = violation(g.check, resolve(g.path, state), state);
    } catch (const Error& e) {
      if (g.check.kind != record::Check::Kind::Absent) actual = "missing (" + std::string(e.what()) + ")";
    }
    if (!actual.empty()) return GuardMiss{record::toString(g.path), record::describe(g.check), actual};
  }
  return std::nullopt;
}

}  // namespace magpy::replay

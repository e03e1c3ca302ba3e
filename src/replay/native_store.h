// Native replay's state as a store for replay/state_access.h: paths reach
// into replay's Values (self, arguments, module globals, interpreter state),
// guards read them and mocks write them.
#pragma once

#include <optional>

#include "magpy/replay/state.h"
#include "magpy/replay/state_access.h"

namespace magpy::replay {

class NativeStore {
 public:
  using Handle = std::optional<Value>;
  struct Expected {};  // native guards compare by name

  explicit NativeStore(const CallState& state) : state_(state) {}

  Handle root(const record::AccessPath& root) const;
  Handle step(const Handle& parent, const PathTree& tree, int node) const;
  Handle itemOf(const Handle& parent, const Handle& key) const;
  std::string rootMissing(const record::AccessPath& root) const;
  std::string lacks(const Handle& parent, const PathTree& tree, int node) const;
  size_t argCount() const { return state_.args.size(); }
  const CallState& state() const { return state_; }

  bool typeIs(const Handle& v, const record::Check& c, const Expected&) const { return v->typeName() == c.s; }
  bool identityIs(const Handle& v, const record::Check& c, const Expected&) const {
    return v->kind == Value::Kind::Opaque && v->heap->type == c.s;
  }
  std::optional<record::Atom> atom(const Handle& v) const;
  bool exactAtom(const Handle& v) const { return v->kind == Value::Kind::Atom; }
  std::optional<int64_t> length(const Handle& v) const;
  bool keysAre(const Handle& v, const std::vector<record::Atom>& keys) const {
    return v->kind == Value::Kind::Dict && v->heap->keyObjects.empty() && v->heap->keys == keys;
  }
  std::optional<std::vector<record::Atom>> keys(const Handle& v) const;
  const at::Tensor* tensor(const Handle& v) const { return v->kind == Value::Kind::Tensor ? &v->tensor : nullptr; }
  bool plainTensor(const Handle&) const { return true; }
  bool same(const Handle& a, const Handle& b) const { return a->sameAs(*b); }
  std::string typeName(const Handle& v) const { return v->typeName(); }
  std::string describe(const Handle& v) const { return replay::describe(*v); }

  Handle constant(const record::Atom& a) const { return Value::ofAtom(a); }
  Handle output(const c10::IValue& v) const;
  Handle sequence(bool tuple, std::vector<Handle> items) const;
  Handle dict(const std::vector<record::Atom>& keys, std::vector<Handle> items, const std::string& type) const;
  bool setAttr(const Handle& target, const std::string& name, Handle value) const;
  void delAttr(const Handle& target, const std::string& name) const;
  void setItem(const Handle& target, const record::Atom& key, Handle value) const;
  void setItemOf(const Handle& target, const Handle& key, Handle value) const;
  void delItem(const Handle& target, const record::Atom& key) const;
  void assignContents(const Handle& target, const Handle& value) const;
  void extendContents(const Handle& target, const Handle& value) const;

 private:
  const CallState& state_;
};

// Instantiated once, in native_store.cpp, where the store's steps inline.
extern template class Resolution<NativeStore>;
extern template std::optional<GuardMiss> RecordAccess::firstMiss(Resolution<NativeStore>&, Guards,
                                                                 const std::vector<NativeStore::Expected>&) const;
extern template std::vector<c10::IValue> RecordAccess::inputs(Resolution<NativeStore>&) const;
extern template RecordAccess::MockRun<NativeStore::Handle> RecordAccess::mock(const std::vector<c10::IValue>&,
                                                                              Resolution<NativeStore>&) const;

}  // namespace magpy::replay

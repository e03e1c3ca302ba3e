// Access paths, guards and mocks over a store (replay/state_access.h),
// exercised through native replay's store.
#include <gtest/gtest.h>

#include <ATen/ops/equal.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>

#include "magpy/record/text.h"
#include "replay/native_store.h"

using namespace magpy;
using namespace magpy::replay;
using record::AccessPath;
using record::Atom;

namespace {

record::Guard guard(AccessPath p, record::Check::Kind kind) {
  record::Guard g;
  g.path = std::move(p);
  g.check.kind = kind;
  return g;
}

record::Guard equals(AccessPath p, Atom a) {
  record::Guard g = guard(std::move(p), record::Check::Kind::Equals);
  g.check.atom = std::move(a);
  return g;
}

// self: an object with a list `layers` of two objects holding `w`, an int
// `n`, and the same dict under two names.
CallState sampleState() {
  CallState s;
  s.self = Value::object("__main__.Net");
  std::vector<Value> layers;
  for (int i = 0; i < 2; ++i) {
    Value layer = Value::object("torch.nn.modules.linear.Linear");
    layer.heap->setAttr("w", Value::ofTensor(at::zeros({2, 3})));
    layers.push_back(layer);
  }
  s.self.heap->setAttr("layers", Value::list(layers));
  s.self.heap->setAttr("n", Value::ofAtom(Atom::integer(3)));
  Value shared = Value::dict({Atom::string("k")}, {Value::ofAtom(Atom::integer(1))});
  s.self.heap->setAttr("a", shared);
  s.self.heap->setAttr("b", shared);
  s.args.push_back(Value::ofTensor(at::zeros({4})));
  return s;
}

}  // namespace

TEST(StateAccess, PathTreeSharesPrefixes) {
  PathTree tree;
  AccessPath w0 = AccessPath::self().attr("layers").item(0).attr("w");
  AccessPath w1 = AccessPath::self().attr("layers").item(1).attr("w");
  int a = tree.add(w0);
  int b = tree.add(w1);
  EXPECT_EQ(tree.add(w0), a);
  EXPECT_NE(a, b);
  EXPECT_EQ(tree.size(), 6u);  // self, layers, [0], [0].w, [1], [1].w
  EXPECT_EQ(tree.pathOf(b), w1);
}

TEST(StateAccess, InstanceDictKeysAreOneStep) {
  PathTree tree;
  AccessPath p = AccessPath::self().attr("__dict__").key("forward");
  int node = tree.add(p);
  EXPECT_EQ(tree.size(), 2u);
  EXPECT_EQ(tree.node(node).kind, PathTree::StepKind::InstanceAttr);
  EXPECT_EQ(tree.pathOf(node), p);
  EXPECT_NE(tree.add(AccessPath::self().attr("forward")), node);  // a class attribute is another thing
}

TEST(StateAccess, MissingPathsSayWhichStepLeadsNowhere) {
  CallState s = sampleState();
  NativeStore store(s);
  auto message = [&](const AccessPath& p) {
    try {
      resolvePath(store, p);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("resolved");
  };
  EXPECT_EQ(message(AccessPath::self().attr("layers").item(5).attr("w")),
            "self.layers[5] does not exist: self.layers has 2 elements");
  EXPECT_EQ(message(AccessPath::self().attr("n").attr("real")), "self.n.real does not exist: self.n is 3, which has no attributes");
  EXPECT_EQ(message(AccessPath::arg(2)), "args[2] does not exist: the call has 1 positional arguments");
  EXPECT_EQ(message(AccessPath::self().attr("a").key("z")), "self.a['z'] does not exist: self.a has no key 'z'");
  EXPECT_FALSE(resolvePath(store, AccessPath::self().attr("nothing"), true).has_value());
  EXPECT_EQ(resolvePath(store, AccessPath::self().attr("n"))->atom, Atom::integer(3));
}

TEST(StateAccess, GuardsSplitIntoPerCallAndStateGuards) {
  CallState s = sampleState();
  record::Guard argCount = guard(AccessPath::allArgs(), record::Check::Kind::Length);
  argCount.check.i = 2;
  RecordAccess access({equals(AccessPath::self().attr("n"), Atom::integer(4)), argCount}, {}, {});
  NativeStore store(s);
  Resolution<NativeStore> values(store, access.tree());
  auto onState = access.firstMiss(values, RecordAccess::Guards::OnState);
  ASSERT_TRUE(onState.has_value());
  EXPECT_EQ(onState->text(), "self.n: expected == 4, got 3");
  auto perCall = access.firstMiss(values, RecordAccess::Guards::PerCall);
  ASSERT_TRUE(perCall.has_value());
  EXPECT_EQ(perCall->text(), "args: expected len 2, got len 1");
  EXPECT_EQ(access.firstMiss(values, RecordAccess::Guards::All)->path, "self.n");
}

TEST(StateAccess, TensorAliasAndAbsentGuards) {
  CallState s = sampleState();
  record::Guard tensor = guard(AccessPath::arg(0), record::Check::Kind::Tensor);
  tensor.check.meta = {"float32", {4}, {1}, "cpu", false};
  record::Guard alias = guard(AccessPath::self().attr("b"), record::Check::Kind::Alias);
  alias.check.path = AccessPath::self().attr("a");
  record::Guard absent = guard(AccessPath::self().attr("__dict__").key("forward"), record::Check::Kind::Absent);
  RecordAccess access({tensor, alias, absent}, {AccessPath::arg(0)}, {});
  NativeStore store(s);
  Resolution<NativeStore> values(store, access.tree());
  EXPECT_FALSE(access.firstMiss(values, RecordAccess::Guards::All).has_value());
  EXPECT_EQ(access.inputs(values).size(), 1u);

  s.args[0] = Value::ofTensor(at::zeros({4}).requires_grad_());
  s.self.heap->setAttr("b", Value::dict({}, {}));
  s.self.heap->setAttr("forward", Value::ofAtom(Atom::none()));
  Resolution<NativeStore> changed(store, access.tree());
  auto miss = access.firstMiss(changed, RecordAccess::Guards::All);
  ASSERT_TRUE(miss.has_value());
  EXPECT_EQ(miss->path, "args[0]");
  s.args[0] = Value::ofTensor(at::zeros({4}));
  Resolution<NativeStore> again(store, access.tree());
  EXPECT_EQ(access.firstMiss(again, RecordAccess::Guards::All)->actual, "a different object than self.a");
}

TEST(StateAccess, MockReadsEntryStateThenWrites) {
  CallState s = sampleState();
  record::MockSpec mock;
  mock.result = record::ValueExpr::read(AccessPath::self().attr("n"));
  record::Effect bump;
  bump.kind = record::Effect::Kind::SetAttr;
  bump.target = AccessPath::self();
  bump.name = "n";
  bump.value = record::ValueExpr::constant(Atom::integer(4));
  mock.effects.push_back(bump);
  RecordAccess access({}, {}, mock);
  NativeStore store(s);
  Resolution<NativeStore> values(store, access.tree());
  auto run = access.mock({}, values);
  EXPECT_EQ(run.result->atom, Atom::integer(3));  // read before the write
  EXPECT_TRUE(run.stateChanged);
  EXPECT_EQ(s.self.heap->attr("n")->atom, Atom::integer(4));
}

// torch.optim's state[p]: found by the key's identity, not its value; a
// mock stores under a key that is an object, read at call entry.
TEST(StateAccess, DictKeysThatAreTensorsGoByIdentity) {
  CallState s = sampleState();
  Value w0 = *s.self.heap->attr("layers")->heap->items[0].heap->attr("w");
  Value state = Value::dict({}, {});
  state.heap->setItemOf(w0, Value::ofAtom(Atom::integer(7)));
  s.self.heap->setAttr("state", state);
  AccessPath layers = AccessPath::self().attr("layers");
  AccessPath at0 = AccessPath::self().attr("state").keyedBy(layers.item(0).attr("w"));
  AccessPath at1 = AccessPath::self().attr("state").keyedBy(layers.item(1).attr("w"));
  NativeStore store(s);
  EXPECT_EQ(resolvePath(store, at0)->atom, Atom::integer(7));
  EXPECT_FALSE(resolvePath(store, at1, true));  // an equal tensor, another object
  try {
    resolvePath(store, at1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no key that is the tensor at self.layers[1].w"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(resolvePath(store, AccessPath::self().attr("state").keyedBy(layers.item(5).attr("w")), true));

  record::MockSpec mock;
  mock.result = record::ValueExpr::constant(Atom::none());
  record::Effect put;
  put.kind = record::Effect::Kind::SetObjectItem;
  put.target = AccessPath::self().attr("state");
  put.keyPath = layers.item(1).attr("w");
  put.value = record::ValueExpr::read(at0);
  mock.effects.push_back(put);
  RecordAccess access({guard(at1, record::Check::Kind::Absent)}, {}, mock);
  Resolution<NativeStore> values(store, access.tree());
  EXPECT_FALSE(access.firstMiss(values, RecordAccess::Guards::All));
  access.mock({}, values);
  EXPECT_EQ(resolvePath(store, at1)->atom, Atom::integer(7));
  EXPECT_EQ(state.heap->items.size(), 2u);
  Resolution<NativeStore> again(store, access.tree());
  EXPECT_TRUE(access.firstMiss(again, RecordAccess::Guards::All));  // no longer absent
}

TEST(StateAccess, MockWriteErrorsNameTheWrite) {
  CallState s = sampleState();
  record::MockSpec mock;
  record::Effect e;
  e.kind = record::Effect::Kind::SetItem;
  e.target = AccessPath::self().attr("layers");
  e.key = Atom::integer(5);
  e.value = record::ValueExpr::constant(Atom::none());
  mock.effects.push_back(e);
  RecordAccess access({}, {}, mock);
  NativeStore store(s);
  Resolution<NativeStore> values(store, access.tree());
  try {
    access.mock({}, values);
    FAIL();
  } catch (const Error& err) {
    EXPECT_EQ(std::string(err.what()), "the mock's write self.layers[5] = None: index 5 is out of range");
  }
}

// Extend appends to the list the path names, whatever it holds now; on
// anything else it is a clear error naming the write.
TEST(StateAccess, ExtendAppendsToTheListItFinds) {
  CallState s = sampleState();
  auto extend = [](AccessPath target) {
    record::MockSpec mock;
    mock.result = record::ValueExpr::constant(Atom::none());
    record::Effect e;
    e.kind = record::Effect::Kind::Extend;
    e.target = std::move(target);
    e.value.kind = record::ValueExpr::Kind::List;
    e.value.items = {record::ValueExpr::constant(Atom::integer(7)), record::ValueExpr::read(AccessPath::self().attr("n"))};
    mock.effects.push_back(e);
    return mock;
  };
  NativeStore store(s);
  RecordAccess access({}, {}, extend(AccessPath::self().attr("layers")));
  for (size_t calls = 1; calls <= 2; ++calls) {
    Resolution<NativeStore> values(store, access.tree());
    access.mock({}, values);
    auto found = resolvePath(store, AccessPath::self().attr("layers"));  // holds the value
    const Value& layers = *found;
    ASSERT_EQ(layers.heap->items.size(), 2 + 2 * calls);
    EXPECT_EQ(layers.heap->items[2 * calls].atom, Atom::integer(7));
    EXPECT_EQ(layers.heap->items[2 * calls + 1].atom, Atom::integer(3));
  }
  RecordAccess onDict({}, {}, extend(AccessPath::self().attr("a")));
  Resolution<NativeStore> values(store, onDict.tree());
  try {
    onDict.mock({}, values);
    FAIL();
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("the mock's write self.a.extend([7, self.n])"), std::string::npos) << err.what();
  }
}

// A tensor's .data, .grad and .real, as Python gives them; nothing else.
TEST(StateAccess, TensorAttributesNativeReplayKnows) {
  CallState s = sampleState();
  NativeStore store(s);
  AccessPath w = AccessPath::self().attr("layers").item(0).attr("w");
  at::Tensor tensor = resolvePath(store, w)->tensor;
  at::Tensor data = resolvePath(store, w.attr("data"))->tensor;
  EXPECT_EQ(data.data_ptr(), tensor.data_ptr());
  EXPECT_EQ(resolvePath(store, w.attr("grad"))->atom, Atom::none());
  tensor.mutable_grad() = at::ones({2, 3});
  EXPECT_TRUE(at::equal(resolvePath(store, w.attr("grad"))->tensor, at::ones({2, 3})));
  EXPECT_TRUE(resolvePath(store, w.attr("real"))->tensor.is_same(tensor));
  try {
    resolvePath(store, w.attr("imag"));
    FAIL() << "imag resolved";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a tensor: native replay knows its data, grad and real, not 'imag'"),
              std::string::npos) << e.what();
  }
}

TEST(StateAccess, DynamicTensorGuardsBindSizesAndNeedContiguousTensors) {
  record::TensorMeta m;
  m.shape = {4, 3};
  m.strides = {3, 1};
  m.sym = {{0, 1, 0}, {-1, 1, 3}};
  SymbolValues s;
  EXPECT_TRUE(tensorMatches(at::zeros({6, 3}), m, at::kFloat, s));
  EXPECT_EQ(s.value[0], 6);
  SymbolValues a, b, c;
  EXPECT_FALSE(tensorMatches(at::zeros({3, 6}).t(), m, at::kFloat, a)) << "strides follow from sizes only when contiguous";
  EXPECT_FALSE(tensorMatches(at::zeros({6, 4}), m, at::kFloat, b)) << "a fixed dimension stays fixed";
  EXPECT_FALSE(tensorMatches(at::zeros({1, 3}), m, at::kFloat, c)) << "size 1 is not a symbol's";
  EXPECT_FALSE(tensorMatches(at::zeros({7, 3}), m, at::kFloat, s)) << "s0 is 6 in this call";
}

// Logged updates (assign) and mocks write through the one store writer:
// the same paths work for both.
TEST(StateAccess, LoggedUpdatesAndMocksStoreAlike) {
  CallState s = sampleState();
  AccessPath w = AccessPath::self().attr("layers").item(-1).attr("w");
  assign(w.attr("grad"), Value::ofTensor(at::ones({2, 3})), s);
  at::Tensor last = s.self.heap->attr("layers")->heap->items[1].heap->attr("w")->tensor;
  EXPECT_TRUE(at::equal(last.grad(), at::ones({2, 3})));

  record::MockSpec mock;
  record::Effect clear;
  clear.kind = record::Effect::Kind::SetAttr;
  clear.target = w;
  clear.name = "grad";
  clear.value = record::ValueExpr::constant(Atom::none());
  mock.effects.push_back(clear);
  RecordAccess access({}, {}, mock);
  NativeStore store(s);
  Resolution<NativeStore> values(store, access.tree());
  access.mock({}, values);
  EXPECT_FALSE(last.grad().defined());

  try {
    assign(w.attr("grad"), Value::ofTensor(at::ones({5})), s);
    FAIL() << "a grad of another shape was stored";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot store self.layers[-1].w.grad: tensor float32[5]"), std::string::npos)
        << e.what();
  }
}

// A weak reference whose referent holds it (a scheduler's wrapper of its
// optimizer's step): the path through .__referent__ reaches the object,
// an alias guard holds, and no cycle keeps the two alive.
TEST(StateAccess, WeakReferentsHoldingTheirReferenceAreHeldWeakly) {
  record::Value ref;
  ref.kind = record::Value::Kind::Object;
  ref.type = "builtins.weakref";
  ref.names = {record::kWeakReferent};
  ref.items.resize(1);
  ref.items[0].kind = record::Value::Kind::Ref;
  ref.items[0].id = 1;
  record::Value opt;
  opt.kind = record::Value::Kind::Object;
  opt.type = "torch.optim.sgd.SGD";
  opt.id = 1;
  opt.names = {"wrapper"};
  opt.items = {ref};
  record::RecordFile file;
  CallState s;
  s.self = materialize(opt, file);
  {
    NativeStore store(s);
    AccessPath back = AccessPath::self().attr("wrapper").attr(record::kWeakReferent);
    EXPECT_EQ(resolvePath(store, back)->heap, s.self.heap);
    record::Guard alias = guard(back, record::Check::Kind::Alias);
    alias.check.path = AccessPath::self();
    RecordAccess access({alias}, {}, record::MockSpec{});
    Resolution<NativeStore> values(store, access.tree());
    EXPECT_FALSE(access.firstMiss(values, RecordAccess::Guards::All));
  }
  std::weak_ptr<HeapObject> alive = s.self.heap;
  s.self = Value();
  EXPECT_TRUE(alive.expired());
}

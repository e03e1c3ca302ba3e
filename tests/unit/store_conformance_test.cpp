// The two stores of replay/state_access.h agree: the same guards and mock
// over live Python objects (the JIT's LiveStore) and over their native
// copy (magpy-run's NativeStore) give the same misses and the same writes.
#include <Python.h>
#include <gtest/gtest.h>

#include "capture/live.h"
#include "magpy/replay/state.h"
#include "replay/native_store.h"

using namespace magpy;
using record::AccessPath;
using record::Atom;
using record::Check;

namespace {

const AccessPath kSelf = AccessPath::self();

record::Guard guard(AccessPath path, Check::Kind kind) {
  record::Guard g;
  g.path = std::move(path);
  g.check.kind = kind;
  return g;
}

record::Effect write(record::Effect::Kind kind, AccessPath target, Atom value) {
  record::Effect e;
  e.kind = kind;
  e.target = std::move(target);
  e.value = record::ValueExpr::constant(std::move(value));
  return e;
}

capture::PyRef global(const char* name) {
  return capture::PyRef::borrow(PyDict_GetItemString(PyModule_GetDict(PyImport_AddModule("__main__")), name));
}

// self: a plain object holding a tensor, a number, a list and one dict
// under two names; the same state live and native.
class StoreConformance : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    PyConfig config;
    PyConfig_InitPythonConfig(&config);
    PyConfig_SetBytesString(&config, &config.program_name, "/usr/bin/python3");  // its site-packages hold torch
    ASSERT_FALSE(PyStatus_Exception(Py_InitializeFromConfig(&config)));
    PyConfig_Clear(&config);
    ASSERT_EQ(PyRun_SimpleString("import torch\n"
                                 "class Net:\n"
                                 "    pass\n"), 0);
  }

  void SetUp() override {
    ASSERT_EQ(PyRun_SimpleString("net = Net()\n"
                                 "net.w = torch.zeros(2, 3)\n"
                                 "net.n = 3\n"
                                 "net.items = [1, 2]\n"
                                 "net.cfg = {'k': 1}\n"
                                 "net.same = net.cfg\n"), 0);
    net_ = global("net");
    live_.self = net_.get();
    live_.args = args_.get();
    live_.homeModule = "__main__";
    capture::PathTrie wanted;
    for (const char* name : {"w", "n", "items", "cfg", "same"}) wanted.insert({record::PathStep::attr(name)});
    capture::BlobPool blobs;
    record::Value entry = capture::snapshot(net_.get(), wanted, blobs);
    file_.blobs = blobs.blobs();
    native_.self = replay::materialize(entry, file_);
  }

  // The first miss of `guards` in each store (text, or "" when all hold).
  std::pair<std::string, std::string> firstMisses(const std::vector<record::Guard>& guards,
                                                  std::vector<capture::PyRef> expected = {}) {
    record::Record r;
    r.guards = guards;
    capture::LiveRecord live(r, std::move(expected), {});
    capture::LiveStore liveStore = live.store(live_);
    capture::LiveRecord::Values liveValues(liveStore, live.tree());
    auto liveMiss = live.check(liveValues);
    replay::RecordAccess access(guards, {}, {});
    replay::NativeStore nativeStore(native_);
    replay::Resolution<replay::NativeStore> nativeValues(nativeStore, access.tree());
    auto nativeMiss = access.firstMiss(nativeValues, replay::RecordAccess::Guards::All);
    return {liveMiss ? liveMiss->text() : "", nativeMiss ? nativeMiss->text() : ""};
  }

  void mock(const record::MockSpec& spec) {
    record::Record r;
    r.mock = spec;
    capture::LiveRecord live(r, {}, {});
    capture::LiveStore liveStore = live.store(live_);
    capture::LiveRecord::Values liveValues(liveStore, live.tree());
    live.mock({}, liveValues);
    replay::RecordAccess access({}, {}, spec);
    replay::NativeStore nativeStore(native_);
    replay::Resolution<replay::NativeStore> nativeValues(nativeStore, access.tree());
    access.mock({}, nativeValues);
  }

  // The value at a path, live and native, as the native store prints it.
  std::pair<std::string, std::string> both(const AccessPath& path) {
    capture::PyRef v = capture::resolveLive(path, live_);
    std::string live = v ? replay::describe(replay::Value::ofAtom(*capture::atomOf(v.get()))) : "missing";
    return {live, replay::describe(replay::resolve(path, native_))};
  }

  capture::PyRef net_;
  capture::PyRef args_ = capture::PyRef::steal(PyTuple_New(0));
  capture::LiveRoots live_;
  record::RecordFile file_;
  replay::CallState native_;
};

}  // namespace

TEST_F(StoreConformance, GuardsHoldAndMissAlike) {
  record::Guard n = guard(kSelf.attr("n"), Check::Kind::Equals);
  n.check.atom = Atom::integer(3);
  record::Guard length = guard(kSelf.attr("items"), Check::Kind::Length);
  length.check.i = 2;
  record::Guard keys = guard(kSelf.attr("cfg"), Check::Kind::DictKeys);
  keys.check.keys = {Atom::string("k")};
  record::Guard w = guard(kSelf.attr("w"), Check::Kind::Tensor);
  w.check.meta = {"float32", {2, 3}, {3, 1}, "cpu", false, {}};
  record::Guard alias = guard(kSelf.attr("same"), Check::Kind::Alias);
  alias.check.path = kSelf.attr("cfg");
  record::Guard absent = guard(kSelf.attr("__dict__").key("forward"), Check::Kind::Absent);
  std::vector<record::Guard> guards = {n, length, keys, w, alias, absent};
  EXPECT_EQ(firstMisses(guards), std::make_pair(std::string(), std::string()));

  // The same change in both worlds: the same miss.
  ASSERT_EQ(PyRun_SimpleString("net.items.append(3)\nnet.n = 4\n"), 0);
  native_.self.heap->attr("items")->heap->items.push_back(replay::Value::ofAtom(Atom::integer(3)));
  replay::assign(kSelf.attr("n"), replay::Value::ofAtom(Atom::integer(4)), native_);
  auto [live, native] = firstMisses(guards);
  EXPECT_EQ(live, "self.n: expected == 3, got 4");
  EXPECT_EQ(live, native);
  guards.erase(guards.begin());
  std::tie(live, native) = firstMisses(guards);
  EXPECT_EQ(live, "self.items: expected len 2, got len 3");
  EXPECT_EQ(live, native);

  ASSERT_EQ(PyRun_SimpleString("net.same = dict(net.cfg)\n"), 0);
  native_.self.heap->setAttr("same", replay::Value::dict({Atom::string("k")}, {replay::Value::ofAtom(Atom::integer(1))}));
  std::tie(live, native) = firstMisses({alias});
  EXPECT_EQ(live, "self.same: expected is self.cfg, got a different object than self.cfg");
  EXPECT_EQ(live, native);
}

TEST_F(StoreConformance, MocksWriteAlike) {
  record::MockSpec spec;
  spec.result = record::ValueExpr::constant(Atom::none());
  record::Effect n = write(record::Effect::Kind::SetAttr, kSelf, Atom::integer(5));
  n.name = "n";
  record::Effect last = write(record::Effect::Kind::SetItem, kSelf.attr("items"), Atom::integer(7));
  last.key = Atom::integer(-1);
  record::Effect k = write(record::Effect::Kind::SetItem, kSelf.attr("cfg"), Atom::integer(2));
  k.key = Atom::string("k");
  spec.effects = {n, last, k};
  mock(spec);
  for (const AccessPath& path : {kSelf.attr("n"), kSelf.attr("items").item(1), kSelf.attr("cfg").key("k"),
                                 kSelf.attr("same").key("k")}) {
    auto [live, native] = both(path);
    EXPECT_EQ(live, native) << record::toString(path);
  }
  EXPECT_EQ(both(kSelf.attr("n")).first, "5");
  EXPECT_EQ(both(kSelf.attr("same").key("k")).first, "2");  // one dict under two names, in both worlds
}

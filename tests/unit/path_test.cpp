#include <gtest/gtest.h>

#include "magpy/record/path.h"
#include "magpy/support/error.h"

using magpy::record::AccessPath;
using magpy::record::parsePath;
using magpy::record::toString;

TEST(AccessPath, PrintsPythonLikeText) {
  EXPECT_EQ(toString(AccessPath::self().attr("encoder").attr("layers").item(3).attr("dim")), "self.encoder.layers[3].dim");
  EXPECT_EQ(toString(AccessPath::arg(0)), "args[0]");
  EXPECT_EQ(toString(AccessPath::kwarg("mask")), "kwargs['mask']");
  EXPECT_EQ(toString(AccessPath::global("", "scale")), "G['scale']");
  EXPECT_EQ(toString(AccessPath::global("torch.nn.functional", "relu")), "G(torch.nn.functional)['relu']");
  EXPECT_EQ(toString(AccessPath::self().attr("cfg").key(magpy::record::Atom::integer(3))), "self.cfg[#3]");
  using magpy::record::Atom;
  EXPECT_EQ(toString(AccessPath::self().attr("outputs").key(Atom::tuple({Atom::string("disp"), Atom::integer(0)}))),
            "self.outputs[('disp', 0)]");
  EXPECT_EQ(toString(AccessPath::self().attr("d").key(Atom::tuple({Atom::none()}))), "self.d[(None,)]");
  EXPECT_EQ(toString(AccessPath::runtime("grad_enabled")), "runtime.grad_enabled");
}

TEST(AccessPath, ParsesWhatItPrints) {
  const char* texts[] = {"self", "args[2].shape", "kwargs['x'].y[0]", "G['cfg']['dims'][1]", "G(torch)['relu']",
                         "self.d[#-4]", "self.'odd name'.x", "runtime.grad_enabled", "self.s['it\\'s']",
                         "self.out[('disp', 0)]", "self.out[('depth', 0, -1)]", "self.m[(('a', 1), 2.5, True)]", "self.n[(None,)]"};
  for (const char* t : texts) EXPECT_EQ(toString(parsePath(t)), t) << t;
}

// torch.optim's state[p]: a key that is the object at another path.
TEST(AccessPath, KeysThatAreObjectsNameTheirPaths) {
  AccessPath weight = AccessPath::self().attr("net").attr("_parameters").key("weight");
  AccessPath buf = AccessPath::global("", "opt").attr("state").keyedBy(weight).key("momentum_buffer");
  EXPECT_EQ(toString(buf), "G['opt'].state[@self.net._parameters['weight']]['momentum_buffer']");
  EXPECT_EQ(parsePath(toString(buf)), buf);
  AccessPath nested = AccessPath::self().attr("s").keyedBy(AccessPath::self().attr("t").keyedBy(AccessPath::arg(0)));
  EXPECT_EQ(toString(nested), "self.s[@self.t[@args[0]]]");
  EXPECT_EQ(parsePath(toString(nested)), nested);
  EXPECT_FALSE(AccessPath::self().attr("s").keyedBy(AccessPath::arg(0)) ==
               AccessPath::self().attr("s").keyedBy(AccessPath::arg(1)));
  EXPECT_THROW(parsePath("self.s[@self.t"), magpy::Error);
  std::string deep = "self";
  for (int i = 0; i < 40; ++i) deep += ".s[@self";
  EXPECT_THROW(parsePath(deep), magpy::Error);  // nested past the bound: refused, no deep recursion
}

TEST(AccessPath, RejectsMalformedText) {
  EXPECT_THROW(parsePath("sel.x"), magpy::Error);
  EXPECT_THROW(parsePath("args[x]"), magpy::Error);
  EXPECT_THROW(parsePath("self.x["), magpy::Error);
  try {
    parsePath("self.a!b");
    FAIL();
  } catch (const magpy::Error& e) {
    EXPECT_NE(std::string(e.what()).find("character 7"), std::string::npos) << e.what();
  }
}

// The three-way compare is the order sets and sorts of paths use: total,
// antisymmetric, zero exactly for equal paths, a prefix before its
// extensions, fields in the order root, index, name, steps.
TEST(AccessPath, CompareIsATotalOrderAgreeingWithEquality) {
  using magpy::record::Atom;
  std::vector<AccessPath> paths = {
      AccessPath::self(), AccessPath::self().attr("a"), AccessPath::self().attr("a").item(2),
      AccessPath::self().attr("a").item(10), AccessPath::self().attr("b"), AccessPath::self().key(Atom::integer(1)),
      AccessPath::self().key(Atom::string("1")), AccessPath::self().key(Atom::tuple({Atom::integer(1)})),
      AccessPath::self().key(Atom::tuple({Atom::integer(1), Atom::integer(0)})), AccessPath::arg(0), AccessPath::arg(1),
      AccessPath::kwarg("x"), AccessPath::global("m", "g"), AccessPath::self().keyedBy(AccessPath::arg(0))};
  for (const auto& a : paths)
    for (const auto& b : paths) {
      EXPECT_EQ(a.compare(b) == 0, a == b) << toString(a) << " vs " << toString(b);
      EXPECT_EQ(a.compare(b) < 0, b.compare(a) > 0) << toString(a) << " vs " << toString(b);
      EXPECT_EQ(a < b, a.compare(b) < 0);
    }
  EXPECT_LT(AccessPath::self().attr("a").compare(AccessPath::self().attr("a").item(0)), 0);
  EXPECT_LT(AccessPath::self().attr("zzz").compare(AccessPath::arg(0)), 0) << "the root decides first";
  EXPECT_LT(AccessPath::self().key(Atom::tuple({Atom::integer(1)})).compare(
                AccessPath::self().key(Atom::tuple({Atom::integer(1), Atom::integer(0)}))),
            0);
}

TEST(AccessPath, Prefixes) {
  AccessPath a = AccessPath::self().attr("x");
  EXPECT_TRUE(a.isPrefixOf(a.item(0)));
  EXPECT_FALSE(a.item(0).isPrefixOf(a));
  EXPECT_FALSE(AccessPath::arg(0).isPrefixOf(AccessPath::arg(1)));
}

// Mocks: how a record reproduces what the monitored run left behind. The
// result and every write to state are expressions over graph outputs,
// constants and values read from the state at call entry.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "magpy/record/path.h"
#include "magpy/record/value.h"

namespace magpy::record {

struct ValueExpr {
  enum class Kind : uint8_t {
    Const,        // atom
    GraphOutput,  // index into the graph's Output node arguments
    Read,         // the object at path, as it was at call entry (keeps identity)
    Tuple, List, Dict,  // items (Dict: keys parallel to items); index > 0 names the
                        // object it builds for later Refs of the same mock
    Ref,          // the object built earlier in this mock (result, then effects,
                  // depth first) whose container had this index
  };
  Kind kind = Kind::Const;
  Atom atom;
  int64_t index = 0;
  AccessPath path;
  std::vector<ValueExpr> items;
  std::vector<Atom> keys;
  std::string type;  // Dict: the dict class to build, kOrderedDict or empty (a dict)

  static ValueExpr constant(Atom a) { ValueExpr e; e.atom = std::move(a); return e; }
  static ValueExpr output(int64_t i) { ValueExpr e; e.kind = Kind::GraphOutput; e.index = i; return e; }
  static ValueExpr read(AccessPath p) { ValueExpr e; e.kind = Kind::Read; e.path = std::move(p); return e; }
};

// The one dict subclass a mock rebuilds (torchvision's segmentation and
// detection models return one).
constexpr const char* kOrderedDict = "collections.OrderedDict";

std::string toString(const ValueExpr& e);

// A write to state. All ValueExpr reads are evaluated before any write.
struct Effect {
  enum class Kind : uint8_t {
    SetAttr,   // target.name = value
    SetItem,   // target[key] = value (dict key or list index)
    DelAttr,   // del target.name
    DelItem,   // del target[key]
    Assign,    // target[:] = value (list contents) / target.clear(); update (dict)
    SetObjectItem,  // target[<the object at keyPath, at call entry>] = value
    Extend,    // target.extend(value): a list the call only appended to; its
               // earlier elements are not read (a log grows, the record holds)
  };
  Kind kind = Kind::SetAttr;
  AccessPath target;
  std::string name;
  Atom key;
  ValueExpr value;
  AccessPath keyPath;  // SetObjectItem
};

std::string toString(const Effect& e);

struct MockSpec;
// Two mocks return and write the same things (over the same graph outputs).
bool sameMock(const MockSpec& a, const MockSpec& b);

struct MockSpec {
  ValueExpr result;
  std::vector<Effect> effects;
};

}  // namespace magpy::record

// Guards: the checks a call's state must pass for a record to be valid.
// Each guard names a value by AccessPath and says what it must be.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "magpy/record/path.h"
#include "magpy/record/value.h"

namespace magpy::record {

struct Check {
  enum class Kind : uint8_t {
    Type,      // exact type: s = qualified class name ("builtins.list", "__main__.MLP")
    Equals,    // exact scalar: atom (type and value, floats bit for bit)
    Length,    // len(value) == i
    DictKeys,  // the dict's keys, in order: keys
    Tensor,    // tensor metadata: meta
    Identity,  // a function, class or module, named by s (qualified name), code hash in i
    Alias,     // the value is the same object as the one at path
    Absent,    // the path leads nowhere (a global that would shadow a builtin, a missing attribute)
    Distinct,  // the value is not the same object as the one at path (f(a, b) with a written: not f(l, l))
    Number,    // a lifted number (MagPy 6.2.1): any value of `number`'s exact type the graph can
               // hold (an int within 64 bits); s names the type as Type does ("builtins.int")
  };
  Kind kind = Kind::Type;
  NumberType number = NumberType::Int;  // Number
  std::string s;
  int64_t i = 0;
  Atom atom;
  std::vector<Atom> keys;
  TensorMeta meta;
  AccessPath path;

  bool operator==(const Check& o) const;
};

// The check a lifted number of this type gets (Kind::Number).
Check numberCheck(NumberType type);

// The expected side of a check, rendered for messages: "float32[1, 16] ...".
std::string describe(const Check& c);

struct Guard {
  AccessPath path;
  Check check;
  bool operator==(const Guard& o) const { return path == o.path && check == o.check; }
};

std::string toString(const Guard& g);  // "args[0]: tensor float32[1, 16] ..."

}  // namespace magpy::record

// Objects that two of the trees a record file keeps apart both hold: the
// `self` of two units (a compiled module inside another, a config object,
// list or tensor two models share), a unit's `self` and a module's
// globals, or the globals of two modules. Live they are one object; in a
// record file each function's `self` and each module's globals are values
// of their own, so natively a write through one path does not show
// through the other.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "capture/units.h"

namespace magpy::capture {

class SharedState {
 public:
  // From every unit's state paths and each of their prefixes, as they
  // resolve now.
  explicit SharedState(const Units& units);

  // Why native replay must refuse record r of unit u, or "": one of its
  // writes (a mock's, or an operator's in place) changes such an object.
  std::string refusal(const Units& units, size_t u, const record::Record& r) const;

 private:
  using Tree = std::pair<int, std::string>;  // a unit's `self` (its index, ""), a module's globals (-1, its name)
  struct Holder {
    Tree tree;
    size_t unit;
    record::AccessPath path;  // as the unit's records name it
    std::string where;        // for messages: "__main__.Reader's self.log", "G(__main__)['log']"
  };
  std::map<const void*, std::vector<Holder>> holders_;  // per shared object (a tensor: its storage)
  std::vector<PyRef> held_;  // a path may make its object afresh (a bound method): its address stays taken
};

}  // namespace magpy::capture

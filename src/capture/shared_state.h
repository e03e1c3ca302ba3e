// Objects the script holds once that a record file holds as two: each
// function's `self` and each module's globals are values of their own in
// the file, and a tree describes an object twice where two of its
// snapshots (first reads by different records) met it by different paths
// (module globals always copy). Live that is one object (a list two
// compiled modules share, a global that self also holds, `A = B = []`,
// `self.b = self.a` read by two records); natively it is two, so a write
// through one path does not show through the other.
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
  // resolve now, and where each lands in the values the file will hold
  // (each unit's `self`, `globals` per module).
  SharedState(const Units& units, const std::map<std::string, record::Value>& globals);

  // Why native replay must refuse record r of unit u, or "": one of its
  // writes (a mock's, or an operator's in place) changes such an object.
  std::string refusal(const Units& units, size_t u, const record::Record& r) const;

 private:
  using Tree = std::pair<int, std::string>;  // a unit's `self` (its index, ""), a module's globals (-1, its name)
  struct Holder {
    Tree tree;
    const record::Value* native;   // the value that describes it in the file; null where no walk finds one
    std::string where;             // for messages: "__main__.Reader's self.log", "G(__main__)['log']"
  };
  Holder holder(const Units& units, size_t u, const record::AccessPath& path) const;

  const std::map<std::string, record::Value>& globals_;
  std::map<const void*, std::vector<Holder>> holders_;  // per object two paths name (a tensor: its storage)
  std::vector<PyRef> held_;  // a path may make its object afresh (a bound method): its address stays taken
};

}  // namespace magpy::capture

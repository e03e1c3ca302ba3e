// The JIT's record-set policy (MagPy 6.1): what a function's records
// become as calls arrive. Records and paths only, no interpreter: the JIT
// says which records are in use and what a missed call found, this file
// decides.
//
//   - A call no record serves: where every guard a record missed is a
//     number of the state that now holds another value of its type, the
//     calls differ in that number, and later runs lift it into the graph
//     (learnFromMiss; MagPy's guard fail reason detection).
//   - A record just made replaces the latest earlier one that differs only
//     in the values of the numbers it lifts, or becomes one dynamic record
//     with an earlier one that differs only in argument sizes
//     (record/generalize.h); otherwise it is added (place).
//   - A record whose lifted numbers changed its results' sizes is retired,
//     and those numbers stay guarded from then on (retire).
//
// Notes say what happened, for --explain.
#pragma once

#include <cstddef>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "magpy/record/record.h"

namespace magpy::capture {

// What the policy knows of a record in use.
struct RecordInUse {
  const record::Record* record = nullptr;
  bool runsGraph = false;           // no graph breaks: it has a plan
  bool retired = false;             // retire() said so
  bool readSizes = false;           // its run's Python code read tensor sizes: they stay fixed
  bool definitionsChanged = false;  // made for classes or code the script changed since
};

// Where a record just made goes.
struct Placement {
  size_t replaces = SIZE_MAX;  // the record in use it replaces; SIZE_MAX: added
  std::vector<std::string> notes;
};

class RecordSetPolicy {
 public:
  // dynamic: records may become dynamic and numbers lifted (magpy.compile's).
  explicit RecordSetPolicy(bool dynamic = true) : dynamic_(dynamic) {}

  bool dynamic() const { return dynamic_; }
  // The numbers of the state the function's calls differ in: runs lift them.
  const std::set<record::AccessPath>& varyingNumbers() const { return varying_; }

  // A record in use missed `missed` guards, by index; `now` has, for each,
  // the number its path holds now, or nothing (gone, or not a number).
  // Returns notes on the numbers learned to vary.
  std::vector<std::string> learnFromMiss(const record::Record& r, const std::vector<size_t>& missed,
                                         const std::vector<std::optional<record::Atom>>& now);
  // The guards learnFromMiss reads the values of: numbers of the state.
  static bool isStateNumber(const record::Guard& g);

  // Where `made` goes (it may become a dynamic record). madeReadSizes: its
  // run read sizes in Python. liftedWith: the varying numbers its run was
  // given; numberUse: why the run kept some of them ("self.lr: a Linear
  // reads ...", BuiltRecord::numberUse).
  Placement place(const std::vector<RecordInUse>& inUse, record::Record& made, bool madeReadSizes,
                  const std::set<record::AccessPath>& liftedWith, const std::string& numberUse) const;

  // The record's lifted numbers changed its results' sizes: they stay
  // guarded from now on. Returns the note when the record is to be
  // retired (it lifts such a number), nothing otherwise.
  std::optional<std::string> retire(const record::Record& r);

 private:
  size_t coveredByNumbers(const std::vector<RecordInUse>& inUse, const record::Record& made) const;
  size_t generalizeInto(const std::vector<RecordInUse>& inUse, record::Record& made, std::vector<std::string>& notes) const;

  bool dynamic_;
  std::set<record::AccessPath> varying_;
  std::set<record::AccessPath> sizing_;  // changed a record's result sizes: not lifted again
};

}  // namespace magpy::capture

// Semantic differences between two record files, in the terms a user works
// with: functions and records added or removed, guards changed (path, old
// check, new check), graph nodes added, removed or changed (operator,
// arguments, shapes), parameters changed (path, shape, content hash), other
// state, the environment, and the logged calls.
#pragma once

#include <string>
#include <vector>

#include "magpy/record/record.h"

namespace magpy::record {

struct Change {
  std::string what;      // "guard changed", "node added", "parameter changed", ...
  std::string function;  // empty for file-level changes
  int record = -1;       // -1 when not about one record
  std::string subject;   // the path, node name, field...
  std::string before, after;  // empty when added / removed
};

std::vector<Change> diffRecords(const RecordFile& a, const RecordFile& b);

// "same" / an indented list grouped by function and record; or JSON:
// {"same": bool, "changes": [{"what", "function", "record", "subject", "before", "after"}]}.
std::string printChanges(const std::vector<Change>& changes, bool json);

}  // namespace magpy::record

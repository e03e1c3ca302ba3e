// Turns a finished monitored run into a record (MagPy paper, sections 4.2
// and 4.3): guards from the nodes reachable from the entry state through
// version-0 edges, the mock from what is reachable at the end or was
// changed in place, and the operator graph with its inputs bound to access
// paths and its outputs to what the mock uses.
#pragma once

#include <string>
#include <vector>

#include "capture/live.h"
#include "capture/monitor.h"
#include "magpy/record/record.h"

namespace magpy::capture {

struct BuiltRecord {
  record::Record record;
  std::vector<PyRef> expected;  // per guard: the live type/object it compares with
  // The entry values of state the record reads, for the native state store:
  // one trie of paths under `self`, one per module under G(...).
  PathTrie selfPaths;
  std::map<std::string, PathTrie> globalPaths;
  std::map<size_t, PathTrie> argPaths;  // under args[i]
  std::map<std::string, PathTrie> kwargPaths;
};

// Builds the record of a run without graph breaks. Throws Error with the
// reason when the run did something a record cannot reproduce (it is then
// reported as a graph break).
BuiltRecord buildRecord(Monitor& monitor, const CallSpec& call, BlobPool& blobs);

// The record of a run that broke: it keeps the breaks and runs eagerly.
BuiltRecord buildBreakRecord(const Monitor& monitor);

}  // namespace magpy::capture

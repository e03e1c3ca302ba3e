// Turns a finished monitored run into a record (MagPy paper, sections 4.2
// and 4.3): guards from the nodes reachable from the entry state through
// version-0 edges, the mock from what is reachable at the end or was
// changed in place, and the operator graph with its inputs bound to access
// paths and its outputs to what the mock uses.
#pragma once

#include <string>
#include <vector>

#include "capture/live.h"
#include "capture/monitor/monitor.h"
#include "magpy/record/record.h"

namespace magpy::capture {

struct BuiltRecord {
  record::Record record;
  std::vector<PyRef> expected;  // per guard: the live type/object it compares with
  // What the run read of the state it began with, as it was then: the
  // native state store starts from these.
  record::Value selfEntry;
  std::map<std::string, record::Value> globalsEntry;  // module -> Dict of the globals read
  // What the run read of each argument, in one id space (an object two
  // arguments hold is one id), and of each keyword argument, in another.
  std::map<size_t, record::Value> argsEntry;
  std::map<std::string, record::Value> kwargsEntry;
  // Paths the record reads under each argument, for logging later calls.
  std::map<size_t, PathTrie> argPaths;
  std::map<std::string, PathTrie> kwargPaths;
  // What --explain says about the record: branches that stay checks.
  std::vector<std::string> notes;
  // Why numbers of the state that vary between calls keep their value
  // ("self.lr: ..."), for the record-set policy's notes.
  std::string numberUse;
};

// Builds the record of a run without graph breaks. Throws Error with the
// reason when the run did something a record cannot reproduce (it is then
// reported as a graph break).
BuiltRecord buildRecord(Monitor& monitor, const CallSpec& call, BlobPool& blobs);

// The record of a run that broke: its guards are those of what the run read
// before the break (so the same reads predict the same break); calls it
// accepts run as Python, with the calls they make compiled as segments.
BuiltRecord buildBreakRecord(Monitor& monitor, const CallSpec& call, std::vector<record::GraphBreak> breaks);

}  // namespace magpy::capture

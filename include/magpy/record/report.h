// The coverage report of a capture (magpy-capture --report): per compiled
// function, how its calls ran, its records and why each was made, its
// graph breaks deduplicated by place and cause, and the annotations that
// would remove breaks caused by native functions magpy does not know.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "magpy/record/record.h"

namespace magpy::record {

// How one function's calls ran while capturing (the record file keeps only
// the first calls; these count them all).
struct CallCounts {
  std::string function;  // as named in RecordFile::functions
  std::string parent;    // for a segment: the compiled function whose broken calls made it
  size_t calls = 0, replayed = 0, monitored = 0, eager = 0;
};

// Text, or JSON with keys in a fixed order:
// {"script", "environment": {...}, "functions": [{"name", "parent", "calls",
//  "replayed", "monitored", "eager", "records": [{"index", "graph",
//  "operators", "guards", "origin"}], "breaks": [{"where", "function",
//  "opcode", "reason", "callee", "records": [...]}]}],
//  "suggested_annotations": {"functions": [...], "yaml"}}
std::string coverageReport(const RecordFile& file, const std::vector<CallCounts>& counts, bool json);

}  // namespace magpy::record

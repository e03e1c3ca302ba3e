// Human-readable views of a RecordFile. The canonical text is stable: the
// same file always prints the same text, and two captures that differ print
// differently exactly where they differ, so `diff` on it is meaningful.
// Tensor contents appear as dtype, shape and content hash, never as bytes.
#pragma once

#include <string>

#include "magpy/record/record.h"

namespace magpy::record {

std::string printCanonical(const RecordFile& file);

// One line per compiled function:
// "function <name>: records=<n> graphs=<n> breaks=<n> nodes=<n> guards=<n>"
std::string printSummary(const RecordFile& file);

// The operator graph of one record, one node per line ("%y = aten::relu(%x)").
std::string printGraph(const Graph& graph);

// "tensor float32[2, 3] strides=[3, 1] cpu hash=0123456789abcdef"
std::string describeValue(const Value& v, const RecordFile& file);

}  // namespace magpy::record

namespace magpy::record {
// Line differences between the canonical texts of two files, as "-"/"+"
// lines with a header per changed region; empty when they print the same.
std::string diffCanonical(const RecordFile& a, const RecordFile& b);
}  // namespace magpy::record

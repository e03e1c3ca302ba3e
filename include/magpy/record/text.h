// Views of a RecordFile for people and programs. The text forms are stable
// (the same file always prints the same text) and tensor contents appear as
// dtype, shape and content hash, never as bytes; the JSON forms hold the
// same information with keys in a fixed order.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "magpy/record/record.h"

namespace magpy::record {

enum class Section : uint8_t { Environment, State, Guards, Graph, Mock, Breaks, RefGraph, Calls, Blobs };

// "guards" -> Section::Guards; throws Error listing the names.
Section parseSection(const std::string& name);

// The RefGraphView::Role bits set: "guarded", "written", "result".
std::vector<std::string> roleNames(uint8_t roles);

struct ViewOptions {
  std::set<Section> sections;  // empty: all but RefGraph (long, and derived from guards and mock)
  bool json = false;
  std::string function;        // only this function (name or unique suffix); empty: all
  int record = -1;             // only this record of each function; -1: all

  bool shows(Section s) const { return sections.empty() ? s != Section::RefGraph : sections.count(s) > 0; }
};

// The whole file, or the sections asked for. With no options this is the
// canonical text form that `magpy-inspect record.mgp` prints.
std::string printView(const RecordFile& file, const ViewOptions& options = {});
std::string printCanonical(const RecordFile& file);

// One line per compiled function:
// "function <name>: records=<n> graphs=<n> breaks=<n> nodes=<n> guards=<n>"
// (as a JSON array of objects with those keys when json is set).
std::string printSummary(const RecordFile& file, bool json = false);

// The operator graph of one record, one node per line ("%y = aten::relu(%x)").
std::string printGraph(const Graph& graph);

// "tensor float32[2, 3] strides=[3, 1] cpu hash=0123456789abcdef"
std::string describeValue(const Value& v, const RecordFile& file);

// An argument as the graph text shows it ("%x", "[1, 2]", "torch.float32").
std::string argText(const Arg& a, const Graph& g);

// The index of the function `name` names (full name or unique suffix), or
// throws Error listing the names.
size_t findFunction(const RecordFile& file, const std::string& name);

// {function, record} for a view of one record: findFunction's, or the only
// function when `function` is empty (a file with several asks, through the
// Error, for a --function); throws Error when there is no such record.
std::pair<size_t, size_t> chooseRecord(const RecordFile& file, const std::string& function, int record);

}  // namespace magpy::record

// torch.fx export of a record's operator graph.
//
// writeFxExport writes a Python file and a companion torch.save file
// beside it (graph.py -> graph.pt). Run with python3 and torch, the Python
// file's build() rebuilds a torch.fx.GraphModule whose tensors (the
// parameters and buffers the graph reads, and its constants) come from the
// companion file, and example() returns example inputs and the outputs
// the record computes from them. Running the file itself checks the
// GraphModule, and torch.jit.script of it, against example().
//
// Node targets are what torch.jit.script accepts: torch.ops.<ns>.<op>
// packets (their overload is resolved from the arguments, as the record's
// was), and operator.getitem. Keyword-only schema arguments are passed as
// keywords.
#pragma once

#include <cstddef>
#include <string>

#include "magpy/record/record.h"

namespace magpy::interop {

struct FxExportOptions {
  std::string function;  // name or unique suffix; empty: the only function
  int record = 0;
};

struct FxExportSummary {
  std::string dataPath;     // the companion torch.save file
  std::string function;
  size_t operators = 0, tensors = 0;
  std::string example;      // where the example inputs come from: "call 3", or "random"
};

// Throws Error when the record has no operator graph (graph breaks), an
// operator does not exist in this libtorch, or a file cannot be written.
FxExportSummary writeFxExport(const record::RecordFile& file, const FxExportOptions& options,
                              const std::string& pythonPath);

}  // namespace magpy::interop

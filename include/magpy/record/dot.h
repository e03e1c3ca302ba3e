// Graphviz pictures of a record, for `magpy-inspect --dot` and `--png`.
#pragma once

#include <string>

#include "magpy/record/record.h"

namespace magpy::record {

// The operator graph: inputs (blue: arguments, grey: state and constants),
// operators with their output shapes, and the output, edges following data.
std::string graphDot(const Graph& graph, const std::string& title);

// The RefGraph as the MagPy paper draws it (Figures 7 and 11): ShadowNodes
// with their versions, reference edges labelled with the attribute, index
// or key they follow, guarded nodes blue, nodes the mock writes orange, the
// result green; edges of later versions dashed.
std::string refGraphDot(const RefGraphView& refs, const std::string& title);

// Renders Graphviz text to a PNG with Debian's `dot` (package graphviz),
// through a temporary file and a rename. Throws Error when `dot` is
// missing or fails.
void renderPng(const std::string& dot, const std::string& pngPath);

}  // namespace magpy::record

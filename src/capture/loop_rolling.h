// Rolling a loop the monitor saw unrolled into a loop region of the graph
// (MagPy 6.2.2; record/graph.h has the region's grammar). The monitor
// recorded each iteration of `for i in range(n)` one after the other,
// starting with the index node `builtins.int(k)`; rolling keeps the first
// iteration as the body when every iteration recorded the same operators
// on the same kinds of values:
//   - a value from before the loop, the same in every iteration;
//   - a value of the same iteration;
//   - the iteration's index;
//   - in the first iteration a value from before the loop, in each later
//     one the same value of the iteration before: a carried value.
// After the loop, the graph may use the last iteration's carried values
// and, as an operator's list, one value of every iteration in order (what
// the program appended): a scan. Anything else keeps the loop unrolled.
//
// The monitor vouches for what the graph does not show (the program's own
// state between iterations, how the loop ended); rolling checks the graph.
#pragma once

#include <string>
#include <vector>

#include "magpy/record/graph.h"

namespace magpy::capture {

struct LoopSpan {
  int trip = -1;            // the int node the program ranged over (before the loop)
  std::vector<int> starts;  // per iteration: its index node, where it begins
  int end = -1;             // the first node after the last iteration
  // Numbers computed from the index that an operator took as a plain
  // number equal to another of its arguments: each must be found where a
  // later iteration's operator takes it (or the loop stays unrolled).
  std::vector<int> untaken;
};

// Rolls `span` in g (whose other loops' spans lie wholly before or after
// it). Returns "" when it did; otherwise why not, with g unchanged.
std::string rollLoop(record::Graph& g, const LoopSpan& span);

}  // namespace magpy::capture

// Branches on a tensor's truth (MagPy 6.2.2; record/graph.h has the
// region's grammar). The monitor records the side of `if t:` the program
// took after a check of t (magpy.expect_equal); where it saw the side
// leave the program's Python state as it found it but for tensors, the
// check becomes a branch whose other side is unseen (makeBranch). A
// record made at a call that took the other side joins it (mergeBranches):
// the two graphs run the same operators but in the sides of their
// branches, so one graph with both sides runs either call's operators. A
// branch's values are its variables' tensors, place by place, so those of
// one side stand where the other side's stood.
//
// Why the joined record is right for calls whose conditions pick sides in
// combinations no capture ran: before each branch the program's Python
// state is the same whichever sides earlier branches took (each side
// leaves it as it found it, but for which tensors its variables hold), and
// what follows a branch depends on those tensors only through the graph,
// which joins their values (getitem of the branch's end) where the two
// records use them. A run whose Python code could tell the tensors of one
// side from those of the other (identity, versions: the monitor's
// pathDependent) joins no other.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "magpy/record/record.h"

namespace magpy::capture {

struct BranchSpan {
  int check = -1;        // the magpy.expect_equal of the condition (a one-element bool tensor)
  bool taken = false;    // the side that ran: then (the condition held) or else
  int begin = -1;        // the side's first node (the one after the check)
  int end = -1;          // the first node after the side
  // Where the sides meet, the variables that hold tensors (the frame's
  // slots, locals then stack, by number) and the tensor each holds: the
  // branch's places and values.
  std::vector<int> places, values;
};

// Makes `span` in g a branch with one side seen; the side's inputs move
// before it. Spans of other branches lie wholly before or after it.
// Returns "" when it did; otherwise why not, with g unchanged.
std::string makeBranch(record::Graph& g, const BranchSpan& span);

// Names the branches' markers and values in the order they run (if,
// if_1, ...; made latest first, they were named the other way round).
void nameBranchesInOrder(record::Graph& g);

// Where a call may stop (a check, a branch with a side unseen), the graph
// has had no effect yet, in the order plans run it: "" when so, else why
// not. Records are made so; branches made or joined must keep it.
std::string stopsCleanly(const record::Graph& g);

struct Joined {
  std::optional<record::Record> record;
  std::vector<size_t> laterGuards;  // per guard of `later`: its index in the joined record
  std::string why;                  // without a record: why the two stay apart
};

// One record serving the calls of both, where they differ only in the
// sides of branches; guards are the union of theirs (earlier's first).
Joined mergeBranches(const record::Record& earlier, const record::Record& later);

}  // namespace magpy::capture

// Collectives' process group and their operator arguments: the one place
// that knows c10d's types (ProcessGroup, ReduceOp, Work). A record names
// no group (record::Arg::Kind::Group): a collective runs in the group the
// process has, which its source gives: torch.distributed's default group
// in the JIT (set by capture), the group magpy-run formed natively
// (formGroup, include/magpy/replay/distributed.h).
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <functional>
#include <optional>
#include <string>

#include "magpy/record/value.h"

namespace magpy::replay {

// The process group as an IValue (c10d's ProcessGroup custom class), or
// None where the process has formed none.
using GroupSource = std::function<c10::IValue()>;
void setGroupSource(GroupSource source);
c10::IValue currentGroup();  // None when no source is set or it has no group

// Whether a schema argument takes a process group or a ReduceOp.
bool takesGroup(const c10::Argument& param);
bool takesReduceOp(const c10::Argument& param);

// A ReduceOp for a record's code (record::isRecordedReduceOp), and back: the
// code of a ReduceOp, or nothing for one a record cannot hold (PREMUL_SUM,
// a supplement).
c10::IValue reduceOpFor(int64_t code);
std::optional<int64_t> reduceOpCode(const c10::IValue& op);

// Whether v is the group currentGroup() gives.
bool isCurrentGroup(const c10::IValue& v);

// Whether v is a collective's pending work (c10d's Work); waits for it,
// throwing what the collective failed with.
bool isWork(const c10::IValue& v);
void waitFor(const c10::IValue& work);

// runtime.dist_world_size (an int; 0 with no group) and runtime.dist_backend
// (a str; "" with no group); nothing for other names.
std::optional<record::Atom> groupState(const std::string& name);

}  // namespace magpy::replay

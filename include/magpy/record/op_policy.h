// The operator policy: which operators a record may make magpy-run call.
//
// A record is data from a possibly untrusted source (README, "Threat
// model"). Replay runs only operators on a reviewed list (op_policy.cpp):
// public ATen operators whose kernels check every index, length and size
// they take from their arguments, and a few reviewed private ones. The
// list leaves out, and refusals name the reason where it is known,
// operators that
//   - read or write files (aten::from_file, aten::save),
//   - rebind or reinterpret raw storage (set_, set_data, the storage-taking
//     overloads),
//   - build tensors without checking their indices (the sparse
//     constructors, every *_unsafe constructor),
//   - change process-wide state (seeding, grad mode, backend caches,
//     streams, autograd calls),
//   - live outside the ATen namespace (prim::, quantized::, profiler::,
//     custom operator libraries),
//   - make or change sparse tensors, or hand out their internals (indices,
//     values, crow_indices...),
//   - are backward kernels (they trust that their inputs came from their
//     forward: max_pool2d_with_indices_backward with far indices),
//   - are private helpers, which may trust their callers (_cummax_helper,
//     the Sobol engine),
//   - trust an argument the record chooses (ctc_loss's labels,
//     segment_reduce's unsafe=True, native_batch_norm's weight).
// An admitted operator may still have one argument it trusts, which
// replay requires unset (trustedArgument: searchsorted's sorter).
// View-making operators whose geometry is given by the record (as_strided
// and friends, _reshape_alias) run, but replay checks their sizes, strides
// and offset against the input's storage first, and _pad_packed_sequence
// its batch sizes (checksArguments).
//
// This file knows only names, so magpy-inspect can show the policy without
// libtorch; replay adds one schema rule (no argument or result of type
// Storage).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace magpy::record {

// Empty when `aten::name` with this overload is inside the default policy;
// otherwise what it does that the policy forbids ("reads and writes files").
std::string outsidePolicy(const std::string& target, const std::string& overload);

// Whether `name` (without its namespace) is on the reviewed operator list.
bool reviewed(const std::string& name);
std::vector<std::string> reviewedOperators();  // the whole list, for tests and magpy-inspect

// The argument of an admitted operator that the kernel trusts, which a
// record from others must leave unset (None); nullptr for none.
const char* trustedArgument(const std::string& target);

// Operators whose arguments replay checks before their kernel runs:
// size, stride and storage offset arguments against the storage of the
// tensor they view (as_strided and friends), batch sizes against the
// packed data (_pad_packed_sequence).
enum class ArgumentCheck : uint8_t { None, Geometry, BatchSizes };
ArgumentCheck checksArguments(const std::string& target);

// In-place operators that change the sizes or strides of the tensor they
// are given (t_, squeeze_, resize_, ...): after one ran on state, guards
// on that state's metadata must be checked afresh.
bool changesGeometry(const std::string& target);

// Operators whose result sizes may depend on tensor contents (nonzero,
// masked_select, unique, indexing with a bool mask, ...). For aten::index
// this holds only with a bool or byte index, which the caller may check.
bool mayHaveDataDependentSizes(const std::string& target, const std::string& overload);

}  // namespace magpy::record

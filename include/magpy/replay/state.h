// The external state a compiled function sees when it is called, and how
// access paths reach into it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "magpy/record/path.h"
#include "magpy/record/record.h"
#include "magpy/replay/value.h"

namespace magpy::replay {

// Module globals, shared by every function of a session: a mock of one
// function that writes a global is seen by the others.
struct Globals {
  std::map<std::string, Value> modules;  // module name -> Dict of its globals
  Value& of(const std::string& module);
};

struct CallState {
  Value self;
  std::vector<Value> args;
  Value kwargs = Value::dict({}, {});
  Globals* globals = nullptr;
  std::string module;         // what G[...] without a module name means
  // The grad mode the script made the call with, as guards read it
  // (runtime.grad_enabled). Native replay itself computes without
  // autograd: values are the same, and no result requires grad.
  bool scriptGradMode = false;
  // Likewise the script's inference mode (runtime.inference_mode): native
  // replay never runs in it, as its tensors have no version counters.
  bool scriptInferenceMode = false;
};

// The value at path. Throws Error saying which step is missing.
Value resolve(const record::AccessPath& path, const CallState& state);

// Stores value at path (its last step names an attribute, key or index of
// an existing object). Throws Error when the parent does not exist.
void assign(const record::AccessPath& path, Value value, const CallState& state);

// Removes what path names (its last step names an attribute or key of an
// existing object). Throws Error when it cannot.
void remove(const record::AccessPath& path, const CallState& state);

// Gives the list or dict at path value's elements (a defaultdict its
// factory), or the tensor at path value's contents, keeping its identity:
// other paths that name it see them too.
// Where path names nothing natively, or something of another kind, stores
// value there as assign does.
void refill(const record::AccessPath& path, const Value& value, const CallState& state);

// Whether the object path's last step names into exists in the state.
bool parentExists(const record::AccessPath& path, const CallState& state);

// Interpreter state a record may depend on (the "runtime." root of a path),
// read from libtorch: the same in a capturing process as in native replay.
// Empty for a name record::isRuntimeState does not know.
std::optional<record::Atom> runtimeState(const std::string& name);

// The interpreter state a call log follows (logged updates of "runtime."
// paths), with the value native replay starts with. assign() sets all but
// grad_enabled and inference_mode, which are the script's
// (CallState::scriptGradMode, scriptInferenceMode), not replay's.
const std::map<std::string, record::Atom>& settableRuntimeStates();

// A runtime value for a recorded one; tensors are fresh copies of blobs.
Value materialize(const record::Value& v, const record::RecordFile& file);
// The same, moving the bytes of the blobs marked adoptable into the tensors
// made (those blobs are left empty: nothing may read them again).
Value materializeAdopting(const record::Value& v, record::RecordFile& file, const std::vector<bool>& adoptable);

// Result-check tolerance. A floating-point tensor matches when
//   max |actual - expected| <= atol + rtol * max |expected|
// (NaN and infinities must match exactly): the error is measured against
// the tensor's scale, not element by element, because optimized replay
// reorders arithmetic (conv+bn folding) and a deep network's outputs mix
// large values with ones that cancel to near zero. Unset bounds take
// torch.testing.assert_close's defaults for the dtype (float32: rtol
// 1.3e-6, atol 1e-5).
struct Tolerance {
  std::optional<double> rtol;
  std::optional<double> atol;

  // The compiled backend's results against operator-by-operator replay's:
  // libtorch's passes fold batch norms into convolutions, and oneDNN's
  // kernels sum in other orders.
  static Tolerance compiled() { return {1e-3, 1e-5}; }
};

struct Comparison {
  std::string difference;  // empty when equal; else names the position: "result[1]: values differ ..."
  double max_abs_diff = 0; // over all floating-point tensors compared
  bool equal() const { return difference.empty(); }
};

// `actual` matches `expected` when structure, atoms, dtypes and shapes are
// identical and tensor values agree within the tolerance.
Comparison compare(const Value& actual, const Value& expected, const Tolerance& tol, const std::string& where);
// The same for two tensors (out.difference names `where`).
void compareTensors(const at::Tensor& actual, const at::Tensor& expected, const Tolerance& tol, const std::string& where,
                    Comparison& out);

}  // namespace magpy::replay

// An execution plan for one operator graph: ATen operator handles resolved
// once, operands pre-boxed, values kept in numbered slots and released at
// their last use.
#pragma once

#include <ATen/core/ivalue.h>

#include <memory>
#include <string>
#include <vector>

#include "magpy/record/graph.h"
#include "magpy/replay/passes.h"
#include "magpy/support/error.h"

namespace magpy::replay {

struct SymbolValues;

// The record does not describe this call: an operator gave a result of
// other sizes than the record says for this call's sizes and numbers (or
// another number of results), or number arithmetic met what Python would
// do otherwise (raise ZeroDivisionError, grow an int beyond 64 bits), or
// a check met another value than the program read (record::isCheck).
// Where changedNothing, the call can still run otherwise: a miss.
struct SizeMismatch : Error {
  using Error::Error;
  // The plan stopped before any step that writes its inputs or draws
  // random numbers (replay::firstEffect): the call can run otherwise.
  bool changedNothing = false;
  // A check stopped it: the program would decide otherwise on this call
  // (another branch, another value read). The record stays right for the
  // calls it describes; a record whose sizes disagree does not.
  bool decidedOtherwise = false;
};

// What a backward pass over `leaf` would run beyond its gradient formulas:
// hooks on the tensor (register_hook, retain_grad) or on the node that
// accumulates into its .grad (as DistributedDataParallel's). "" for none.
// A graph that differentiates refuses a call whose leaves have any, before
// its first step (a miss: SizeMismatch, decidedOtherwise), but for one
// hook after the accumulation where the graph reduces gradients with
// collectives: DistributedDataParallel's, whose reduction the record
// holds (and replay's backward runs no accumulation hooks).
std::string autogradHooks(const at::Tensor& leaf, bool reducesGradients = false);

struct PlanOptions {
  PassOptions passes = PassOptions::none();
  bool inference = false;      // no autograd: parameter-only results may be cached
  std::string device = "cpu";  // constants and factory operators are placed there
  bool trustRecord = false;    // run operators outside the operator policy (record/op_policy.h)
  Backend backend = Backend::Aten;  // needs inference
  // Seconds one run may take (0: no limit), checked between operators: a
  // run past it stops with an Error. Operator by operator only (a compiled
  // graph cannot be stopped inside).
  double timeBudget = 0;
  // Whether a compiled graph may freeze the state tensors it only reads
  // (and the plan cache results computed from them alone, optimize()'s
  // cachesState): sound where every write to them is seen as a new version or
  // storage, as in native replay. In a live Python process `.data`, numpy
  // views and other processes write without either: there the state stays
  // an input of the compiled graph unless the program says otherwise.
  bool freezeState = true;
  // Whether a compiled graph pages out the state tensors whose values it
  // replaced with its own (folded, re-laid-out) copies (replay/page_out.h):
  // native replay, where nothing holds their address but libtorch.
  bool pageOutReplacedState = false;
};

// Not thread-safe: a plan caches folded results between runs.
class Plan {
 public:
  // Throws Error when an operator does not exist in this libtorch, is
  // outside the operator policy (unless options.trustRecord), or its schema
  // cannot take the recorded arguments. `blobs` holds the contents of
  // the graph's constant tensors (get_attr nodes with a blob).
  Plan(const record::Graph& graph, const std::vector<record::TensorBlob>& blobs, const PlanOptions& options = {});
  ~Plan();
  Plan(Plan&&) noexcept;
  Plan& operator=(Plan&&) noexcept;

  // Runs the graph on its inputs (the tensors its placeholders and
  // get_attrs read, in the order of inputPaths()); returns the values
  // listed by the output node. An operator's failure is an Error naming
  // its node and source line. A dynamic graph (record::TensorMeta::sym)
  // needs the sizes its guards bound, and checks each result against them
  // (SizeMismatch).
  std::vector<c10::IValue> runWith(std::vector<c10::IValue> inputs, const SymbolValues* symbols = nullptr) const;

  // The paths of the graph inputs (placeholders and get_attrs that read
  // state), in the order runWith() takes them.
  const std::vector<record::AccessPath>& inputPaths() const;

  // What the optimizations did ("cse: 2 duplicate operators merged"), and
  // once a call chose it, the backend and why.
  const std::vector<std::string>& optimizations() const;
  // Whether the last run went through the compiled graph.
  bool ranCompiled() const;
  // Whether an operator changes the sizes or strides of a tensor in place
  // (record::changesGeometry): state metadata may differ after a run.
  bool changesGeometry() const;
  // Whether the graph has dynamic sizes; whether a run stopped half-way
  // changed nothing observable (replay::stopsCleanly).
  bool dynamic() const;
  bool stopsCleanly() const;
  // Whether the graph differentiates (record::hasBackward): it then runs
  // with autograd whatever PlanOptions::inference says, and its caller
  // must run it with autograd's dispatch keys and the script's grad mode.
  bool differentiates() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace magpy::replay

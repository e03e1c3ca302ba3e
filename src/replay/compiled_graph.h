// The compiled backend of a plan: its steps lowered to a TorchScript graph
// (torch::jit::Graph, built in C++), the state tensors the graph only reads
// frozen into it as constants, libtorch's inference passes run over it
// (those behind torch.jit.freeze and torch.jit.optimize_for_inference:
// conv/linear folding with batch norm, add and mul, oneDNN layouts and
// fused convolutions, linear weight transposition, dead code), and the
// result run by TorchScript's interpreter.
//
// Frozen tensors are the plan's only assumption about the state: run()
// takes every input of the plan, and stillFrozen() says whether the frozen
// ones are the same tensors, unchanged, and shared by no other input. The
// plan re-lowers, or runs operator by operator, when they are not.
#pragma once

#include <ATen/core/ivalue.h>

#include <memory>
#include <string>
#include <vector>

#include "replay/plan_steps.h"

namespace torch::jit {
struct Graph;
struct Code;
}  // namespace torch::jit

namespace magpy::replay {

// What a plan holds that the lowering reads.
struct LoweringInput {
  const std::vector<Step>& steps;
  const std::vector<int>& inputSlots;
  const std::vector<PlanConstant>& constants;
  const std::vector<int>& outputSlots;
  size_t numSlots;
  // Per input: whether it may be frozen (a state tensor the graph neither
  // writes nor returns).
  const std::vector<bool>& freezable;
  // Whether frozen tensors whose values the passes replaced with their own
  // (folded, re-laid-out) are paged out (page_out.h): native replay only.
  bool pageOutReplaced = false;
};

// Why these steps cannot be lowered, or empty: number arithmetic and
// lifted numbers (checked per call), views whose geometry the record gives
// (checked per call against their base), and in a graph with dynamic sizes
// operators whose result sizes depend on tensor contents. A dynamic graph
// is compiled per binding of its symbols: for these operators all its
// sizes follow from that binding, so the size checks one operator-by-
// operator run made hold for every call with that binding.
std::string loweringRefusal(const std::vector<Step>& steps, bool dynamic);

// Which of libtorch's passes run: those of torch.jit.freeze without the
// folding that changes numerics (Exact: constants propagated, eval dropout
// removed, linears concatenated), with it (Freeze: batch norm and add/mul
// folded into convolutions), or those and torch.jit.optimize_for_inference's
// (oneDNN layouts and fused convolutions, transposed linear weights), which
// win on convolutions and lose on small graphs and on layers oneDNN lacks.
// Folding moves values across a quantizer's rounding steps: fake-quantized
// models agree with operator-by-operator replay only without it.
enum class CompiledPasses : uint8_t { Exact, Freeze, ForInference };

class CompiledGraph {
 public:
  // Lowers the steps, freezing the freezable inputs with the values `inputs`
  // holds. Throws Error when libtorch cannot build or optimize the graph.
  CompiledGraph(const LoweringInput& plan, const std::vector<c10::IValue>& inputs, CompiledPasses passes);
  // The ForInference graph made from a Freeze one (its folding not done
  // twice): its constants are shared until the inference passes replace them.
  CompiledGraph(const CompiledGraph& frozen, const std::vector<c10::IValue>& inputs);
  ~CompiledGraph();

  // Whether the frozen inputs are the tensors frozen, at the same version
  // and over the same memory, and no other input shares storage with one.
  // (Plans bump the version of what they write, for the operators that
  // write without one.)
  bool stillFrozen(const std::vector<c10::IValue>& inputs) const;

  // Whether the graph's tensor constants are at the versions they were
  // compiled with (a graph another was made from shares its constants).
  bool constantsIntact() const;

  // Runs the graph on the plan's inputs (frozen ones are skipped); returns
  // the plan's outputs.
  std::vector<c10::IValue> run(const std::vector<c10::IValue>& inputs) const;

  // "161 operators lowered, 85 after freeze and inference passes: 53 prim::mkldnn_convolution, ...;
  // 97.5 MB of state it replaced paged out"
  const std::string& summary() const { return summary_; }
  CompiledPasses passes() const { return passes_; }

 private:
  std::shared_ptr<torch::jit::Graph> graph_;
  CompiledPasses passes_;
  std::unique_ptr<torch::jit::Code> code_;
  std::vector<size_t> graphInputs_;  // plan input index per graph input
  std::vector<c10::IValue> constantValues_;  // record constants copied per run, after the inputs
  struct Frozen {
    size_t input;
    const c10::TensorImpl* impl;
    uint32_t version;
    const void* storage;  // set_() and .data = swap these under the same tensor
    const void* data;
  };
  std::vector<Frozen> frozen_;
  std::vector<const void*> frozenStorages_;    // sorted
  std::vector<const void*> constantStorages_;  // of every tensor constant of the optimized graph, sorted
  std::vector<std::pair<const c10::TensorImpl*, uint32_t>> constantVersions_;
  size_t outputs_ = 0;
  size_t lowered_ = 0;    // operators lowered
  bool pageOut_ = false;  // LoweringInput::pageOutReplaced
  std::string summary_;

  void runInferencePasses();  // paging out what they copy where pageOut_
  void finish(const std::vector<c10::IValue>& inputs);  // code, constant storages, summary
  // Pages out (or hands back the pages read of) the frozen tensors the
  // graph no longer holds (`held`: its constants' storages, sorted);
  // returns their bytes.
  size_t pageOutReplaced(const std::vector<c10::IValue>& inputs, const std::vector<const void*>& held);
};

// Whether a compiled run's results agree with operator-by-operator replay's
// within the dtype's tolerance, and share memory with each other and the
// inputs in the same way; empty when they do, otherwise how they differ.
std::string disagreement(const std::vector<c10::IValue>& compiled, const std::vector<c10::IValue>& reference,
                         const std::vector<c10::IValue>& compiledInputs, const std::vector<c10::IValue>& referenceInputs);

}  // namespace magpy::replay

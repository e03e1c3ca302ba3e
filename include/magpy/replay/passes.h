// Graph-level optimizations applied when a record is loaded for replay.
//
// Each pass takes a graph and returns an equivalent one. "Folded" nodes
// depend only on state tensors (parameters, buffers) and constants: the plan
// computes them once and reuses the result for as long as those tensors are
// the same objects at the same version, so folding stays right when a mock
// or an update replaces or changes a parameter.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "magpy/record/graph.h"

namespace magpy::replay {

struct PassOptions {
  bool deadCode = true;       // drop operators whose results nothing uses
  bool commonSubexpr = true;  // compute identical operators once
  bool foldConstants = true;  // compute parameter-only subgraphs once (inference only)
  // Off by default: the folded convolution rounds differently from
  // convolution then batch norm (on deep random-weight nets, relative
  // differences above float32's check tolerance). bench/bench.py measures
  // what it gains (on ResNets at batch 8, up to ~10%); `all` turns it on.
  bool foldConvBatchNorm = false;  // fold eval-mode batch norm into the convolution before it
  bool dropoutEval = true;    // dropout with train=False is the identity

  static PassOptions none();
  static PassOptions all();
  // Parses "default" (the passes that keep results bit-identical: dce,
  // cse, fold, dropout), "all", "none", or a comma list of pass names
  // (dce, cse, fold, conv-bn, dropout); throws Error naming an unknown pass.
  static PassOptions parse(const std::string& text);
};

// How a plan runs its graph: operator by operator through the dispatcher
// (Aten), lowered to TorchScript and optimized by libtorch (Compiled, see
// src/replay/compiled_graph.h), or Auto: compiled where the first call
// shows it faster. Compiled and Auto check the compiled graph's results
// against operator-by-operator replay on the first call and keep running
// operator by operator where they differ, where a graph cannot be lowered,
// or where the state tensors frozen into it keep changing.
enum class Backend : uint8_t { Aten, Compiled, Auto };
Backend parseBackend(const std::string& name);  // "aten", "compiled", "auto"; Error otherwise

struct OptimizedGraph {
  record::Graph graph;
  std::vector<bool> folded;  // per node: compute once while its state inputs are unchanged
  std::vector<std::string> applied;  // what each pass did, for reports ("cse: 3 nodes merged")
};

// `inference`: replay runs without autograd, so results that depend only on
// parameters can be cached and batch norm can be folded. `cachesState`
// false: no such result is cached (the state may be written without a new
// version, PlanOptions::freezeState).
OptimizedGraph optimize(const record::Graph& graph, const PassOptions& options, bool inference, bool cachesState = true);

// Removes nodes nothing needs: kept are the Output node's values, every
// operator that writes a tensor, and every random draw (it moves the
// generator even when unused). Returns how many nodes went.
size_t eliminateDeadCode(record::Graph& graph);
// Sizes read from inputs whose guards fix them (no symbols), the number
// operators computed from them and constants, and the decisions
// (magpy.expect_true) these settle become constants: every call the
// guards admit computes them alike. Returns how many nodes it removed.
size_t foldStaticSizes(record::Graph& graph);

// Whether the number node `number` reaches only values: operators take it
// (or float arithmetic on it: add, sub, mul, neg, abs; or int arithmetic
// on inputs alone, which planOrder moves before the graph's effects; the
// mock may store either) as a Python number
// in a Tensor operand (a 0-dim wrapped number, which broadcasts) or as a
// scalar that scales or shifts values (alpha, beta, value, other,
// exponent, min, max; the foreach operators' scalar, and scalars, a list
// of them). No result's sizes depend on it and no check or
// region reads it: a call with any value stops nowhere another would not
// (a learning rate).
bool onlyScalesValues(const record::Graph& graph, int number);

// Facts about an ATen operator that passes need, from its schema.
bool writesArguments(const record::Node& node);  // in-place, out=, running statistics
bool isRandom(const record::Node& node);         // draws from a generator

// What a graph does to the memory its values live in, from one walk.
struct StorageFacts {
  // Per node: the storage its value lives in (its own, or its base's for a
  // view) is written in place by the graph, or reaches the caller through
  // the Output node. Such a value must be a tensor of its own in every
  // call: not merged with an identical one, not cached, not shared with
  // the next call.
  std::vector<bool> writtenOrEscaping;
  // Per node: the storage its value lives in is written in place.
  std::vector<bool> writtenInPlace;
  size_t firstEffect = 0;  // as firstEffect below
};
StorageFacts storageFacts(const record::Graph& graph);

// Whether the graph writes one of its inputs (an argument, a parameter, a
// buffer) in place.
bool writesItsInputs(const record::Graph& graph);

// Whether a run of the graph stopped half-way changed nothing a program
// can observe: no tensor it reads from outside (an argument, a parameter,
// a buffer, batch norm's running statistics) written in place, no random
// number drawn.
bool stopsCleanly(const record::Graph& graph);
// The first node a stop after which would have changed something a
// program can observe (as above); the graph's size when there is none.
// Checks (record::isCheck) before it may stop a call cleanly.
size_t firstEffect(const record::Graph& graph);

// The order a plan runs the graph's nodes in: inputs first, and checks
// moved before the first effect with what they read, where that reads
// the same values (nothing on the way has effects or reads a tensor the
// graph writes). A check still after the first effect cannot stop a call
// cleanly: capture leaves a graph break instead.
record::Graph planOrder(const record::Graph& graph);

// Empty when every tensor the graph reads was written by a recorded
// operator; otherwise which node reads memory that only an allocation
// (aten::empty and friends) made. Capture makes such a run a graph break
// and replay refuses such a record: code outside ATen operators filled
// that memory, and a graph cannot repeat it.
std::string readsUninitialized(const record::Graph& graph);

}  // namespace magpy::replay

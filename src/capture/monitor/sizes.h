// Sizes the program reads from tensors (x.shape[1], b, n, _ = x.size()),
// followed from the read to the operators they reach. A size that only
// moves (locals, tuples and lists, unpacking, slices) and ends as an
// operator's argument becomes an aten::size.int node of the graph, so a
// dynamic record reads it from the call's tensors. Any other use (a
// comparison, a branch, arithmetic, a builtin, a store to state) is a
// decision magpy does not record yet: the run then used sizes (used(),
// firstUse() says where), and its record keeps its sizes.
//
// The tracker keeps its facts in a side table by shadow node; the monitor
// tells it what each instruction reads and builds.
#pragma once

#include <Python.h>

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "capture/python_frame.h"
#include "capture/pyobjects.h"
#include "capture/refgraph.h"

namespace magpy::capture {

class OpRecorder;

// The parts of slice objects the run built (start, stop, step): a slice
// holds the sizes and numbers it was built from.
using SliceParts = std::unordered_map<NodeId, std::vector<NodeId>>;

// What an instruction does with the sizes (or numbers) among its inputs.
struct Flow {
  enum class Kind : uint8_t {
    Moves,      // they move (stores, containers, calls decided later)
    Operators,  // the operators the instruction dispatches take them: hint those inputs
    Used,       // the program computes with them
  };
  Kind kind = Kind::Moves;
  uint8_t hinted = 0;  // Operators: a bit per input slot whose numbers the operators take

  static Flow moves() { return {}; }
  static Flow used() { return {Kind::Used, 0}; }
  static Flow operators(uint8_t inputs) { return {Kind::Operators, inputs}; }
};

class SizeTracker {
 public:
  // An int read as dimension `dim` of tensor node `tensor`, whose graph
  // value was `value` then (-1: none yet).
  struct Size {
    NodeId tensor = kNoNode;
    int32_t dim = -1;
    int32_t value = -1;
  };

  // location: where the run is now ("model.py:12"), for the first use.
  SizeTracker(const RefGraph& refs, OpRecorder& ops, const SliceParts& slices, std::function<std::string()> location);

  // Whether the run read sizes it follows: only then do instructions need
  // following.
  bool active() const { return active_; }
  const Size* find(NodeId n) const {
    return n >= 0 && size_t(n) < sizes_.size() && sizes_[size_t(n)].tensor != kNoNode ? &sizes_[size_t(n)] : nullptr;
  }
  // Whether n is a size or a container or slice holding one.
  bool holds(NodeId n, int depth = 0) const;

  // Reads: x.size(dim); x.shape and x.size() (each element a dimension).
  void tag(NodeId size, NodeId tensor, int64_t dim);
  void tagAll(NodeId sizes, NodeId tensor);
  // Moves into new tuples: x.shape[:2]; x.size()[:-1] + (h, d).
  void slice(NodeId from, PyObject* slice, NodeId to);
  void concat(NodeId left, NodeId right, NodeId to);

  // What an instruction does with the sizes among its inputs.
  // returnsToTracedCaller: RETURN_VALUE passes them to a traced frame.
  Flow follow(const Instruction& ins, const std::vector<NodeId>& inputs, const std::vector<PyRef>& inputObjs,
              bool returnsToTracedCaller) const;

  // The run used sizes (how: what did); the first use is kept, with where.
  void use(const std::string& how);
  bool used() const { return !firstUse_.empty(); }
  const std::string& firstUse() const { return firstUse_; }

 private:
  void copy(NodeId from, NodeId to);

  const RefGraph& refs_;
  OpRecorder& ops_;
  const SliceParts& slices_;
  std::function<std::string()> location_;
  std::vector<Size> sizes_;  // by shadow node
  bool active_ = false;
  std::string firstUse_;
};

}  // namespace magpy::capture

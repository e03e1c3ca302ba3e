// Python numbers the program keeps in its state (a step counter, a
// learning rate, a width), lifted into the graph (MagPy 6.2.1). Only runs
// of functions whose calls were seen to differ in such numbers lift them
// (CallSpec::varyingNumbers): an int or float the run reads from its state
// becomes a graph input where the run uses it, and everything it computes
// from it stays in the graph: Python's + - * / // become number operators,
// operators take the numbers as arguments (x * gain, x[:, :width]), and a
// number stored into state or returned becomes a graph output for the mock.
//
// Any other use (a comparison, a branch, a builtin, a container index, a
// Python function summarized by its annotation, a torch layer reading its
// own attributes, a native call that keeps it, torch making it tensor data)
// means the run depends on the value: the number is fixed, and its guard
// keeps its value.
//
// The lifter keeps its facts in a side table by shadow node; the monitor
// tells it what each instruction reads and computes.
#pragma once

#include <set>

#include "capture/monitor/sizes.h"

namespace magpy::capture {

class NumberLifter {
 public:
  // inputs: the graph's inputs and the shadow nodes they were made for
  // (the monitor's list, which lifted numbers of the state join).
  NumberLifter(const RefGraph& refs, OpRecorder& ops, const SizeTracker& sizes, const SliceParts& slices,
               std::vector<std::pair<int, NodeId>>& inputs, std::function<std::string()> location);

  // Runs lift numbers only when the JIT saw them change between calls.
  void enable(bool on) { active_ = on; }
  bool active() const { return active_; }

  // An int or float of the state, or computed from one, that is not a
  // size nor tensor data: the graph can hold it.
  bool liftable(NodeId n) const;
  // Whether n is liftable or a container or slice holding one.
  bool holds(NodeId n, int depth = 0) const;
  // The graph node of a liftable number; one of the state gets an input.
  int graphNode(NodeId n);
  // Whether the run used the number at n only in ways the graph repeats.
  bool free(NodeId n) const { return active_ && !allFixed_ && liftable(n) && !fixed_.count(n); }

  // What an instruction does with the numbers among its inputs.
  Flow follow(const Instruction& ins, const std::vector<NodeId>& inputs, const std::vector<PyRef>& inputObjs) const;
  // a + b on numbers, one of them lifted: a number operator of the graph
  // for `out`. binaryArg: BINARY_OP's argument.
  void liftArithmetic(int binaryArg, NodeId a, NodeId b, NodeId out);

  // The run used the numbers n holds, and those they were computed from.
  void fix(NodeId n, const std::string& how, int depth = 0);
  // The numbers hinted to the operators of the instruction that just
  // finished and that none of them took.
  void fixUntaken();
  const std::string& firstUse() const { return firstUse_; }

 private:
  void fixGraphNumber(int node);
  void noteUse(const std::string& how);

  const RefGraph& refs_;
  OpRecorder& ops_;
  const SizeTracker& sizes_;
  const SliceParts& slices_;
  std::vector<std::pair<int, NodeId>>& inputs_;
  std::function<std::string()> location_;
  bool active_ = false;
  std::vector<int32_t> graphNodes_;  // by shadow node: the graph node reading or computing it, -1: none (yet)
  std::set<NodeId> fixed_;           // numbers of the state whose value the run depends on
  bool allFixed_ = false;            // a use too deep to follow: all of them
  std::string firstUse_;
};

}  // namespace magpy::capture

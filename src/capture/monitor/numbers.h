// Python numbers the graph computes (MagPy 6.2.1): the numbers the program
// keeps in its state (a step counter, a learning rate, a width), the
// sizes it reads from tensors (SizeTracker) and the numbers it reads with
// t.item() (an optimizer's step count), followed through Python's
// arithmetic. Numbers of the state are lifted only in runs of functions
// whose calls were seen to differ in such numbers (CallSpec::varyingNumbers);
// an int or float the run reads from its state then becomes a graph input
// where the run uses it. Sizes are followed in every run that reads them.
// Everything computed from these stays in the graph: Python's + - * / // %,
// unary -, min, max, abs, int(), float(), math.sqrt/ceil/floor become
// number operators, operators take the numbers as arguments (x * gain,
// x[:, :width], x.view(b, t // 2, -1)), and a number stored into state or
// returned becomes a graph output for the mock. A comparison the program
// decides on (`if t > 8`, `assert d % h == 0`) becomes a predicate: the
// comparison that held, which the graph checks (magpy.expect_true), so a
// call where it goes the other way misses the record.
//
// Any other use (a branch on the number itself, a builtin, a container
// index, a Python function summarized by its annotation, a torch layer
// reading its own attributes, a native call that keeps it, torch making it
// tensor data) means the run depends on the value: a number of the state
// is fixed (its guard keeps its value); a size is used (SizeTracker: the
// record keeps its sizes); an item is checked (onItemFixed).
//
// The lifter keeps its facts in a side table by shadow node; the monitor
// tells it what each instruction reads and computes.
#pragma once

#include <set>

#include "capture/monitor/sizes.h"
#include "magpy/record/graph.h"

namespace magpy::capture {

class NumberLifter {
 public:
  // inputs: the graph's inputs and the shadow nodes they were made for
  // (the monitor's list, which lifted numbers of the state join).
  // sizeNode: the graph's aten::size.int node for a size the run read, or
  // -1 where its tensor has since become another graph value.
  NumberLifter(const RefGraph& refs, OpRecorder& ops, SizeTracker& sizes, const SliceParts& slices,
               std::vector<std::pair<int, NodeId>>& inputs, std::function<std::string()> location,
               std::function<int(NodeId)> sizeNode);

  // Runs lift numbers of the state only when the JIT saw them change
  // between calls.
  void liftState(bool on) { liftState_ = on; }
  bool active() const { return liftState_ || sizes_.active() || items_; }

  // An int or float the graph can compute: a number of the state (runs
  // that lift them), a size the run read, or one computed from these.
  bool liftable(NodeId n) const;
  // Whether n is liftable but no size as read (SizeTracker follows those),
  // or a container or slice holding such a number.
  bool holds(NodeId n) const;
  // The graph node of a liftable number (one of the state gets an input,
  // a size its aten::size.int node); -1 where the graph cannot have it.
  int graphNode(NodeId n);
  // The graph node n already has, or -1 (creates none).
  int knownNode(NodeId n) const { return n >= 0 && size_t(n) < graphNodes_.size() ? graphNodes_[size_t(n)] : -1; }
  // n is the index of a loop the monitor may roll, computed by graph node
  // `node` (builtins.int(k)). A use that fixes it goes to onIndexFixed
  // (the loop then stays unrolled); a number computed from it that no
  // operator took, to onIndexUntaken (rolling finds where it went).
  void bindIndex(NodeId n, int node);
  void onIndexFixed(std::function<void(int index, const std::string& how)> f) { onIndexFixed_ = std::move(f); }
  // n is the number t.item() gave, computed by the graph's aten::item
  // node `node`. A use that depends on its value goes to onItemFixed.
  void bindItem(NodeId n, int node);
  void onItemFixed(std::function<void(int node, const std::string& how)> f) { onItemFixed_ = std::move(f); }
  void onIndexUntaken(std::function<void(int node, int index)> f) { onIndexUntaken_ = std::move(f); }
  // Whether the run used the number of the state at n only in ways the
  // graph repeats.
  bool free(NodeId n) const {
    return liftState_ && !allFixed_ && liftable(n) && !sizes_.find(n) && !fixed_.count(n);
  }

  // What an instruction does with the numbers among its inputs.
  Flow follow(const Instruction& ins, const std::vector<NodeId>& inputs, const std::vector<PyRef>& inputObjs) const;
  // a + b, -a, min(a, b), math.sqrt(a) on numbers, one of them liftable:
  // a number operator of the graph for `out` (target: record::isNumberOp).
  void liftArithmetic(const char* target, const std::vector<NodeId>& operands, NodeId out);
  // a < b on numbers, one of them liftable: the graph node of the
  // comparison that held (`result` is what Python gave), for a predicate;
  // -1 where the graph cannot decide it (the operands are then fixed).
  int liftComparison(int compareArg, NodeId a, NodeId b, PyObject* result);

  // The run used the numbers n holds, and those they were computed from.
  void fix(NodeId n, const std::string& how, int depth = 0);
  // The numbers hinted to the operators of the instruction that just
  // finished and that none of them took.
  void fixUntaken();
  const std::string& firstUse() const { return firstUse_; }
  // The use that fixed the state's number n, and where ("" if none did).
  std::string useOf(NodeId n) const {
    auto it = uses_.find(n);
    return it == uses_.end() ? "" : it->second;
  }

 private:
  bool holdsWithin(NodeId n, int& budget) const;
  // "int" or "float" for a number the graph may take as an operand (a
  // plain or liftable one), "" for anything else.
  std::string typeOf(NodeId n) const;
  // Operands as graph arguments, with their types; false where one cannot be.
  bool operandsOf(const std::vector<NodeId>& operands, std::vector<record::Arg>& args, std::string types[2]);
  void fixAll(const std::vector<NodeId>& operands, const std::string& how);
  void fixGraphNumber(int node, const std::string& how);
  void noteUse(NodeId n, const std::string& how);
  int indexOf(int node) const;  // a loop index graph node `node` is computed from, or -1

  const RefGraph& refs_;
  OpRecorder& ops_;
  SizeTracker& sizes_;
  const SliceParts& slices_;
  std::vector<std::pair<int, NodeId>>& inputs_;
  std::function<std::string()> location_;
  std::function<int(NodeId)> sizeNode_;
  bool liftState_ = false;
  std::vector<int32_t> graphNodes_;  // by shadow node: the graph node reading or computing it, -1: none (yet)
  std::set<NodeId> fixed_;           // numbers of the state whose value the run depends on
  std::set<int> indexNodes_;         // graph nodes of loop indices (bindIndex)
  std::function<void(int, const std::string&)> onIndexFixed_;
  std::function<void(int, int)> onIndexUntaken_;
  std::function<void(int, const std::string&)> onItemFixed_;
  bool items_ = false;  // some number came from t.item()
  bool allFixed_ = false;            // a use too deep to follow: all of them
  std::string firstUse_;
  std::map<NodeId, std::string> uses_;  // by number of the state: the use that fixed it
};

}  // namespace magpy::capture

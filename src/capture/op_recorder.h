// Builds the operator graph from the ATen operators a monitored run
// dispatches. A thread-local RecordFunction observer sees each top-level
// operator (not the ones it calls internally) with its boxed inputs and
// outputs; tensors are tied to graph values by TensorImpl identity.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <functional>
#include <memory>
#include <string>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "magpy/record/graph.h"
#include "magpy/record/graph_utils.h"

namespace magpy::capture {

class OpRecorder {
 public:
  // What the recorder asks of the monitor that owns it.
  struct Delegate {
    virtual ~Delegate() = default;
    // A graph input for a tensor the graph did not make: a placeholder or
    // get_attr node (index) when the tensor is external state, or -1.
    virtual int externalTensor(const at::Tensor& t) = 0;
    // `t` is about to be written by an operator.
    virtual void beforeWrite(const at::Tensor& t) = 0;
    // A graph constant (index) for a tensor torch made from Python data
    // without an operator (t[i] = 3 lifts 3 with aten::lift_fresh).
    virtual int pythonDataTensor(const at::Tensor& t) = 0;
    // Python reads the contents of t (an operator gives it a number or
    // bool): true when the graph checks them there (Monitor::checksContents).
    virtual bool checksContents(const at::Tensor& t) = 0;
    // The run did something a graph cannot hold: a graph break.
    virtual void breakGraph(const std::string& reason) = 0;
    // The record depends on interpreter state (a "runtime." path): a
    // collective on the process group's size and backend.
    virtual void readRuntimeState(const std::string& name) = 0;
    // The source line ("file.py:12") of the operator being recorded; asked
    // only for operators that become nodes.
    virtual std::string sourceLocation() const = 0;
    // Whether the program can no longer reach tensor t from Python: the
    // references to t its Python object holds then (0 or 1), or -1 while
    // the program can reach it. Asked in rounds, each after one call of
    // settleReachability.
    virtual void settleReachability() = 0;
    virtual int unreachableHolds(const at::Tensor& t) = 0;
    // The memory of t, unreachable, was freed: the program must not find
    // it again (as gc.get_objects() would).
    virtual void freed(const at::Tensor& t) = 0;
  };

  explicit OpRecorder(Delegate& delegate);
  ~OpRecorder();
  OpRecorder(const OpRecorder&) = delete;
  OpRecorder& operator=(const OpRecorder&) = delete;

  // Operators are recorded only while enabled: the monitor disables the
  // recorder while its own code runs.
  void setEnabled(bool on) { enabled_ = on; }

  record::Graph& graph() { return graph_; }
  // The graph value currently holding t, or -1. A tensor that is a shallow
  // copy of a graph value (same storage and view: what torch's factories
  // hand to Python, or .data) is that value.
  int valueOf(const at::Tensor& t);
  // Adds a placeholder/get_attr node for an external tensor (source filled later).
  int addInput(const at::Tensor& t, std::string name);
  // Adds a constant tensor made during the run (torch.tensor(...) data).
  int addConstant(const at::Tensor& t, int64_t blob);
  // True when t's shape depends on tensor contents (nonzero, masked_select, ...).
  bool hasDataDependentShape(const at::Tensor& t);
  // True when t's contents follow from graph constants alone (torch.tensor
  // of sizes, arithmetic on it): the guards fix them, so Python may read
  // them (.item(), .tolist()) without making the run data-dependent.
  bool contentsFixedByGuards(const at::Tensor& t);
  // Checks (record::isCheck) that Python read graph value `value`: its
  // contents, equal to constant node `seen` (they then count as fixed for
  // contentsFixedByGuards until written), or its sizes, which depend on
  // tensor contents (hasDataDependentShape is then false).
  // Both return the check node's name.
  std::string addContentsCheck(int value, int seen, const std::string& where);
  std::string addSizesCheck(int value, std::vector<int64_t> sizes, const std::string& where);
  // Whether graph node `node` reads a tensor of the state or the arguments
  // (not a constant the run made).
  bool readsState(int node) const { return graph_.nodes[size_t(node)].isInput() && !constants_.count(node); }
  // Whether a recorded operator allocated this storage during the run: no
  // tensor of the state the call began with is on it.
  bool allocatedInRun(const c10::StorageImpl* storage) const { return allocated_.count(storage) != 0; }
  // After a graph break nothing more is recorded: the tensors bound so
  // far are let go, to be freed when the program drops them.
  void releaseBindings();
  // The references to t the recorder holds (one per binding).
  size_t bindings(const at::Tensor& t) const;
  // The node writes one of its tensor arguments: never dead code.

  // A Python number of the graph (record::Node::number): an input that
  // reads it from the state, or arithmetic on such numbers, sizes and
  // constants (seen: its value at capture).
  int addNumberInput(const record::Atom& seen);
  int addNumberOp(const std::string& target, std::vector<record::Arg> args, const std::string& type,
                  const record::Atom& seen);
  // The aten::size.int node reading dimension `dim` of graph value `value`
  // (one per pair).
  int sizeNode(int value, int64_t dim, const std::string& where);
  // magpy.expect_true(%comparison): a decision of the program on numbers
  // of the graph. Returns the check's name.
  std::string addDecisionCheck(int comparison, const std::string& where);
  // record::kItem(%value): the number `seen` that t.item() read from value.
  int addItem(int value, const record::Atom& seen);

  // What autograd's engine did for the program's backward() (graph.h's
  // magpy.backward): the node, one getitem per leaf (their nodes are
  // returned), each the gradient whose metadata is in `gradients`.
  std::vector<int> addBackward(int root, int grad, const std::vector<int>& leaves, bool retainGraph,
                               const std::vector<record::TensorMeta>& gradients, const std::string& where);
  // `grad += gradient` (aten::add_), as the engine accumulates into a
  // leaf's existing .grad; false (and a break) when grad is no value.
  bool addAccumulation(const at::Tensor& grad, int gradient, const std::string& where);
  // A tensor the graph's value `node` is from now on (a gradient autograd stored).
  void bindTo(const at::Tensor& t, int node) { bind(t, node); }
  // t.data: aten::detach(%value) for `alias` (the storage, no autograd),
  // so writes through it do not write a leaf that requires grad.
  void addDetached(const at::Tensor& alias, int value, const std::string& where);

  // The numbers the Python call now running passes (flattened, in order):
  // a size read from a graph value (`value` >= 0: dimension `dim` of it),
  // a lifted number (`node` >= 0), or a plain number. The operators the
  // call dispatches take sizes as aten::size.int nodes and lifted numbers
  // as their nodes; a number that more than one hint could be stays a
  // number. A lifted number an operator takes in no argument, or also
  // takes as a plain number where it cannot tell which is which, or that
  // two operators take (x[:, :k] runs slice(x, 0, 0, end, 1) first, whose
  // step may have k's value), is reported by takeUnliftedNumbers(): the
  // run depends on its value.
  struct NumberHint {
    int64_t number = 0;
    int value = -1;
    int64_t dim = 0;
    int node = -1;
    bool real = false;  // a float: its value is `f`
    double f = 0;
    bool lifted = false;    // some operator took it as its node
    bool liftedHere = false;  // the operator being recorded did
    int takenBy = 0;          // how many operators took it: more than one conflicts
    bool conflict = false;  // some operator took its value as a plain number
  };
  void setNumberHints(std::vector<NumberHint> hints) { hints_ = std::move(hints); }
  // Clears the hints; returns the lifted numbers' nodes the operators did not take.
  std::vector<int> takeUnliftedNumbers();

  // Called by the RecordFunction callbacks.
  void onOperator(const std::string& name, const std::string& overload, const std::vector<c10::IValue>& inputs,
                  const std::vector<c10::IValue>& outputs);
  void onBeforeOperator(const std::string& name, const std::string& overload, c10::ArrayRef<const c10::IValue> inputs);
  bool enabled() const { return enabled_; }
  // A warning the kernel of a recorded operator gave (its message).
  void operatorWarned(std::string message) { operatorWarnings_.push_back(std::move(message)); }
  // Whether `text`, a warning torch's bindings gave Python, is one of
  // those: its message, bare or with the origin the bindings append. The
  // replayed graph gives it again (the JIT's GraphWarnings). Each noted
  // warning matches once.
  bool fromRecordedOperator(const char* text);
  // A graph break for what the recorder could not do.
  void breakOn(const std::string& reason) { delegate_.breakGraph(reason); }

  // The grad mode the monitored call began in.
  bool gradEnabledAtEntry() const { return gradEnabledAtEntry_; }
  // The program switched grad mode where the monitor saw it (and guards
  // the mode at entry): operators in another mode become region nodes.
  void allowGradRegions() { gradRegions_ = true; }

 private:
  int bind(const at::Tensor& t, int node);
  bool readsFixedNumbers(const std::vector<c10::IValue>& inputs, const std::vector<c10::IValue>& outputs);
  bool writtenAfter(int value, size_t position) const;
  void releaseUnreachable();
  bool unreachable(const c10::Storage& storage, const std::vector<at::Tensor>& bound);
  bool checksInputs(const std::vector<c10::IValue>& inputs);
  void noteAllocations(const std::vector<c10::IValue>& inputs, const std::vector<std::pair<int64_t, at::Tensor>>& results);
  int addNode(const std::string& target, const std::string& name, std::vector<record::Arg> args, const std::string& where);
  // candidate: per argument, whether it may be one of the hinted numbers.
  void liftHints(std::vector<record::Arg>& args, const std::vector<bool>& candidate, const std::string& where);
  void liftHint(record::Arg& a, const std::string& where);
  void liftFloatList(record::Arg& a, const std::string& where);
  bool matchesByPosition(const record::Arg& a) const;
  NumberHint* hintFor(bool real, int64_t i, double f);
  int hintNode(NumberHint& h, const std::string& where);
  bool argFor(const c10::IValue& v, const c10::Argument& param, record::Arg& out, const std::string& op);
  bool listArg(const c10::IValue& v, const c10::Argument& param, record::Arg& out, const std::string& op);
  int64_t tensorArg(const at::Tensor& t, const std::string& op);
  bool collectiveAllowed(const std::string& op, record::GradMode grad);
  static bool writesArgument(const std::string& name, const c10::FunctionSchema& schema, size_t i,
                             c10::ArrayRef<const c10::IValue> inputs);

  Delegate& delegate_;
  // An operator that runs in another grad mode than the call's carries its
  // region's mode (record::GradMode) once the monitor has seen the program
  // switch it (allowGradRegions); before that, such an operator is a break.
  bool gradEnabledAtEntry_;
  bool gradRegions_ = false;
  bool enabled_ = false;
  std::vector<std::string> operatorWarnings_;  // operatorWarned, not yet matched
  record::Graph graph_;
  std::unordered_map<c10::TensorImpl*, int> values_;
  std::map<std::string, int> byView_;  // storage + view metadata -> latest value
  // For contentsFixedByGuards: the storage of each value, and when an
  // operator last wrote a storage in place (the graph's size then).
  std::unordered_map<int, const c10::StorageImpl*> storageOf_;
  std::unordered_map<const c10::StorageImpl*, size_t> lastWrite_;
  std::set<int> constants_;  // the nodes of constant tensors the run made (their blobs come later)
  std::unordered_map<int, size_t> checkedAt_;  // value -> the graph's size when a check fixed its contents
  std::unordered_set<int> sizesChecked_;       // values whose sizes a check fixed
  // Every tensor bound (once per binding), by its storage then, so that
  // no TensorImpl or StorageImpl address is reused during the run.
  std::unordered_map<const c10::StorageImpl*, std::vector<at::Tensor>> bound_;
  std::unordered_set<const c10::StorageImpl*> allocated_;
  // The storages of allocated_ whose memory the run still holds. An eager
  // run frees an intermediate's memory as soon as the program drops it;
  // kept, every operator fills fresh memory, whose page faults cost more
  // than the operators themselves (ResNet-18 here: bench/README.md).
  // Before each operator, releaseUnreachable frees the memory of those the
  // program can no longer reach; the StorageImpl and TensorImpls stay.
  std::vector<const c10::StorageImpl*> holding_;
  std::unordered_set<c10::TensorImpl*> dataDependentShape_;
  record::Namespace names_;  // of the nodes in graph_
  std::vector<NumberHint> hints_;
  std::map<std::pair<int, int64_t>, int> sizeNodes_;  // (value, dim) -> its aten::size.int node
  uint64_t callbackHandle_ = 0;
};

}  // namespace magpy::capture

// The program's backward pass: `loss.backward()` and
// torch.autograd.backward(...) inside a monitored call become one
// magpy.backward node (record/graph.h). The engine runs for real, unseen by
// the operator recorder; the monitor vouches for what replay's engine will
// find instead: an autograd graph the call's own operators built, ending
// in leaves that are graph inputs, with no hooks and no Python backward
// anywhere on it. Each leaf's .grad then is the node's gradient (it was
// None) or has it added in place (it held a tensor), as the engine's
// accumulation does.
#include <ATen/SequenceNumber.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/autograd/variable.h>

#include <typeinfo>
#include <unordered_set>

#include "capture/monitor/monitor.h"
#include "capture/monitor/state.h"
#include "magpy/replay/plan.h"
#include "magpy/replay/tensors.h"

namespace magpy::capture {
namespace {

// The arguments of a backward call by name, as Python binds them.
struct BackwardArgs {
  PyObject* tensors = nullptr;
  PyObject* grad = nullptr;
  PyObject* retainGraph = nullptr;
  PyObject* createGraph = nullptr;
  PyObject* inputs = nullptr;
  PyObject* gradVariables = nullptr;
};

bool bindBackwardArgs(const std::string& callee, const std::vector<PyObject*>& positional,
                      const std::vector<std::pair<std::string, NodeId>>& keywords,
                      const std::vector<PyObject*>& keywordObjs, BackwardArgs& out) {
  bool method = callee == "torch.Tensor.backward";
  std::vector<std::pair<const char*, PyObject**>> params = {
      {method ? "self" : "tensors", &out.tensors}, {method ? "gradient" : "grad_tensors", &out.grad},
      {"retain_graph", &out.retainGraph},         {"create_graph", &out.createGraph}};
  if (!method) params.push_back({"grad_variables", &out.gradVariables});
  params.push_back({"inputs", &out.inputs});
  if (positional.size() > params.size()) return false;
  for (size_t i = 0; i < positional.size(); ++i) *params[i].second = positional[i];
  for (size_t k = 0; k < keywords.size(); ++k) {
    auto it = std::find_if(params.begin(), params.end(), [&](auto& p) { return keywords[k].first == p.first; });
    if (it == params.end() || *it->second) return false;
    *it->second = keywordObjs[k];
  }
  return true;
}

bool isNone(PyObject* o) { return !o || o == Py_None; }

// A first gradient as autograd stores it: laid out like its leaf where the
// leaf is dense, else contiguous (torch's grad layout contract).
record::TensorMeta gradientMeta(const at::Tensor& leaf) {
  record::TensorMeta m = replay::metaOf(leaf);
  m.requires_grad = false;
  if (!leaf.is_non_overlapping_and_dense()) {
    int64_t stride = 1;
    for (size_t d = m.shape.size(); d-- > 0;) {
      m.strides[d] = stride;
      stride *= std::max<int64_t>(m.shape[d], 1);
    }
  }
  return m;
}

}  // namespace

bool Monitor::isBackwardCall(const std::string& callee) {
  return callee == "torch.Tensor.backward" || callee == "torch.autograd.backward";
}

void Monitor::beginBackward(Pending& p) {
  for (NodeId n : p.positional)
    if (n >= 0) refs_.use(n);
  for (auto& kw : p.keywords)
    if (kw.second >= 0) refs_.use(kw.second);
  BackwardArgs a;
  if (!bindBackwardArgs(p.calleeName, p.positionalObjs, p.keywords, p.keywordObjs, a)) {
    graphBreak(p.calleeName + " is called with arguments magpy does not bind");
    return;
  }
  if (!a.tensors || !isTensor(a.tensors) || !(isNone(a.grad) || isTensor(a.grad))) {
    graphBreak(p.calleeName + " of anything but one tensor (and its gradient or None) is not captured");
    return;
  }
  if (!isNone(a.inputs) || !isNone(a.gradVariables) || (a.createGraph && a.createGraph != Py_False)) {
    graphBreak(p.calleeName + " with inputs=, create_graph=True (double backward) or grad_variables= is not captured");
    return;
  }
  if (!isNone(a.retainGraph) && !PyBool_Check(a.retainGraph)) {
    graphBreak(p.calleeName + ": retain_graph is not a bool");
    return;
  }
  const at::Tensor& root = tensorOf(a.tensors);
  readAutogradMode();  // with grad mode off the call's operators build no autograd graph
  backward_ = BackwardCall{};
  backward_.root = ops_->valueOf(root);
  backward_.retainGraph = a.retainGraph == Py_True;
  if (backward_.root < 0 || !root.requires_grad() || !root.grad_fn()) {
    graphBreak(p.calleeName + " of a tensor the call's operators did not compute with autograd");
    return;
  }
  if (!isNone(a.grad)) {
    backward_.grad = ops_->valueOf(tensorOf(a.grad));
    if (backward_.grad < 0) backward_.grad = externalTensor(tensorOf(a.grad));
    if (backward_.grad < 0) {
      graphBreak(p.calleeName + " takes a gradient that is no value of the graph");
      return;
    }
  } else if (root.numel() != 1) {
    graphBreak(p.calleeName + " of a tensor with more than one element needs a gradient");  // as torch raises
    return;
  }
  if (!backwardLeaves(root)) return;
  p.backward = true;
  p.traceCallees = false;  // torch's own Python around the engine
  p.suppressOps = true;    // the engine's operators: the node stands for them
}

// Walks the autograd graph from root: every node the call's operators made
// (none from before it, none with a Python or C++ custom backward, no
// hooks), every leaf a graph input. Fills backward_.leaves, reading each
// leaf's .grad as the program's state; false after a break.
bool Monitor::backwardLeaves(const at::Tensor& root) {
  using torch::autograd::Node;
  std::vector<Node*> todo = {root.grad_fn().get()};
  std::unordered_set<Node*> seen = {todo[0]};
  auto refuse = [&](const std::string& why) {
    graphBreak("backward() cannot be a graph node: " + why);
    return false;
  };
  while (!todo.empty()) {
    Node* n = todo.back();
    todo.pop_back();
    auto* acc = dynamic_cast<torch::autograd::AccumulateGrad*>(n);
    bool reduced = acc && reducedByDataParallel(*n, acc->variable);  // DDP's hook: its reduction follows (finishBackward)
    if (!reduced && (!n->pre_hooks().empty() || !n->post_hooks().empty()))
      return refuse("autograd node " + n->name() + " has hooks (register_hook, module backward hooks), which run Python");
    if (acc) {
      const at::Tensor& leaf = acc->variable;
      auto node = tensorNodes_.find(leaf.unsafeGetTensorImpl());
      int value = ops_->valueOf(leaf);
      if (node == tensorNodes_.end() || value < 0 || !ops_->graph().nodes[size_t(value)].isInput())
        return refuse("a tensor autograd accumulates a gradient into is not one the call read");
      if (std::string hooks = replay::autogradHooks(leaf, reduced); !hooks.empty())
        return refuse("a tensor autograd accumulates a gradient into has hooks: " + hooks);
      BackwardCall::Leaf l{leaf, node->second, value, leaf.grad()};
      if (l.gradBefore.defined() && (l.gradBefore.is_sparse() || l.gradBefore.requires_grad()))
        return refuse("a leaf's .grad is sparse or requires grad");
      PyObject* grad = l.gradBefore.defined() ? THPVariable_Wrap(l.gradBefore) : Py_NewRef(Py_None);
      registerTensor(refs_.read(l.node, Relation::attr("grad"), grad));
      Py_DECREF(grad);  // the RefGraph holds it
      if (l.gradBefore.defined()) keepEntryContents(l.gradBefore);  // the engine adds into it before finishBackward
      backward_.leaves.push_back(std::move(l));
      continue;
    }
    std::string type = typeid(*n).name();
    if (type.find("PyNode") != std::string::npos || type.find("CppNode") != std::string::npos)
      return refuse("autograd node " + n->name() + " is a custom autograd Function's backward");
    if (n->sequence_nr() < autogradStart_)
      return refuse("the tensor it differentiates depends on autograd history from before the call (" + n->name() +
                    "); compile the code that made it too");
    for (const auto& edge : n->next_edges())
      if (edge.function && seen.insert(edge.function.get()).second) todo.push_back(edge.function.get());
  }
  if (backward_.leaves.empty()) return refuse("no tensor receives a gradient");
  size_t reduced = 0;
  for (auto& l : backward_.leaves) reduced += reducedByDataParallel_.count(l.variable.unsafeGetTensorImpl());
  if (reduced != reducedByDataParallel_.size())
    return refuse("a parameter of DistributedDataParallel's module gets no gradient, which DDP refuses without "
                  "find_unused_parameters=True");
  return true;
}

// After the engine ran: the node, then each leaf's .grad as it became.
bool Monitor::finishBackward(Step& s) {
  s.out[0] = newNode(s.outObj(0));
  std::vector<int> leaves;
  std::vector<record::TensorMeta> metas;
  for (auto& l : backward_.leaves) {
    const at::Tensor& after = l.variable.grad();
    bool accumulated = l.gradBefore.defined();
    if (after.defined() && after.layout() != at::kStrided) {
      graphBreak("backward() gave a sparse gradient (an embedding with sparse=True), which records do not hold");
      return false;
    }
    if (!after.defined() || (accumulated && after.unsafeGetTensorImpl() != l.gradBefore.unsafeGetTensorImpl())) {
      graphBreak("backward() left a leaf's .grad other than by storing or adding one gradient");
      return false;
    }
    leaves.push_back(l.value);
    metas.push_back(gradientMeta(l.variable));
  }
  std::string where = currentLocation();
  std::vector<int> gradients =
      ops_->addBackward(backward_.root, backward_.grad, leaves, backward_.retainGraph, metas, where);
  for (size_t k = 0; k < backward_.leaves.size(); ++k) {
    auto& l = backward_.leaves[k];
    if (l.gradBefore.defined()) {
      if (!ops_->addAccumulation(l.gradBefore, gradients[k], where)) return false;
      continue;
    }
    const at::Tensor& stored = l.variable.grad();
    PyObject* obj = THPVariable_Wrap(stored);
    NodeId g = newNode(obj);
    Py_DECREF(obj);  // the RefGraph holds it
    ops_->bindTo(stored, gradients[k]);
    refs_.write(l.node, Relation::attr("grad"), g);
  }
  if (!reducedByDataParallel_.empty()) reduceDataParallelGradients();
  backward_ = BackwardCall{};
  return !broken_;
}

}  // namespace magpy::capture

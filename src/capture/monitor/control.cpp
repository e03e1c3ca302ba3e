// Operators on values, iteration and control flow. The program's control
// flow is fixed in the graph, so a branch may only depend on what guards
// cover: never on tensor contents or on objects magpy cannot see into.
#include "capture/monitor/monitor.h"
#include "capture/monitor/state.h"

namespace magpy::capture {

// A new value computed from the instruction's inputs: a scalar computed
// from tensor contents stays marked as such.
NodeId Monitor::derived(const Pending& p, PyObject* value) {
  NodeId id = newNode(value);
  for (NodeId i : p.inputs)
    if (i >= 0 && refs_.node(i).dataDependent && refs_.node(id).kind == NodeKind::Atom) refs_.node(id).dataDependent = true;
  return id;
}

// An operator-like instruction: the result of a traced special method, an
// operator on plain values or tensors, or something we cannot follow.
NodeId Monitor::operatorResult(const Pending& p, PyObject* value) {
  if (NodeId computed = p.calleeReturned(value); computed != kNoNode) return computed;
  for (size_t k = 0; k < p.inputObjs.size(); ++k)
    if (p.inputObjs[k] && externalOpaque(p.inputs[k])) {  // a set, or a dict keyed by objects, included
      graphBreak(std::string(opName(p.ins.op)) + " on a " + Py_TYPE(p.inputObjs[k].get())->tp_name +
                 " object runs native code on contents magpy cannot guard");
      return kNoNode;
    }
  // Operators of user classes run in Python (traced); those of plain
  // values and followed containers depend only on guarded inputs.
  return derived(p, value);
}

bool Monitor::finishBinaryOp(Step& s) {
  PyObject* v = s.outObj(0);
  if (binaryOpIsInPlace(s.ins().arg) && v == s.inObj(0) && !isAtom(v)) {
    // a += b on a mutable object: the object changed (a list's +=, a
    // dict's |=), the ATen op recorded the write (tensors), or a Python
    // class's operator ran traced. Native code changing another object
    // (a set's |=) is not followed.
    NodeKind kind = refs_.node(s.in(0)).kind;
    if (kind == NodeKind::List || kind == NodeKind::Dict) {
      refs_.changedInPlace(s.in(0));
    } else if (kind != NodeKind::Tensor && !PyType_HasFeature(Py_TYPE(v), Py_TPFLAGS_HEAPTYPE)) {
      graphBreak(std::string("an in-place operator changes a ") + Py_TYPE(v)->tp_name + ", which is not followed");
      return false;
    }
    s.out[0] = s.in(0);
    return true;
  }
  s.out[0] = operatorResult(s.p, v);
  if (numbers_.active()) numbers_.liftArithmetic(numberBinaryOp(s.ins().arg), {s.in(0), s.in(1)}, s.out[0]);
  if (sizes_.active() && s.out[0] >= 0 && PyTuple_Check(s.inObj(0)) && PyTuple_Check(s.inObj(1)) && PyTuple_Check(v))
    sizes_.concat(s.in(0), s.in(1), s.out[0]);  // x.size()[:-1] + (h, d)
  return s.out[0] != kNoNode;
}

// Unary operators, comparisons, `in`. A comparison of numbers the graph
// computes is a decision the graph checks (a predicate).
bool Monitor::finishOperator(Step& s) {
  if (s.ins().op == Op::CONTAINS_OP && !containsFollowed(s)) return false;
  s.out[0] = operatorResult(s.p, s.outObj(0));
  if (s.out[0] == kNoNode || !numbers_.active()) return s.out[0] != kNoNode;
  if (s.ins().op == Op::UNARY_NEGATIVE) numbers_.liftArithmetic("operator.neg", {s.in(0)}, s.out[0]);
  if (s.ins().op == Op::COMPARE_OP)
    if (int comparison = numbers_.liftComparison(s.ins().arg, s.in(0), s.in(1), s.outObj(0)); comparison >= 0)
      checksDecision(comparison);
  return true;
}

// `k in d` for a dict keyed by objects: no guard covers its whole key
// set, so the answer is the element read (d[@k]) or its absence.
bool Monitor::containsFollowed(Step& s) {
  NodeId dict = s.in(1);
  PyObject *key = s.inObj(0), *d = s.inObj(1);
  if (dict < 0 || refs_.node(dict).kind != NodeKind::Dict || !PyDict_Check(d)) return true;
  if (!identityKey(key)) {
    if (!refs_.keyedByObjects(dict)) return true;
    graphBreak("`in` on a dict keyed by tensors, with a key that is not one: which keys it holds is not guarded");
    return false;
  }
  Relation rel = *refs_.dictRelation(key);
  PyObject* element = nullptr;
  PyObject *k, *v;
  Py_ssize_t pos = 0;
  while (!element && PyDict_Next(d, &pos, &k, &v))
    if (k == key) element = v;
  if (element) refs_.read(dict, rel, element);
  else absent_.push_back({dict, rel});
  return true;
}

bool Monitor::finishIsOp(Step& s) {
  if (breaksOnDistinctIdentity(s.in(0), s.in(1), s.outObj(0))) return false;
  s.out[0] = newNode(s.outObj(0));
  return true;
}

bool Monitor::finishFormatValue(Step& s) {
  if (refs_.node(s.in(0)).kind == NodeKind::Tensor) {
    graphBreak("formatting a tensor reads its contents");
    return false;
  }
  return finishOperator(s);
}

// BUILD_SET, BUILD_STRING, BUILD_SLICE: opaque values built from followed inputs.
// A set of objects or tensors is as large as they are distinct objects,
// which no guard follows ({a, b} when a name later holds b's object).
bool Monitor::finishBuildValue(Step& s) {
  if (s.ins().op == Op::BUILD_SET)
    for (NodeId in : s.p.inputs)
      if (in >= 0 && (refs_.node(in).kind == NodeKind::Object || refs_.node(in).kind == NodeKind::Tensor)) {
        graphBreak("a set of objects depends on which of them are one object, which no guard follows");
        return false;
      }
  s.out[0] = derived(s.p, s.outObj(0));
  if ((sizes_.active() || numbers_.active()) && s.ins().op == Op::BUILD_SLICE && s.out[0] >= 0) slices_[s.out[0]] = s.p.inputs;
  return true;
}

// outputs: the object, its length
bool Monitor::finishGetLen(Step& s) {
  if (refs_.node(s.in(0)).kind == NodeKind::Tensor) sizes_.use("len() of a tensor");
  s.out[0] = s.in(0);
  s.out[1] = derived(s.p, s.outObj(1));
  return true;
}

bool Monitor::finishGetIter(Step& s) {
  PyObject* iterated = s.inObj(0);
  if (breaksOnContentLength(iterated, "iterating over")) return false;
  PyObject* v = s.outObj(0);
  if (v == iterated) {
    s.out[0] = s.in(0);
    return true;
  }
  if (s.p.calleeResult == kNoNode && breaksOnOpaqueContents(s.in(0), iterated, "iterating over")) return false;
  if (refs_.node(s.in(0)).kind == NodeKind::Dict && refs_.keyedByObjects(s.in(0))) {
    graphBreak("iterating over a dict keyed by tensors: the order and identity of its keys are not guarded");
    return false;
  }
  NodeId computed = s.p.calleeReturned(v);
  s.out[0] = computed != kNoNode ? computed : newNode(v);
  NodeKind kind = refs_.node(s.in(0)).kind;
  if ((kind == NodeKind::Tuple && Py_IS_TYPE(v, &PyTupleIter_Type)) || (kind == NodeKind::List && Py_IS_TYPE(v, &PyListIter_Type)))
    sequenceIterators_[s.out[0]] = {s.in(0), 0};
  if (auto loop = loopOf_.find(s.in(0)); loop != loopOf_.end() && loopWatches_[loop->second].range == s.in(0)) {
    loopWatches_[loop->second].iterator = s.out[0];
    loopOf_[s.out[0]] = loop->second;
  }
  return true;
}

// outputs: the iterator, the next value; none when it is exhausted.
bool Monitor::finishForIter(Step& s) {
  if (iteratesOutsideIterator(s.in(0))) return true;
  auto loop = loopOf_.find(s.in(0));
  if (!s.out.empty()) {  // exhausted: the iterator was popped
    s.out[0] = s.in(0);
    s.out[1] = iterationValue(s.p, s.in(0), s.outObj(1));
  }
  if (loop != loopOf_.end() && loopWatches_[loop->second].iterator == s.in(0)) loopAdvanced(s, loop->second);
  return true;
}

// A native iterator the call began with (an argument, a map object its
// caller made) holds a position no record keeps, and may call native code
// unseen (map's function): advancing it breaks the graph. Generators and
// Python classes' iterators run traced.
bool Monitor::iteratesOutsideIterator(NodeId iterator) {
  const ShadowNode& n = refs_.node(iterator);
  PyObject* it = n.obj;
  if (!n.external || !it || PyGen_Check(it) || (Py_TYPE(it)->tp_flags & Py_TPFLAGS_HEAPTYPE) || !PyIter_Check(it) ||
      sequenceIterators_.count(iterator))
    return false;
  graphBreak("the call iterates a " + typeName(Py_TYPE(it)) +
             " it was given, whose position (and what it calls) a record cannot hold: pass the sequence instead");
  return true;
}

NodeId Monitor::iterationValue(Pending& p, NodeId iterator, PyObject* value) {
  if (NodeId yielded = p.calleeReturned(value); yielded != kNoNode) return yielded;  // a generator yielded it
  auto it = sequenceIterators_.find(iterator);
  if (it != sequenceIterators_.end()) {
    auto& [sequence, next] = it->second;
    return refs_.read(sequence, Relation::at(next++), value);
  }
  return newNode(value);
}

// JUMP_IF_FALSE_OR_POP, JUMP_IF_TRUE_OR_POP: the tested value stays when
// the jump is taken.
bool Monitor::finishJumpOrPop(Step& s) {
  if (!s.out.empty()) s.out[0] = s.in(0);
  return true;
}

// outputs: the bound __exit__, what __enter__ returned
bool Monitor::finishBeforeWith(Step& s) {
  s.out[0] = newNode(s.outObj(0));
  PyObject* entered = s.outObj(1);
  NodeId computed = s.p.calleeReturned(entered);
  s.out[1] = computed != kNoNode ? computed : newNode(entered);
  return true;
}

// Resumed: the value sent in (None for next()) is on the stack.
bool Monitor::finishYieldValue(Step& s) {
  if (!s.out.empty()) s.out[0] = newNode(s.outObj(0));
  return true;
}

// At a truth test, before it runs: the branch it takes must follow from
// guarded values.
void Monitor::checkTruthTest(const Pending& p) {
  if (p.inputs.empty()) return;
  // Reading a value computed from tensor contents to decide control flow.
  if (p.inputs[0] >= 0 && refs_.node(p.inputs[0]).dataDependent)
    graphBreak("a branch depends on a value computed from tensor contents");
  if (!externalOpaque(p.inputs[0])) return;
  PyTypeObject* t = Py_TYPE(p.inputObjs[0].get());
  bool nativeTruth = (t->tp_as_number && t->tp_as_number->nb_bool) ||
                     (t->tp_as_sequence && t->tp_as_sequence->sq_length) ||
                     (t->tp_as_mapping && t->tp_as_mapping->mp_length);
  if (nativeTruth)
    graphBreak(std::string("the truth of a ") + t->tp_name + " object is computed by native code from contents magpy cannot guard");
}

// Iterating or unpacking a tensor takes as many steps as its first
// dimension; when that length came from tensor contents (boxes[scores > t])
// a graph with a fixed count would be wrong on the next call.
bool Monitor::breaksOnContentLength(PyObject* iterated, const char* doing) {
  if (!iterated || !isTensor(iterated)) return false;
  sizes_.use(std::string(doing) + " a tensor");
  const at::Tensor& t = tensorOf(iterated);
  if (!ops_->hasDataDependentShape(t) || checksSizes(t)) return false;
  graphBreak(std::string(doing) + " a tensor whose length depends on tensor contents");
  return true;
}

// `a is b` on two distinct objects from outside: guards can say two paths
// are one object (alias guards), not that they stay two. Scalars compare
// by value, and modules, functions and enum members are guarded by
// identity, so only other objects are a concern.
bool Monitor::breaksOnDistinctIdentity(NodeId a, NodeId b, PyObject* result) {
  if (result != Py_False && result != Py_True) return false;
  auto identityGuarded = [&](NodeId id) {
    const ShadowNode& n = refs_.node(id);
    return n.kind == NodeKind::Atom || n.kind == NodeKind::Module || n.kind == NodeKind::Function ||
           !enumMemberName(n.obj).empty();
  };
  if (a < 0 || b < 0 || a == b || !refs_.node(a).external || !refs_.node(b).external) return false;
  if (identityGuarded(a) || identityGuarded(b)) return false;
  bool sameObject = refs_.node(a).obj == refs_.node(b).obj;
  if (sameObject) return false;  // one object reached twice: an alias guard holds it
  graphBreak("an identity test (is) between two distinct objects from outside the call");
  return true;
}

}  // namespace magpy::capture

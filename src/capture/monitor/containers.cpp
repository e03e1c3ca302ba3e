// Containers: subscripts, unpacking, building tuples, lists and dicts, and
// the in-place updates of displays and comprehensions. Elements of tuples,
// lists and dicts are followed as edges (at(i), keyed(k)), so a value read
// back out keeps its provenance.
#include <algorithm>
#include <iterator>

#include "capture/monitor/monitor.h"
#include "capture/monitor/state.h"

namespace magpy::capture {

// Native code that reads the contents of an object from outside the call
// (iterating, unpacking) reads what no guard covers.
bool Monitor::breaksOnOpaqueContents(NodeId id, PyObject* obj, const char* doing) {
  if (!externalOpaque(id)) return false;
  graphBreak(std::string(doing) + " a " + Py_TYPE(obj)->tp_name + " object whose contents magpy cannot guard");
  return true;
}

// Which lists an instruction reads the contents of, so that a list the run
// only appended to stays unread (RefGraph::onlyExtended). A call decides at
// the call: a traced callee's instructions read, an annotated one reads
// what its annotation says (beginAnnotatedCall); what native code gets
// back from a callback it called, it reads (leaveFrame).
void Monitor::followListReads(const Pending& p) {
  auto shallow = [&] {
    for (NodeId n : p.inputs)
      if (n >= 0 && refs_.node(n).kind == NodeKind::List) refs_.readContents(n);
  };
  switch (p.ins.op) {
    case Op::STORE_FAST: case Op::STORE_DEREF: case Op::STORE_GLOBAL: case Op::STORE_NAME: case Op::STORE_ATTR:
    case Op::COPY: case Op::SWAP: case Op::POP_TOP: case Op::RETURN_VALUE: case Op::YIELD_VALUE: case Op::PRECALL:
    case Op::BUILD_TUPLE: case Op::BUILD_LIST: case Op::BUILD_CONST_KEY_MAP: case Op::LIST_APPEND: case Op::IS_OP:
    case Op::LOAD_ATTR: case Op::LOAD_METHOD:  // log.append: the call decides
    case Op::POP_JUMP_FORWARD_IF_NONE: case Op::POP_JUMP_FORWARD_IF_NOT_NONE:
    case Op::POP_JUMP_BACKWARD_IF_NONE: case Op::POP_JUMP_BACKWARD_IF_NOT_NONE:
      return;
    case Op::STORE_SUBSCR: {  // value, container, key
      refs_.readContents(p.inputs[1]);
      refs_.readContents(p.inputs[2]);
      // d[k] = log, lst[0] = log: the value moves in; t[:] = log copies
      // its elements, x[0] = log reads them into a tensor.
      NodeKind container = p.inputs[1] >= 0 ? refs_.node(p.inputs[1]).kind : NodeKind::Object;
      bool moves = (container == NodeKind::List || container == NodeKind::Dict) && !PySlice_Check(p.inputObjs[2].get());
      if (!moves) refs_.readContents(p.inputs[0]);
      return;
    }
    case Op::BINARY_SUBSCR: case Op::GET_ITER: case Op::FOR_ITER: case Op::UNPACK_SEQUENCE:
      shallow();  // elements move out; what they hold is read where it is used
      return;
    case Op::CALL_FUNCTION_EX:
      if (p.inputs.size() > 2 && p.inputs[2] >= 0 && refs_.node(p.inputs[2]).kind == NodeKind::List)
        refs_.readContents(p.inputs[2]);  // f(*log) unpacks it
      [[fallthrough]];
    case Op::CALL:
      if (p.inlined || p.autogradForward || p.annotation) return;
      break;
    default:
      break;
  }
  for (NodeId n : p.inputs)
    if (n >= 0) refs_.readContents(n);
}

// d[k] where a defaultdict lacked k: its default_factory made the value
// and the dict keeps it under k. A write the graph's state follows where
// the factory is a builtin container or number type, or Python code the
// monitor traced (`made`: what it returned).
bool Monitor::missingKeyInserted(Step& s, NodeId made) {
  PyObject *container = s.inObj(0), *key = s.inObj(1);
  PyObject* factory = PyObject_GetAttrString(container, "default_factory");
  PyRef held = PyRef::steal(factory);
  if (!factory) PyErr_Clear();
  static PyObject* const kFactories[] = {reinterpret_cast<PyObject*>(&PyDict_Type), reinterpret_cast<PyObject*>(&PyList_Type),
                                         reinterpret_cast<PyObject*>(&PySet_Type), reinterpret_cast<PyObject*>(&PyLong_Type),
                                         reinterpret_cast<PyObject*>(&PyFloat_Type)};
  bool builtin = factory && std::find(std::begin(kFactories), std::end(kFactories), factory) != std::end(kFactories);
  auto k = refs_.dictRelation(key);
  if (!(builtin || made != kNoNode) || !k || refs_.node(s.in(0)).kind != NodeKind::Dict) {
    graphBreak(std::string("d[k] on a ") + Py_TYPE(container)->tp_name + " that lacks k inserts a value " +
               (k ? "its default_factory makes" : "under a key magpy cannot name (an object)") + ", which is not captured");
    return false;
  }
  refs_.read(s.in(0), Relation::attr("default_factory"), factory);
  s.out[0] = made != kNoNode ? made : newNode(s.outObj(0));
  // A dict keyed by objects has no guard on its whole key set: another
  // call whose key is already there would read it instead.
  if (k->kind == Relation::Kind::KeyOf) absent_.push_back({s.in(0), *k});
  refs_.write(s.in(0), *k, s.out[0]);
  return true;
}

// inputs: container, key
bool Monitor::finishBinarySubscr(Step& s) {
  PyObject *container = s.inObj(0), *key = s.inObj(1), *value = s.outObj(0);
  NodeKind kind = refs_.node(s.in(0)).kind;
  NodeId computed = s.p.calleeReturned(value);
  if (s.p.keyAbsent && PyDict_Check(container) && dictHolds(container, key)) {
    return missingKeyInserted(s, computed);  // the factory may be Python the monitor traced
  } else if (computed != kNoNode) {
    s.out[0] = computed;
  } else if ((kind == NodeKind::List || kind == NodeKind::Tuple) && PyLong_CheckExact(key)) {
    Py_ssize_t i = PyLong_AsSsize_t(key);
    if (i < 0) i += PySequence_Size(container);
    s.out[0] = refs_.read(s.in(0), Relation::at(i), value);
  } else if (auto k = kind == NodeKind::Dict ? refs_.dictRelation(key) : std::nullopt) {
    s.out[0] = refs_.read(s.in(0), *k, value);
  } else {
    s.out[0] = operatorResult(s.p, value);
    if (s.out[0] == kNoNode) return false;
    if (sizes_.active() && kind == NodeKind::Tuple && PySlice_Check(key) && PyTuple_Check(value))
      sizes_.slice(s.in(0), key, s.out[0]);
  }
  registerTensor(s.out[0]);
  return true;
}

// inputs: value, container, key
bool Monitor::finishStoreSubscr(Step& s) {
  NodeId container = s.in(1);
  PyObject* key = s.inObj(2);
  NodeKind kind = refs_.node(container).kind;
  if (s.p.calleeResult != kNoNode) return true;  // a traced __setitem__ did the write
  if (kind == NodeKind::Tensor) return true;  // the ATen ops recorded the write
  if (kind == NodeKind::List && PyLong_CheckExact(key)) {
    Py_ssize_t i = PyLong_AsSsize_t(key);
    if (i < 0) i += PyList_GET_SIZE(s.inObj(1));
    refs_.write(container, Relation::at(i), s.in(0));
    return true;
  }
  if (auto k = kind == NodeKind::Dict ? refs_.dictRelation(key) : std::nullopt) {
    refs_.write(container, *k, s.in(0));
    return true;
  }
  if (kind == NodeKind::List || kind == NodeKind::Dict) {
    refs_.changedInPlace(container);
    return true;
  }
  graphBreak(std::string("item assignment on a ") + Py_TYPE(s.inObj(1))->tp_name + " object is not captured");
  return false;
}

// inputs: container, key
bool Monitor::finishDeleteSubscr(Step& s) {
  NodeKind kind = refs_.node(s.in(0)).kind;
  if (s.p.calleeResult != kNoNode) return true;  // a traced __delitem__ did it
  if (kind == NodeKind::List || kind == NodeKind::Dict) {
    refs_.changedInPlace(s.in(0));
    return true;
  }
  graphBreak(std::string("item deletion on a ") + Py_TYPE(s.inObj(0))->tp_name + " object is not captured");
  return false;
}

bool Monitor::finishUnpackSequence(Step& s) {
  if (breaksOnContentLength(s.inObj(0), "unpacking")) return false;
  NodeKind kind = refs_.node(s.in(0)).kind;
  bool followed = kind == NodeKind::Tuple || kind == NodeKind::List;
  size_t n = s.out.size();
  for (size_t k = 0; k < n; ++k) {
    size_t element = n - 1 - k;  // the first element ends on top
    PyObject* v = s.outObj(k);
    s.out[k] = followed ? refs_.read(s.in(0), Relation::at(Py_ssize_t(element)), v) : newNode(v);
    registerTensor(s.out[k]);
  }
  return followed || !breaksOnOpaqueContents(s.in(0), s.inObj(0), "unpacking");
}

bool Monitor::finishUnpackEx(Step& s) {
  if (breaksOnContentLength(s.inObj(0), "unpacking")) return false;
  for (size_t k = 0; k < s.out.size(); ++k) s.out[k] = newNode(s.outObj(k));
  return !breaksOnOpaqueContents(s.in(0), s.inObj(0), "unpacking");
}

// BUILD_TUPLE, BUILD_LIST: the inputs are the elements.
bool Monitor::finishBuildSequence(Step& s) {
  NodeId c = refs_.nodeFor(s.outObj(0));
  auto& refs = refs_.node(c).versions.back().refs;
  for (size_t k = 0; k < refs.size() && k < s.p.inputs.size(); ++k) refs[k].target = s.in(k);
  s.out[0] = c;
  return true;
}

bool Monitor::finishListToTuple(Step& s) {
  NodeId c = refs_.nodeFor(s.outObj(0));
  auto& refs = refs_.node(c).versions.back().refs;
  const auto& from = refs_.node(s.in(0)).last().refs;
  for (size_t k = 0; k < refs.size() && k < from.size(); ++k) refs[k].target = from[k].target;
  s.out[0] = c;
  return true;
}

// BUILD_MAP: key0, value0, key1, ...; BUILD_CONST_KEY_MAP: values..., keys
bool Monitor::finishBuildMap(Step& s) {
  NodeId d = refs_.nodeFor(s.outObj(0));
  if (refs_.node(d).kind == NodeKind::Dict) {
    bool pairs = s.ins().op == Op::BUILD_MAP;
    auto& refs = refs_.node(d).versions.back().refs;
    size_t n = pairs ? s.p.inputs.size() / 2 : s.p.inputs.size() - 1;
    for (size_t k = 0; k < n && k < refs.size(); ++k) refs[k].target = pairs ? s.in(2 * k + 1) : s.in(k);
  }
  s.out[0] = d;
  return true;
}

// The list a comprehension or display appends to sits arg slots below the
// inputs.
bool Monitor::finishListAppend(Step& s) {
  int slot = s.p.base - s.ins().arg;
  Py_ssize_t n = PyList_GET_SIZE(s.frame.view.stack(slot));
  refs_.write(slotNode(s.frame, slot), Relation::at(n - 1), s.in(0));
  return true;
}

bool Monitor::finishListExtend(Step& s) {
  int slot = s.p.base - s.ins().arg;
  NodeId list = slotNode(s.frame, slot);
  NodeKind from = refs_.node(s.in(0)).kind;
  if (from == NodeKind::Tuple || from == NodeKind::List) {
    Py_ssize_t n = PyList_GET_SIZE(s.frame.view.stack(slot));
    const auto items = refs_.node(s.in(0)).last().refs;
    Py_ssize_t start = n - Py_ssize_t(items.size());
    for (size_t k = 0; k < items.size(); ++k) refs_.write(list, Relation::at(start + Py_ssize_t(k)), items[k].target);
    return true;
  }
  if (externalOpaque(s.in(0))) {
    graphBreak(std::string("extending a list from a ") + Py_TYPE(s.inObj(0))->tp_name + " object magpy cannot guard");
    return false;
  }
  refs_.changedInPlace(list);
  return true;
}

// DICT_UPDATE, DICT_MERGE
bool Monitor::finishDictUpdate(Step& s) {
  NodeId dict = slotNode(s.frame, s.p.base - s.ins().arg);
  if (refs_.node(s.in(0)).kind == NodeKind::Dict && refs_.node(dict).kind == NodeKind::Dict) {
    for (auto& e : std::vector<Edge>(refs_.node(s.in(0)).last().refs)) refs_.write(dict, e.rel, e.target);
  } else {
    refs_.changedInPlace(dict);
  }
  return true;
}

// inputs: key, value
bool Monitor::finishMapAdd(Step& s) {
  NodeId dict = slotNode(s.frame, s.p.base - s.ins().arg);
  if (auto k = refs_.node(dict).kind == NodeKind::Dict ? refs_.dictRelation(s.inObj(0)) : std::nullopt)
    refs_.write(dict, *k, s.in(1));
  else
    refs_.changedInPlace(dict);
  return true;
}

}  // namespace magpy::capture

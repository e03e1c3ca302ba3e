// The monitor's per-frame and per-instruction state, shared by the files
// that implement Monitor (one per family of instructions).
#pragma once

#include "capture/monitor/monitor.h"

namespace magpy::capture {

constexpr NodeId kNull = -2;  // a NULL stack slot (PUSH_NULL, LOAD_METHOD's marker)

// Instructions that move a value without reading it (loops.cpp).
bool movesOnly(Op op);

// The instruction a frame is running: taken at its opcode event, finished
// at the frame's next one. Each shadow frame reuses one, so the common
// path allocates nothing per instruction.
struct Monitor::Pending {
  bool active = false;  // from the instruction's opcode event until it is finished
  Instruction ins;
  int line = 0;
  int base = 0;                  // stack depth below the inputs
  std::vector<NodeId> inputs;    // shadows of the input slots, bottom first
  std::vector<PyRef> inputObjs;  // their objects (NULL slots hold nothing)
  std::vector<NodeId> outputs;   // shadows of the values it leaves, bottom first
  bool traceCallees = true;
  bool suppressOps = false;  // the operators this instruction dispatches are not part of the graph
  // A traced callee's return value, for instructions that call Python.
  NodeId calleeResult = kNoNode;
  PyObject* calleeResultObj = nullptr;
  // Calls (CALL, CALL_FUNCTION_EX) and implicit calls into traced code.
  PyRef callable;
  NodeId callableNode = kNoNode;
  NodeId calleeFunction = kNoNode;  // the function whose frame the call runs, when inlined
  std::vector<NodeId> positional;
  std::vector<PyObject*> positionalObjs;
  std::vector<std::pair<std::string, NodeId>> keywords;
  std::vector<PyObject*> keywordObjs;
  std::string calleeName;
  const record::FunctionAnnotation* annotation = nullptr;
  bool inlined = false;
  bool autogradForward = false;  // F.apply(*args): its frame is calleeFunction, F.forward(ctx, *args)
  bool backward = false;         // loss.backward(): Monitor::backward_ holds what it began with
  bool dataParallel = false;     // DistributedDataParallel.forward: Monitor::dataParallel_ holds its module
  bool keyAbsent = false;        // d[k] on a dict subclass (defaultdict) that lacked k
  bool returnsSelf = false;      // t.requires_grad_(flag) that changes nothing: it returns t
  bool dereferences = false;     // ref() of a weakref.ref: its referent
  int itemOf = -1;  // t.item() lifted: the graph value of t (Monitor::liftItem)
  const char* numberCall = nullptr;  // min(n, 512), math.sqrt(d): the graph's number operator for it
  int loopTrip = -1;                 // range(n), n a size: n's graph node (loops.cpp)

  // The traced callee's result when it is `value` (a special method, a
  // property or a generator produced it), else kNoNode.
  NodeId calleeReturned(PyObject* value) const {
    return calleeResult != kNoNode && calleeResultObj == value ? calleeResult : kNoNode;
  }
  // Back to a fresh instruction, releasing its objects; vectors and
  // strings keep their capacity.
  void clear();
};

struct Monitor::ShadowFrame {
  PyFrameObject* frame = nullptr;
  Frame view{nullptr};
  std::vector<NodeId> locals;
  std::vector<NodeId> stack;
  std::vector<PyObject*> stackObjs;
  NodeId globals = kNoNode;
  NodeId function = kNoNode;
  PyObject* kwnames = nullptr;
  PyRef generator;
  Pending pending;
  std::string name;
};

// An instruction being finished, as its handler sees it: the frame, the
// instruction, and the shadows of its outputs for the handler to fill
// (out[k] for the k-th value above the instruction's base, bottom first).
struct Monitor::Step {
  ShadowFrame& frame;
  Pending& p;
  std::vector<NodeId>& out;

  const Instruction& ins() const { return p.ins; }
  NodeId in(size_t k) const { return p.inputs[k]; }
  PyObject* inObj(size_t k) const { return p.inputObjs[k].get(); }
  PyObject* outObj(size_t k) const { return frame.view.stack(p.base + int(k)); }
  // The name the instruction operates on (a global, an attribute).
  PyObject* name() const { return instructionName(frame.view.code(), p.ins); }
};

}  // namespace magpy::capture

// The monitor's per-frame and per-instruction state, shared by the files
// that implement Monitor.
#pragma once

#include "capture/monitor.h"

namespace magpy::capture {

constexpr NodeId kNull = -2;  // a NULL stack slot (PUSH_NULL, LOAD_METHOD's marker)

struct Monitor::Pending {
  Instruction ins;
  int line = 0;
  int base = 0;                  // stack depth below the inputs
  std::vector<NodeId> inputs;    // shadows of the input slots, bottom first
  std::vector<PyRef> inputObjs;  // their objects (NULL slots hold nothing)
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
  std::unique_ptr<Pending> pending;
  std::string file;
  std::string name;
};

}  // namespace magpy::capture

// The trace and profile hooks the monitor installs over the program's:
// CPython 3.11's thread state holds each function and its argument.
#include "capture/python_frame.h"

namespace magpy::capture {

struct BuiltinCallWatchAccess {
  static int event(PyObject* capsule, PyFrameObject* frame, int what, PyObject* arg) {
    auto* watch = static_cast<BuiltinCallWatch*>(PyCapsule_GetPointer(capsule, nullptr));
    if (what == PyTrace_C_CALL) watch->onCall_(arg);
    return watch->before_ ? watch->before_(watch->beforeArg_, frame, what, arg) : 0;
  }
};

BuiltinCallWatch::BuiltinCallWatch(Callback onCall) : onCall_(onCall) {
  PyThreadState* thread = PyThreadState_Get();
  before_ = thread->c_profilefunc;
  beforeArg_ = thread->c_profileobj;
  Py_XINCREF(beforeArg_);
  PyObject* capsule = PyCapsule_New(this, nullptr, nullptr);
  if (!capsule) {
    PyErr_Clear();
    return;  // no watch: nothing installed
  }
  PyEval_SetProfile(&BuiltinCallWatchAccess::event, capsule);
  Py_DECREF(capsule);
}

// A profile function the program set during the call (sys.setprofile
// inside it) stays, as it would eagerly.
BuiltinCallWatch::~BuiltinCallWatch() {
  if (PyThreadState_Get()->c_profilefunc == &BuiltinCallWatchAccess::event) PyEval_SetProfile(before_, beforeArg_);
  Py_XDECREF(beforeArg_);
}

TraceFunctionScope::TraceFunctionScope(Py_tracefunc trace) : trace_(trace) {
  PyThreadState* thread = PyThreadState_Get();
  before_ = thread->c_tracefunc;
  beforeArg_ = thread->c_traceobj;
  Py_XINCREF(beforeArg_);
  PyEval_SetTrace(trace, nullptr);
}

// Likewise a trace function the program set during the call.
TraceFunctionScope::~TraceFunctionScope() {
  if (PyThreadState_Get()->c_tracefunc == trace_) PyEval_SetTrace(before_, beforeArg_);
  Py_XDECREF(beforeArg_);
}

}  // namespace magpy::capture

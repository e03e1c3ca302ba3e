// The trace and profile hooks the monitor installs over the program's:
// CPython 3.11's thread state holds each function and its argument. And
// the warning entry points of the C API, which magpy-capture defines over
// libpython's to see warnings C code gives.
#include <dlfcn.h>

#include "capture/python_frame.h"

namespace {

thread_local magpy::capture::NativeWarningWatch::Callback tOnWarning = nullptr;

// libpython's definition of entry point `name`, the one after ours.
template <typename Function>
Function* libpythons(const char* name) {
  return reinterpret_cast<Function*>(dlsym(RTLD_NEXT, name));
}

int notFound(const char* name) {
  PyErr_Format(PyExc_SystemError, "magpy-capture: libpython's %s was not found", name);
  return -1;
}

}  // namespace

extern "C" int PyErr_WarnEx(PyObject* category, const char* text, Py_ssize_t stackLevel) {
  static auto* const next = libpythons<int(PyObject*, const char*, Py_ssize_t)>("PyErr_WarnEx");
  if (tOnWarning && text) tOnWarning(text);
  return next ? next(category, text, stackLevel) : notFound("PyErr_WarnEx");
}

extern "C" int PyErr_WarnExplicit(PyObject* category, const char* text, const char* file, int line,
                                  const char* module, PyObject* registry) {
  static auto* const next =
      libpythons<int(PyObject*, const char*, const char*, int, const char*, PyObject*)>("PyErr_WarnExplicit");
  if (tOnWarning && text) tOnWarning(text);
  return next ? next(category, text, file, line, module, registry) : notFound("PyErr_WarnExplicit");
}

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

NativeWarningWatch::NativeWarningWatch(Callback onWarning) : before_(tOnWarning) { tOnWarning = onWarning; }

NativeWarningWatch::~NativeWarningWatch() { tOnWarning = before_; }

}  // namespace magpy::capture

// The trace and profile hooks the monitor installs over the program's:
// CPython 3.11's thread state holds each function and its argument.
#include "capture/python_frame.h"

namespace magpy::capture {

TraceFunctionScope::TraceFunctionScope(Py_tracefunc trace) {
  PyThreadState* thread = PyThreadState_Get();
  before_ = thread->c_tracefunc;
  beforeArg_ = thread->c_traceobj;
  Py_XINCREF(beforeArg_);
  PyEval_SetTrace(trace, nullptr);
}

TraceFunctionScope::~TraceFunctionScope() {
  PyEval_SetTrace(before_, beforeArg_);
  Py_XDECREF(beforeArg_);
}

}  // namespace magpy::capture

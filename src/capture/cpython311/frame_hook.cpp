// CPython 3.11's frame evaluation hook (PEP 523). When the hook returns
// without evaluating a frame, the caller (_PyEval_Vector) still clears and
// pops it, so taking a call over needs no private frame functions.
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE

#include "capture/python_frame.h"

namespace magpy::capture {
namespace {

FrameInterceptor* gInterceptor = nullptr;
int gInstalls = 0;

PyObject* evalHook(PyThreadState* tstate, _PyInterpreterFrame* frame, int throwflag) {
  bool fresh = frame->prev_instr == _PyCode_CODE(frame->f_code) - 1;  // not started: a call, not a resume
  if (!gInterceptor || throwflag || !fresh || frame->owner != FRAME_OWNED_BY_THREAD || !frame->f_func)
    return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
  FrameCall call(tstate, frame, tstate->cframe->current_frame);
  return gInterceptor->onCall(call);
}

_PyInterpreterFrame* iframe(void* f) { return static_cast<_PyInterpreterFrame*>(f); }

}  // namespace

PyObject* FrameCall::function() const { return reinterpret_cast<PyObject*>(iframe(frame_)->f_func); }
PyCodeObject* FrameCall::code() const { return iframe(frame_)->f_code; }

PyObject* FrameCall::args() const {
  _PyInterpreterFrame* f = iframe(frame_);
  PyCodeObject* co = f->f_code;
  int n = co->co_argcount;
  PyObject* extra = (co->co_flags & CO_VARARGS) ? f->localsplus[co->co_argcount + co->co_kwonlyargcount] : nullptr;
  Py_ssize_t more = extra && PyTuple_Check(extra) ? PyTuple_GET_SIZE(extra) : 0;
  PyObject* t = PyTuple_New(n + more);
  if (!t) return nullptr;
  for (int i = 0; i < n; ++i) {
    PyObject* v = f->localsplus[i] ? f->localsplus[i] : Py_None;
    Py_INCREF(v);
    PyTuple_SET_ITEM(t, i, v);
  }
  for (Py_ssize_t i = 0; i < more; ++i) {
    PyObject* v = PyTuple_GET_ITEM(extra, i);
    Py_INCREF(v);
    PyTuple_SET_ITEM(t, n + i, v);
  }
  return t;
}

PyObject* FrameCall::kwargs() const {
  _PyInterpreterFrame* f = iframe(frame_);
  PyCodeObject* co = f->f_code;
  int first = co->co_argcount, kwonly = co->co_kwonlyargcount;
  PyObject* extra = nullptr;
  if (co->co_flags & CO_VARKEYWORDS) extra = f->localsplus[first + kwonly + ((co->co_flags & CO_VARARGS) ? 1 : 0)];
  if (kwonly == 0 && (!extra || !PyDict_Check(extra) || PyDict_GET_SIZE(extra) == 0)) return nullptr;
  PyObject* d = PyDict_New();
  if (!d) return nullptr;
  for (int i = first; i < first + kwonly; ++i)
    if (f->localsplus[i]) PyDict_SetItem(d, PyTuple_GET_ITEM(co->co_localsplusnames, i), f->localsplus[i]);
  if (extra && PyDict_Check(extra)) PyDict_Update(d, extra);
  return d;
}

PyObject* FrameCall::run() const {
  return _PyEval_EvalFrameDefault(static_cast<PyThreadState*>(tstate_), iframe(frame_), 0);
}

void installInterceptor(FrameInterceptor* interceptor) {
  gInterceptor = interceptor;
  if (gInstalls++ == 0) _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), evalHook);
}

void removeInterceptor() {
  if (--gInstalls == 0) {
    _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), _PyEval_EvalFrameDefault);
    gInterceptor = nullptr;
  }
}

const void* currentFrameId() {
  PyThreadState* ts = PyThreadState_Get();
  return ts->cframe->current_frame;
}

}  // namespace magpy::capture

// CPython 3.11 frame internals: the interpreter frame's layout and the
// code object's fields.
#define Py_BUILD_CORE 1
#include <Python.h>
#include <frameobject.h>
#include <internal/pycore_code.h>
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE

#include <array>
#include <cstring>

#include "capture/python_frame.h"

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030C0000
#error "capture/cpython311 supports CPython 3.11 only"
#endif

extern "C" unsigned char magpy_py311_deopt(unsigned char opcode);
extern "C" const char* magpy_py311_opcode_name(int opcode);

namespace magpy::capture {
namespace {

// CPython opcode number -> magpy's Op, matched by name once.
Op fromRaw(int opcode) {
  static const std::array<Op, 256> table = [] {
    std::array<Op, 256> t;
    t.fill(Op::UNKNOWN);
    for (int raw = 0; raw < 256; ++raw) {
      const char* name = magpy_py311_opcode_name(raw);
      if (!name) continue;
      for (int op = 0; op < int(Op::UNKNOWN); ++op)
        if (std::strcmp(opName(Op(op)), name) == 0) t[size_t(raw)] = Op(op);
    }
    return t;
  }();
  return table[size_t(opcode & 255)];
}

_PyInterpreterFrame* iframe(PyFrameObject* f) { return f->f_frame; }

}  // namespace

PyCodeObject* Frame::code() const { return iframe(f_)->f_code; }
PyObject* Frame::globals() const { return iframe(f_)->f_globals; }
PyObject* Frame::function() const { return reinterpret_cast<PyObject*>(iframe(f_)->f_func); }

Instruction Frame::current() const {
  _PyInterpreterFrame* fr = iframe(f_);
  _Py_CODEUNIT* first = _PyCode_CODE(fr->f_code);
  _Py_CODEUNIT* at = fr->prev_instr;  // at an opcode event: the instruction about to run
  Instruction ins;
  int arg = 0;
  for (;;) {
    Op op = fromRaw(magpy_py311_deopt(_Py_OPCODE(*at)));
    arg = (arg << 8) | _Py_OPARG(*at);
    if (op != Op::EXTENDED_ARG) {
      ins.op = op;
      break;
    }
    ++at;  // EXTENDED_ARG has no cache entries
  }
  ins.arg = arg;
  ins.offset = int(at - first) * int(sizeof(_Py_CODEUNIT));
  return ins;
}

int Frame::line() const { return PyFrame_GetLineNumber(f_); }

int Frame::stackDepth() const {
  _PyInterpreterFrame* fr = iframe(f_);
  return fr->stacktop - fr->f_code->co_nlocalsplus;
}

PyObject* Frame::stack(int i) const {
  _PyInterpreterFrame* fr = iframe(f_);
  return fr->localsplus[fr->f_code->co_nlocalsplus + i];
}

int Frame::numLocals() const { return code()->co_nlocalsplus; }
PyObject* Frame::local(int i) const { return iframe(f_)->localsplus[i]; }

LocalKind Frame::localKind(int i) const {
  auto kind = _PyLocals_GetKind(code()->co_localspluskinds, i);
  if (kind & CO_FAST_FREE) return LocalKind::Free;
  if (kind & CO_FAST_CELL) return LocalKind::Cell;
  return LocalKind::Plain;
}

void Frame::traceOpcodes(bool on) const {
  f_->f_trace_opcodes = on;
  f_->f_trace_lines = 0;
}

int codeArgCount(PyCodeObject* code) { return code->co_argcount; }
int codeKwOnlyCount(PyCodeObject* code) { return code->co_kwonlyargcount; }
bool codeHasVarArgs(PyCodeObject* code) { return code->co_flags & CO_VARARGS; }
bool codeHasVarKeywords(PyCodeObject* code) { return code->co_flags & CO_VARKEYWORDS; }
bool codeIsGenerator(PyCodeObject* code) {
  return code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR);
}
PyObject* codeLocalName(PyCodeObject* code, int i) { return PyTuple_GET_ITEM(code->co_localsplusnames, i); }
PyObject* codeConst(PyCodeObject* code, int i) { return PyTuple_GET_ITEM(code->co_consts, i); }
PyObject* codeQualname(PyCodeObject* code) { return code->co_qualname; }
PyObject* codeFileName(PyCodeObject* code) { return code->co_filename; }

bool codeDefines(PyCodeObject* outer, PyCodeObject* inner) {
  PyObject* consts = outer->co_consts;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(consts); ++i)
    if (PyTuple_GET_ITEM(consts, i) == reinterpret_cast<PyObject*>(inner)) return true;
  return false;
}

PyObject* frameGenerator(PyFrameObject* frame) {
  PyObject* gen = PyFrame_GetGenerator(frame);
  if (!gen) PyErr_Clear();
  return gen;
}

PyFrameObject* frameBack(PyFrameObject* frame) {
  // The caller of a running frame is its interpreter frame's predecessor;
  // its frame object exists because the tracer asked for it before.
  _PyInterpreterFrame* prev = iframe(frame)->previous;
  while (prev && _PyFrame_IsIncomplete(prev)) prev = prev->previous;
  return prev ? prev->frame_obj : nullptr;
}

}  // namespace magpy::capture

// CPython 3.11 frame internals. This file and opcode_tables.c are the only
// places that know the interpreter's private layout.
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
extern "C" unsigned char magpy_py311_caches(unsigned char opcode);
extern "C" const char* magpy_py311_opcode_name(int opcode);
extern "C" int magpy_py311_first_inplace_binary_op(void);

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

const char* opName(Op op) {
  switch (op) {
#define MAGPY_OP_NAME(name) \
  case Op::name:            \
    return #name;
    MAGPY_OPCODES(MAGPY_OP_NAME)
#undef MAGPY_OP_NAME
    default:
      return "UNKNOWN";
  }
}

bool binaryOpIsInPlace(int arg) { return arg >= magpy_py311_first_inplace_binary_op(); }

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

int stackInputs(const Instruction& ins) {
  const int a = ins.arg;
  switch (ins.op) {
    case Op::POP_TOP:
    case Op::UNARY_POSITIVE:
    case Op::UNARY_NEGATIVE:
    case Op::UNARY_NOT:
    case Op::UNARY_INVERT:
    case Op::GET_LEN:
    case Op::GET_ITER:
    case Op::GET_YIELD_FROM_ITER:
    case Op::LIST_TO_TUPLE:
    case Op::RETURN_VALUE:
    case Op::YIELD_VALUE:
    case Op::UNPACK_SEQUENCE:
    case Op::FOR_ITER:
    case Op::UNPACK_EX:
    case Op::DELETE_ATTR:
    case Op::STORE_GLOBAL:
    case Op::LOAD_ATTR:
    case Op::IMPORT_FROM:
    case Op::JUMP_IF_FALSE_OR_POP:
    case Op::JUMP_IF_TRUE_OR_POP:
    case Op::POP_JUMP_FORWARD_IF_FALSE:
    case Op::POP_JUMP_FORWARD_IF_TRUE:
    case Op::POP_JUMP_FORWARD_IF_NOT_NONE:
    case Op::POP_JUMP_FORWARD_IF_NONE:
    case Op::POP_JUMP_BACKWARD_IF_NOT_NONE:
    case Op::POP_JUMP_BACKWARD_IF_NONE:
    case Op::POP_JUMP_BACKWARD_IF_FALSE:
    case Op::POP_JUMP_BACKWARD_IF_TRUE:
    case Op::STORE_FAST:
    case Op::STORE_DEREF:
    case Op::LOAD_METHOD:
    case Op::LIST_APPEND:
    case Op::SET_ADD:
    case Op::LIST_EXTEND:
    case Op::SET_UPDATE:
    case Op::DICT_MERGE:
    case Op::DICT_UPDATE:
    case Op::BEFORE_WITH:
    case Op::STORE_NAME:
      return 1;
    case Op::BINARY_OP:
    case Op::BINARY_SUBSCR:
    case Op::DELETE_SUBSCR:
    case Op::STORE_ATTR:
    case Op::COMPARE_OP:
    case Op::IS_OP:
    case Op::CONTAINS_OP:
    case Op::IMPORT_NAME:
    case Op::MAP_ADD:
      return 2;
    case Op::STORE_SUBSCR:
      return 3;
    case Op::SWAP:
      return a;
    case Op::BUILD_TUPLE:
    case Op::BUILD_LIST:
    case Op::BUILD_SET:
    case Op::BUILD_STRING:
    case Op::BUILD_SLICE:
      return a;
    case Op::BUILD_MAP:
      return 2 * a;
    case Op::BUILD_CONST_KEY_MAP:
      return a + 1;
    case Op::MAKE_FUNCTION:
      return 1 + ((a & 1) != 0) + ((a & 2) != 0) + ((a & 4) != 0) + ((a & 8) != 0);
    case Op::FORMAT_VALUE:
      return (a & 4) ? 2 : 1;
    case Op::CALL_FUNCTION_EX:
      return 3 + (a & 1);
    case Op::PRECALL:
    case Op::CALL:
      return a + 2;
    default:
      return 0;
  }
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

bool codeDefines(PyCodeObject* outer, PyCodeObject* inner) {
  PyObject* consts = outer->co_consts;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(consts); ++i)
    if (PyTuple_GET_ITEM(consts, i) == reinterpret_cast<PyObject*>(inner)) return true;
  return false;
}

PyObject* instructionName(PyCodeObject* code, const Instruction& ins) {
  int i = ins.op == Op::LOAD_GLOBAL ? ins.arg >> 1 : ins.arg;
  return PyTuple_GET_ITEM(code->co_names, i);
}

bool loadGlobalPushesNull(const Instruction& ins) { return ins.op == Op::LOAD_GLOBAL && (ins.arg & 1); }

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

// CPython 3.11 instruction semantics: opcode names, stack effects, and the
// families of instructions the monitor treats alike. With opcode_list.h and
// opcode_tables.c, the only place that knows 3.11's instruction set.
#include <Python.h>

#include "capture/python_frame.h"

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030C0000
#error "capture/cpython311 supports CPython 3.11 only"
#endif

extern "C" int magpy_py311_first_inplace_binary_op(void);
extern "C" int magpy_py311_number_binary_op(int arg);

namespace magpy::capture {

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

const char* numberBinaryOp(int arg) {
  static const char* kTargets[] = {"operator.add",      "operator.sub",      "operator.mul",
                                   "operator.truediv",  "operator.floordiv", "operator.mod",
                                   "operator.pow"};
  int k = magpy_py311_number_binary_op(arg);
  return k < 0 ? nullptr : kTargets[k];
}

// COMPARE_OP's argument is the rich comparison (Py_LT .. Py_GE, object.h).
const char* numberComparison(int arg, bool held) {
  static const char* kHeld[] = {"operator.lt", "operator.le", "operator.eq", "operator.ne", "operator.gt", "operator.ge"};
  static const char* kFailed[] = {"operator.ge", "operator.gt", "operator.ne", "operator.eq", "operator.le", "operator.lt"};
  if (arg < Py_LT || arg > Py_GE) return nullptr;
  return held ? kHeld[arg] : kFailed[arg];
}

bool mayCallPython(Op op) {
  switch (op) {
    case Op::LOAD_FAST: case Op::STORE_FAST: case Op::DELETE_FAST: case Op::LOAD_CONST: case Op::POP_TOP:
    case Op::PUSH_NULL: case Op::NOP: case Op::COPY: case Op::SWAP: case Op::KW_NAMES: case Op::LOAD_CLOSURE:
    case Op::LOAD_DEREF: case Op::STORE_DEREF: case Op::JUMP_FORWARD: case Op::JUMP_BACKWARD:
    case Op::JUMP_BACKWARD_NO_INTERRUPT: case Op::RETURN_VALUE: case Op::YIELD_VALUE: case Op::LOAD_GLOBAL:
    case Op::IS_OP: case Op::BUILD_TUPLE: case Op::BUILD_LIST: case Op::BUILD_SLICE: case Op::BUILD_STRING:
    case Op::LIST_TO_TUPLE: case Op::LIST_APPEND: case Op::MAKE_FUNCTION: case Op::PRECALL:
    case Op::POP_JUMP_FORWARD_IF_NONE: case Op::POP_JUMP_FORWARD_IF_NOT_NONE:
    case Op::POP_JUMP_BACKWARD_IF_NONE: case Op::POP_JUMP_BACKWARD_IF_NOT_NONE:
      return false;
    default:
      return true;
  }
}

namespace {

// What an instruction tests of its input: nothing, its truth, or, popping
// it and jumping, its truth or its identity with None.
enum class Test { Nothing, Truth, PopJumpOnTruth, PopJumpOnNone };

Test testOf(Op op) {
  switch (op) {
    case Op::POP_JUMP_FORWARD_IF_FALSE: case Op::POP_JUMP_FORWARD_IF_TRUE: case Op::POP_JUMP_BACKWARD_IF_FALSE:
    case Op::POP_JUMP_BACKWARD_IF_TRUE:
      return Test::PopJumpOnTruth;
    case Op::POP_JUMP_FORWARD_IF_NONE: case Op::POP_JUMP_FORWARD_IF_NOT_NONE: case Op::POP_JUMP_BACKWARD_IF_NONE:
    case Op::POP_JUMP_BACKWARD_IF_NOT_NONE:
      return Test::PopJumpOnNone;
    case Op::JUMP_IF_FALSE_OR_POP: case Op::JUMP_IF_TRUE_OR_POP: case Op::UNARY_NOT:
      return Test::Truth;
    default:
      return Test::Nothing;
  }
}

}  // namespace

bool testsTruth(Op op) {
  Test t = testOf(op);
  return t == Test::Truth || t == Test::PopJumpOnTruth;
}

bool popsAndJumps(Op op) {
  Test t = testOf(op);
  return t == Test::PopJumpOnTruth || t == Test::PopJumpOnNone;
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

PyObject* instructionName(PyCodeObject* code, const Instruction& ins) {
  int i = ins.op == Op::LOAD_GLOBAL ? ins.arg >> 1 : ins.arg;
  return PyTuple_GET_ITEM(code->co_names, i);
}

bool loadGlobalPushesNull(const Instruction& ins) { return ins.op == Op::LOAD_GLOBAL && (ins.arg & 1); }

PyObject* keywordNames(PyCodeObject* code, const Instruction& ins) { return PyTuple_GET_ITEM(code->co_consts, ins.arg); }

}  // namespace magpy::capture

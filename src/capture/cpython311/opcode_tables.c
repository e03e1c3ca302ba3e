/* CPython 3.11 keeps its de-quickening table in an internal header that
   only compiles as C and that libpython does not export. This file
   instantiates it once for magpy. */
#define Py_BUILD_CORE 1
#define NEED_OPCODE_TABLES 1
#include <Python.h>
#include <internal/pycore_opcode.h>

#include "capture/cpython311/opcode_list.h"

/* Opcode numbers are macros of opcode.h; magpy's C++ names the same
   instructions by an enum, matched by name here. */
const char* magpy_py311_opcode_name(int opcode) {
  switch (opcode) {
#define MAGPY_OPCODE_NAME(name) \
  case name:                    \
    return #name;
    MAGPY_OPCODES(MAGPY_OPCODE_NAME)
#undef MAGPY_OPCODE_NAME
    default:
      return 0;
  }
}

int magpy_py311_first_inplace_binary_op(void) { return NB_INPLACE_ADD; }

/* BINARY_OP's Python arithmetic a graph can redo on numbers: 0 add, 1
   subtract, 2 multiply, 3 true divide, 4 floor divide, 5 remainder (in place
   or not); -1 other. */
int magpy_py311_number_binary_op(int arg) {
  switch (arg) {
    case NB_ADD: case NB_INPLACE_ADD: return 0;
    case NB_SUBTRACT: case NB_INPLACE_SUBTRACT: return 1;
    case NB_MULTIPLY: case NB_INPLACE_MULTIPLY: return 2;
    case NB_TRUE_DIVIDE: case NB_INPLACE_TRUE_DIVIDE: return 3;
    case NB_FLOOR_DIVIDE: case NB_INPLACE_FLOOR_DIVIDE: return 4;
    case NB_REMAINDER: case NB_INPLACE_REMAINDER: return 5;
    case NB_POWER: case NB_INPLACE_POWER: return 6;
    default: return -1;
  }
}

unsigned char magpy_py311_deopt(unsigned char opcode) { return _PyOpcode_Deopt[opcode]; }

/* Inline cache entries after an instruction (of a de-quickened opcode). */
unsigned char magpy_py311_caches(unsigned char opcode) { return _PyOpcode_Caches[opcode]; }

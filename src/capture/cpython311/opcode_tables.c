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

unsigned char magpy_py311_deopt(unsigned char opcode) { return _PyOpcode_Deopt[opcode]; }

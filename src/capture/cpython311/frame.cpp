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
#include <map>
#include <vector>

#include "capture/python_frame.h"

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030C0000
#error "capture/cpython311 supports CPython 3.11 only"
#endif

extern "C" unsigned char magpy_py311_deopt(unsigned char opcode);
extern "C" unsigned char magpy_py311_caches(unsigned char opcode);
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
PyObject* codeNames(PyCodeObject* code) { return code->co_names; }
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

namespace {

// One decoded instruction of a code object, with where control goes after it.
struct Decoded {
  Instruction ins;
  int next = 0;     // byte offset of the instruction after it (and its caches)
  int target = -1;  // byte offset a jump goes to
  bool fallsThrough = true;
};

Decoded decodeAt(const _Py_CODEUNIT* first, int index) {
  Decoded d;
  int arg = 0;
  const _Py_CODEUNIT* at = first + index;
  for (;;) {
    int raw = magpy_py311_deopt(_Py_OPCODE(*at));
    arg = (arg << 8) | _Py_OPARG(*at);
    d.ins.op = fromRaw(raw);
    if (d.ins.op != Op::EXTENDED_ARG) {
      d.ins.arg = arg;
      d.ins.offset = int(at - first) * int(sizeof(_Py_CODEUNIT));
      d.next = d.ins.offset + (1 + magpy_py311_caches(static_cast<unsigned char>(raw))) * int(sizeof(_Py_CODEUNIT));
      break;
    }
    ++at;
  }
  int delta = d.ins.arg * int(sizeof(_Py_CODEUNIT));
  switch (d.ins.op) {
    case Op::JUMP_FORWARD: d.fallsThrough = false; [[fallthrough]];
    case Op::POP_JUMP_FORWARD_IF_TRUE: case Op::POP_JUMP_FORWARD_IF_FALSE: case Op::POP_JUMP_FORWARD_IF_NONE:
    case Op::POP_JUMP_FORWARD_IF_NOT_NONE: case Op::JUMP_IF_TRUE_OR_POP: case Op::JUMP_IF_FALSE_OR_POP:
    case Op::FOR_ITER: case Op::SEND:
      d.target = d.next + delta;
      break;
    case Op::JUMP_BACKWARD: case Op::JUMP_BACKWARD_NO_INTERRUPT: d.fallsThrough = false; [[fallthrough]];
    case Op::POP_JUMP_BACKWARD_IF_TRUE: case Op::POP_JUMP_BACKWARD_IF_FALSE: case Op::POP_JUMP_BACKWARD_IF_NONE:
    case Op::POP_JUMP_BACKWARD_IF_NOT_NONE:
      d.target = d.next - delta;
      break;
    case Op::RETURN_VALUE: case Op::RAISE_VARARGS: case Op::RERAISE:
      d.fallsThrough = false;
      break;
    default:
      break;
  }
  return d;
}

// Per instruction of `code`: its immediate post-dominator's offset, -1
// where only the code's exit post-dominates it (exception edges aside).
std::map<int, int> postDominators(PyCodeObject* code) {
  const _Py_CODEUNIT* first = _PyCode_CODE(code);
  int units = int(Py_SIZE(code));
  std::vector<Decoded> ins;
  std::map<int, size_t> at;  // offset -> index
  for (int k = 0; k < units;) {
    Decoded d = decodeAt(first, k);
    at[d.ins.offset] = ins.size();
    k = d.next / int(sizeof(_Py_CODEUNIT));
    ins.push_back(d);
  }
  size_t n = ins.size(), exit = n;
  std::vector<std::vector<size_t>> succ(n);
  for (size_t i = 0; i < n; ++i) {
    if (ins[i].fallsThrough) succ[i].push_back(i + 1 < n ? i + 1 : exit);
    if (ins[i].target >= 0) succ[i].push_back(at.count(ins[i].target) ? at[ins[i].target] : exit);
    if (succ[i].empty()) succ[i].push_back(exit);
  }
  // pdom sets as bit vectors, shrunk to their fixed point from "all".
  size_t words = (n + 1 + 63) / 64;
  std::vector<std::vector<uint64_t>> pdom(n + 1, std::vector<uint64_t>(words, ~uint64_t(0)));
  pdom[exit].assign(words, 0);
  pdom[exit][exit / 64] |= uint64_t(1) << (exit % 64);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = n; i-- > 0;) {
      std::vector<uint64_t> meet(words, ~uint64_t(0));
      for (size_t s : succ[i])
        for (size_t w = 0; w < words; ++w) meet[w] &= pdom[s][w];
      meet[i / 64] |= uint64_t(1) << (i % 64);
      if (meet != pdom[i]) pdom[i] = std::move(meet), changed = true;
    }
  }
  // Post-dominators form a chain: the immediate one has one fewer.
  std::vector<size_t> count(n + 1, 0);
  for (size_t i = 0; i <= n; ++i)
    for (uint64_t w : pdom[i]) count[i] += size_t(__builtin_popcountll(w));
  std::map<int, int> out;
  for (size_t i = 0; i < n; ++i) {
    int found = -1;
    for (size_t d = 0; d < n && found < 0; ++d)
      if (d != i && (pdom[i][d / 64] >> (d % 64) & 1) && count[d] + 1 == count[i]) found = ins[d].ins.offset;
    out[ins[i].ins.offset] = found;
  }
  return out;
}

}  // namespace

int branchRejoin(PyCodeObject* code, int offset) {
  static std::map<PyCodeObject*, std::pair<PyObject*, std::map<int, int>>> cache;  // code -> (held, post-dominators)
  auto it = cache.find(code);
  if (it == cache.end()) {
    Py_INCREF(code);  // held: its address is not reused for other code
    it = cache.emplace(code, std::make_pair(reinterpret_cast<PyObject*>(code), postDominators(code))).first;
  }
  auto found = it->second.second.find(offset);
  return found == it->second.second.end() ? -1 : found->second;
}

}  // namespace magpy::capture

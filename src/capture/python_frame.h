// A version-neutral view of a running Python frame, its bytecode and the
// object internals capture reads.
//
// Everything that depends on the CPython version (frame layout, the opcode
// set and numbers, quickening, stack effects, which instructions behave
// alike, private API) is implemented in cpython311/; the rest of capture
// sees only this header.
#pragma once

#include <Python.h>

#include <vector>

#include <cstdint>

#include "capture/cpython311/opcode_list.h"

namespace magpy::capture {

enum class Op : uint8_t {
#define MAGPY_OP_ENUM(name) name,
  MAGPY_OPCODES(MAGPY_OP_ENUM)
#undef MAGPY_OP_ENUM
  UNKNOWN
};

const char* opName(Op op);

struct Instruction {
  Op op = Op::UNKNOWN;
  int arg = 0;     // oparg, with EXTENDED_ARG prefixes applied
  int offset = 0;  // byte offset of the instruction (after prefixes)
};

// Sub-operations of BINARY_OP's argument, in CPython's numbering.
bool binaryOpIsInPlace(int arg);     // "+=" and friends
// The graph's number operator (record::isNumberOp) for BINARY_OP's +, -, *,
// /, //, % (and their in-place forms); null for the others.
const char* numberBinaryOp(int arg);
// The comparison (operator.lt ...) COMPARE_OP's argument makes that held,
// or its opposite where it did not hold (`a < b` false: operator.ge).
const char* numberComparison(int arg, bool held);

// Families of instructions.
// Instructions during which Python code may legitimately run (special
// methods, properties, iterators, callees). Frames that start during other
// instructions are finalizers or weakref callbacks: not part of the program.
bool mayCallPython(Op op);
// Instructions that decide control flow by their input's truth.
bool testsTruth(Op op);
// Conditional jumps that pop the value they test and push nothing.
bool popsAndJumps(Op op);

// Kinds of the slots in a frame's locals array.
enum class LocalKind : uint8_t { Plain, Cell, Free };

class Frame {
 public:
  explicit Frame(PyFrameObject* f) : f_(f) {}
  PyFrameObject* raw() const { return f_; }

  PyCodeObject* code() const;
  PyObject* globals() const;
  PyObject* function() const;  // the function being run (borrowed; may be null)

  // At an opcode event: the instruction about to run.
  Instruction current() const;
  int line() const;

  int stackDepth() const;          // values above the locals
  PyObject* stack(int i) const;    // 0 = bottom; may be NULL (PUSH_NULL)
  int numLocals() const;           // locals + cells + free variables
  PyObject* local(int i) const;    // may be NULL (unbound)
  LocalKind localKind(int i) const;

  // Opcode events on, line events off: we want every instruction, once.
  void traceOpcodes(bool on) const;

 private:
  PyFrameObject* f_;
};

// Stack values an instruction consumes (its inputs, on top of the stack at
// its opcode event). Its outputs are what sits above the remaining values
// at the next event.
int stackInputs(const Instruction& ins);

// Where the two ways a conditional jump at `offset` may go meet again: the
// offset of its immediate post-dominator in the code's control flow
// (exception edges aside), or -1 where they meet only once the code has
// returned or raised.
int branchRejoin(PyCodeObject* code, int offset);

// Layout facts of a code object that the bytecode compiler fixes.
int codeArgCount(PyCodeObject* code);      // positional (incl. positional-only)
int codeKwOnlyCount(PyCodeObject* code);
bool codeHasVarArgs(PyCodeObject* code);
bool codeHasVarKeywords(PyCodeObject* code);
bool codeIsGenerator(PyCodeObject* code);  // generator, coroutine or async generator
PyObject* codeLocalName(PyCodeObject* code, int i);  // borrowed str
PyObject* codeConst(PyCodeObject* code, int i);      // borrowed
PyObject* codeNames(PyCodeObject* code);             // borrowed tuple: the global and attribute names it loads
bool codeDefines(PyCodeObject* outer, PyCodeObject* inner);  // inner is a constant of outer (a nested def, a lambda)
PyObject* codeQualname(PyCodeObject* code);          // borrowed str
PyObject* codeFileName(PyCodeObject* code);          // borrowed str

// The name an instruction operates on (LOAD_GLOBAL, LOAD_ATTR, LOAD_METHOD,
// STORE_ATTR, DELETE_ATTR, STORE_GLOBAL, DELETE_GLOBAL, IMPORT_NAME,
// IMPORT_FROM); borrowed str.
PyObject* instructionName(PyCodeObject* code, const Instruction& ins);
// LOAD_GLOBAL also pushes a NULL before the value (for a call that follows).
bool loadGlobalPushesNull(const Instruction& ins);
// The keyword names (a tuple of str, borrowed) a KW_NAMES instruction hands
// to the CALL that follows it.
PyObject* keywordNames(PyCodeObject* code, const Instruction& ins);

// The generator a frame belongs to (new reference), or null.
PyObject* frameGenerator(PyFrameObject* frame);
// The frame that called this one (borrowed; valid while both run), or null.
PyFrameObject* frameBack(PyFrameObject* frame);

// Object internals.
// getattr(o, name) as a new reference, or null where it fails. Where the
// type's lookup is CPython's own, a missing attribute makes no
// AttributeError (making one costs more than the lookup).
PyObject* attrOrNull(PyObject* o, const char* name);
// What `type` finds for `name` along its MRO, without running descriptors
// (borrowed; null when nothing).
PyObject* classLookup(PyTypeObject* type, PyObject* name);
// A name under which `type` finds `value` along its MRO (borrowed str;
// null when none): a function stored on a class under another name.
PyObject* classNameOf(PyTypeObject* type, PyObject* value);
// A tag that changes whenever `type` or a class on its MRO is changed (an
// attribute set or deleted, __bases__ reassigned): CPython's method-cache
// version tag, assigned here if the type has none yet. 0 when CPython
// cannot give it one; 0 never matches a later reading.
unsigned classVersion(PyTypeObject* type);
// Whether the tag read earlier still holds (no allocation, no lookup).
bool classUnchanged(PyTypeObject* type, unsigned version);
// What a class finds along its MRO: each class on it, then its dict's keys
// and values (borrowed), without caches CPython's own library writes into
// classes (copyreg's __slotnames__, written when an instance is copied or
// pickled), which change a class's tag but nothing it finds. For a class
// of Python code also what type's descriptors read outside the dict
// (__name__, __qualname__, __bases__, __class__), which setting changes.
void classContents(PyTypeObject* type, std::vector<PyObject*>& out);
// A Python function's __name__ and __qualname__ (borrowed str): what
// getattr gives (functions cannot be subclassed, their type's descriptors
// read these fields).
PyObject* functionName(PyObject* function);
PyObject* functionQualname(PyObject* function);
// The object's instance __dict__ (borrowed; null when it has none or it
// was never made).
PyObject* instanceDict(PyObject* obj);

// Intercepting calls of Python functions (PEP 523's frame evaluation hook).
// While a FrameInterceptor is installed, every Python function frame about
// to start (not generators resuming) is offered to it; it either runs the
// frame (FrameCall::run) or returns a result without running it.
class FrameCall {
 public:
  PyObject* function() const;  // borrowed; null for frames without one
  PyCodeObject* code() const;
  const void* id() const { return frame_; }      // this frame, while it runs
  const void* caller() const { return caller_; } // the frame that called it
  // The arguments as the frame holds them: positional parameters then any
  // extra positional ones (*args) as a tuple; keyword-only parameters then
  // any extra keywords (**kwargs) as a dict, or null when there are none.
  PyObject* args() const;    // new reference
  PyObject* kwargs() const;  // new reference or null
  PyObject* run() const;     // evaluates the frame as CPython would

  FrameCall(void* tstate, void* frame, void* caller) : tstate_(tstate), frame_(frame), caller_(caller) {}

 private:
  void* tstate_;
  void* frame_;
  void* caller_;
};

class FrameInterceptor {
 public:
  virtual ~FrameInterceptor() = default;
  // A result (new reference), or null with the Python error set.
  virtual PyObject* onCall(const FrameCall& call) = 0;
};

// Nested installs count: the hook goes when the last one is removed, so
// Python-to-Python calls are inlined again by the interpreter.
void installInterceptor(FrameInterceptor* interceptor);
void removeInterceptor();
// The frame currently running on this thread (null outside Python code).
const void* currentFrameId();

// While one lives, `trace` is the thread's trace function; the one before
// (sys.settrace's: a debugger, coverage) sees none of its events and is
// back when it goes, unless the program set another meanwhile.
class TraceFunctionScope {
 public:
  explicit TraceFunctionScope(Py_tracefunc trace);
  ~TraceFunctionScope();
  TraceFunctionScope(const TraceFunctionScope&) = delete;
  TraceFunctionScope& operator=(const TraceFunctionScope&) = delete;

 private:
  Py_tracefunc trace_;
  Py_tracefunc before_ = nullptr;
  PyObject* beforeArg_ = nullptr;  // a reference held while the scope lives
};

// While one lives, `onCall(callable)` runs for each builtin function that
// Python code calls on this thread (the profile hook's C-call event), also
// inside frames the monitor does not trace. A profile function installed
// before (sys.setprofile, cProfile, an enclosing watch) keeps receiving
// every event, and is back when the watch goes.
class BuiltinCallWatch {
 public:
  using Callback = void (*)(PyObject* callable);
  explicit BuiltinCallWatch(Callback onCall);
  ~BuiltinCallWatch();
  BuiltinCallWatch(const BuiltinCallWatch&) = delete;
  BuiltinCallWatch& operator=(const BuiltinCallWatch&) = delete;

 private:
  friend struct BuiltinCallWatchAccess;
  Callback onCall_;
  Py_tracefunc before_ = nullptr;
  PyObject* beforeArg_ = nullptr;  // a reference held while the watch lives
};

// While one lives, `onWarning(text)` runs for each warning C code gives
// Python on this thread through PyErr_WarnEx or PyErr_WarnExplicit (torch's
// bindings: a kernel's TORCH_WARN, torch.tensor(tensor)'s copy warning),
// before the warning filters apply. magpy-capture defines both entry points
// over libpython's and exports them (warning_entry_points.list), so calls
// from extension modules reach them first.
class NativeWarningWatch {
 public:
  using Callback = void (*)(const char* text);
  explicit NativeWarningWatch(Callback onWarning);
  ~NativeWarningWatch();
  NativeWarningWatch(const NativeWarningWatch&) = delete;
  NativeWarningWatch& operator=(const NativeWarningWatch&) = delete;

 private:
  Callback before_;
};

}  // namespace magpy::capture

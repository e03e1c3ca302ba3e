// The JIT as Python sees it: the builtin module `magpy` and the
// CompiledFunction objects magpy.compile returns, whose calls go to the
// current Session (jit.h).
#pragma once

#include <Python.h>

#include <cstddef>

namespace magpy::capture {

bool isCompiled(PyObject* o);
PyObject* compiledTarget(PyObject* o);  // borrowed

// A CompiledFunction for the session's unit `index` (new reference).
PyObject* newCompiledFunction(size_t index, PyObject* target);

// The builtin module `magpy` (registered before the interpreter starts).
PyObject* initMagpyModule();

}  // namespace magpy::capture

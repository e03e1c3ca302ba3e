// The capture-time JIT (MagPy paper, section 2.2): magpy.compile(f) returns
// a callable whose calls run the first record whose guards hold (the graph
// natively, then the mock) or, when none does, a monitored run that adds a
// record. The session keeps every compiled function's records, the state
// they read and a log of calls, and turns them into a RecordFile.
#pragma once

#include <Python.h>

#include <memory>
#include <string>
#include <vector>

#include "magpy/capture/capture.h"
#include "magpy/record/annotations.h"
#include "magpy/record/record.h"
#include "magpy/record/report.h"

namespace magpy::capture {

bool isCompiled(PyObject* o);
PyObject* compiledTarget(PyObject* o);  // borrowed

class Session {
 public:
  explicit Session(const Options& options);
  ~Session();

  // The session of this process (set while a script runs).
  static Session* current();
  void activate();
  // Clears the progress line (Options::progress) once the script is done.
  void endProgress();

  PyObject* compile(PyObject* target);  // new reference, or null with a Python error
  PyObject* call(size_t function, PyObject* args, PyObject* kwargs);
  PyObject* stats(size_t function);

  // With stateAtExit, `self` as the script leaves it and no call log.
  record::RecordFile recordFile(bool stateAtExit = false);
  std::string summary() const;
  // How every function's calls ran, for the coverage report.
  std::vector<record::CallCounts> callCounts() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The builtin module `magpy` (registered before the interpreter starts).
PyObject* initMagpyModule();

}  // namespace magpy::capture

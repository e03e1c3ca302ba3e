// The capture-time JIT (MagPy paper, section 2.2): magpy.compile(f) returns
// a callable (compiled_function.h) whose calls the session dispatches: the
// first record whose guards hold runs (the graph natively, then the mock)
// or, when none does, a monitored run adds a record. The session keeps
// every unit's records (units.h), the state they read, the call log
// (call_log.h) and segments (segments.h), and turns them into a RecordFile.
#pragma once

#include <Python.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "magpy/capture/capture.h"
#include "magpy/record/annotations.h"
#include "magpy/record/record.h"
#include "magpy/record/report.h"

namespace magpy::capture {

class Session {
 public:
  explicit Session(const Options& options);
  ~Session();

  // The session of this process (set while a script runs).
  static Session* current();
  void activate();
  // Clears the progress line (Options::progress) once the script is done.
  void endProgress();

  // New reference, or null with a Python error. dynamic: whether records
  // whose argument sizes change become dynamic (default: --dynamic).
  // backend: "aten", "compiled" or "auto" (default: --backend); freezeState
  // (default: --freeze-state), as capture::Options says.
  PyObject* compile(PyObject* target, std::optional<bool> dynamic = std::nullopt,
                    const std::optional<std::string>& backend = std::nullopt, std::optional<bool> freezeState = std::nullopt);
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

}  // namespace magpy::capture

// Segments (MagPy paper, section 6.3): a record with graph breaks runs as
// Python, and each Python function its frames call is a unit of its own,
// keyed by its code, with records of its own. A PEP 523 frame hook
// (python_frame.h) offers those calls to the JIT's dispatch.
#pragma once

#include <Python.h>

#include <functional>
#include <map>
#include <set>
#include <vector>

#include "capture/python_frame.h"
#include "capture/units.h"
#include "magpy/record/annotations.h"

namespace magpy::capture {

class Segments : public FrameInterceptor {
 public:
  // Runs one call of a unit: its records, or a monitored run.
  using Dispatch = std::function<PyObject*(size_t unit, Invocation& inv)>;

  Segments(Units& units, const record::AnnotationSet& annotations, Dispatch dispatch)
      : units_(units), annotations_(annotations), dispatch_(std::move(dispatch)) {}

  // Runs `call` (unit `index`'s Python, called from the running frame) with
  // the Python functions it calls compiled as segments.
  PyObject* runEager(size_t index, const std::function<PyObject*()>& call);

  // A unit was inserted at `index`: later units moved up by one.
  void unitInserted(size_t index);

  PyObject* onCall(const FrameCall& call) override;

 private:
  PyObject* intercept(const FrameCall& call);
  PyObject* runEagerFrame(const FrameCall& call);
  size_t unitFor(PyObject* function, PyCodeObject* code);

  Units& units_;
  const record::AnnotationSet& annotations_;
  Dispatch dispatch_;
  std::map<PyCodeObject*, size_t> byCode_;
  std::vector<PyRef> codes_;  // the code objects byCode_ is keyed by, kept alive
  // Frames running as Python past a graph break: the calls they make are
  // segments. The first frame of an eager top-level call is found by its caller.
  std::set<const void*> eagerFrames_;
  const void* eagerRootCaller_ = nullptr;
  size_t activeUnit_ = SIZE_MAX;
};

}  // namespace magpy::capture

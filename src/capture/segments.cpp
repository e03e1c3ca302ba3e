#include "capture/segments.h"

namespace magpy::capture {

PyObject* Segments::runEager(size_t index, const std::function<PyObject*()>& call) {
  // Its first Python frame is called from the frame running now.
  size_t outer = activeUnit_;
  activeUnit_ = index;
  eagerRootCaller_ = currentFrameId();
  installInterceptor(this);
  PyObject* result = call();
  removeInterceptor();
  eagerRootCaller_ = nullptr;
  activeUnit_ = outer;
  return result;
}

void Segments::unitInserted(size_t index) {
  for (auto& [code, unit] : byCode_)
    if (unit >= index) ++unit;
  if (activeUnit_ != SIZE_MAX && activeUnit_ >= index) ++activeUnit_;
}

size_t Segments::unitFor(PyObject* function, PyCodeObject* code) {
  auto it = byCode_.find(code);
  if (it != byCode_.end()) return it->second;
  auto unit = std::make_unique<Unit>();
  unit->name = "segment " + qualifiedName(function) + " (in " + units_[activeUnit_]->name + ")";
  unit->parent = activeUnit_;
  unit->backend = units_[activeUnit_]->backend;
  unit->compileAfter = units_[activeUnit_]->compileAfter;
  unit->freezeState = units_[activeUnit_]->freezeState;
  unit->spec.homeModule = utf8(PyFunction_GET_MODULE(function));
  units_.push_back(std::move(unit));
  codes_.push_back(PyRef::borrow(reinterpret_cast<PyObject*>(code)));
  return byCode_.emplace(code, units_.size() - 1).first->second;
}

PyObject* Segments::onCall(const FrameCall& call) {
  // Frames started by magpy's own lookups while it works are not the
  // program's (monitoringDepth counts both).
  if (monitoringDepth() > 0) return call.run();  // traced by the monitored run
  return enteredFromPython(PythonEntry::FrameHook, [&] { return intercept(call); });
}

PyObject* Segments::intercept(const FrameCall& call) {
  if (eagerRootCaller_ && call.caller() == eagerRootCaller_) {
    eagerRootCaller_ = nullptr;
    return runEagerFrame(call);
  }
  if (!eagerFrames_.count(call.caller())) return call.run();
  PyObject* function = call.function();
  if (!function || annotations_.find(qualifiedName(function))) return call.run();

  size_t index = unitFor(function, call.code());
  Unit& unit = *units_[index];
  unit.target = PyRef::borrow(function);
  unit.spec.self = function;
  unit.spec.function = function;
  PyRef args = PyRef::steal(call.args());
  PyRef kwargs = PyRef::steal(call.kwargs());
  if (!args) return nullptr;
  Invocation inv;
  inv.roots = LiveRoots{function, args.get(), kwargs.get(), unit.spec.homeModule};
  inv.run = [&] { return call.run(); };
  inv.runEager = [&] { return runEagerFrame(call); };
  return dispatch_(index, inv);
}

PyObject* Segments::runEagerFrame(const FrameCall& call) {
  eagerFrames_.insert(call.id());
  PyObject* result = call.run();
  eagerFrames_.erase(call.id());
  return result;
}

}  // namespace magpy::capture

// Where replayed calls spend their time, per operator (as torch.profiler's
// key_averages): every top-level operator the calls dispatch while a
// profile is alive on this thread, on either backend. Nested operators
// (the ones an operator calls) count in their caller's time.
//
//   magpy::replay::OperatorProfile profile;
//   for (...) session.call(f, args);
//   std::cout << profile.report(calls, seconds);
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace magpy::replay {

struct OperatorTime {
  std::string name;  // "aten::addmm", "prim::mkldnn_convolution"
  size_t count = 0;
  double seconds = 0;
};

class OperatorProfile {
 public:
  OperatorProfile();  // starts observing this thread
  ~OperatorProfile();
  OperatorProfile(const OperatorProfile&) = delete;
  OperatorProfile& operator=(const OperatorProfile&) = delete;

  // Operators by total time, largest first.
  std::vector<OperatorTime> operators() const;
  double operatorSeconds() const;  // the sum over operators

  // A table for people: per operator count, total, time per call, share of
  // the calls' time; then what the calls spent outside operators.
  std::string report(size_t calls, double callSeconds) const;

 private:
  uint64_t handle_ = 0;
};

}  // namespace magpy::replay

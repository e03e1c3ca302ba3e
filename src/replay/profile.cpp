#include "magpy/replay/profile.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include "magpy/support/error.h"

namespace magpy::replay {
namespace {

using Clock = std::chrono::steady_clock;

// The one profile observing this thread, and how deep in operators it is.
struct ThreadProfile {
  std::map<std::string, OperatorTime> byName;
  int depth = 0;
  bool active = false;
};
thread_local ThreadProfile tProfile;

struct Started : at::ObserverContext {
  Clock::time_point at;
  bool topLevel = false;
};

std::unique_ptr<at::ObserverContext> onStart(const at::RecordFunction&) {
  auto started = std::make_unique<Started>();
  started->topLevel = tProfile.depth++ == 0;
  started->at = Clock::now();
  return started;
}

void onEnd(const at::RecordFunction& fn, at::ObserverContext* context) {
  --tProfile.depth;
  auto* started = static_cast<Started*>(context);
  if (!started || !started->topLevel) return;
  double seconds = std::chrono::duration<double>(Clock::now() - started->at).count();
  OperatorTime& t = tProfile.byName[fn.name()];
  ++t.count;
  t.seconds += seconds;
}

}  // namespace

OperatorProfile::OperatorProfile() {
  if (tProfile.active) throw Error("a profile is already observing this thread");
  tProfile = ThreadProfile{};
  tProfile.active = true;
  handle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(onStart, onEnd).scopes({at::RecordScope::FUNCTION}));
}

OperatorProfile::~OperatorProfile() {
  at::removeCallback(handle_);
  tProfile = ThreadProfile{};
}

std::vector<OperatorTime> OperatorProfile::operators() const {
  std::vector<OperatorTime> out;
  for (auto& [name, t] : tProfile.byName) {
    out.push_back(t);
    out.back().name = name;
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.seconds != b.seconds ? a.seconds > b.seconds : a.name < b.name; });
  return out;
}

double OperatorProfile::operatorSeconds() const {
  double total = 0;
  for (auto& [name, t] : tProfile.byName) total += t.seconds;
  return total;
}

std::string OperatorProfile::report(size_t calls, double callSeconds) const {
  double n = double(std::max<size_t>(calls, 1)), perCall = callSeconds / n * 1e6, ops = operatorSeconds() / n * 1e6;
  char line[256];
  std::string out;
  std::snprintf(line, sizeof line, "  %-40s %8s %12s %12s %7s\n", "operator", "calls", "total (ms)", "per call (us)", "share");
  out += line;
  for (const OperatorTime& t : operators()) {
    std::snprintf(line, sizeof line, "  %-40s %8zu %12.3f %12.2f %6.1f%%\n", t.name.c_str(), t.count, t.seconds * 1e3,
                  t.seconds / n * 1e6, callSeconds > 0 ? 100 * t.seconds / callSeconds : 0.0);
    out += line;
  }
  std::snprintf(line, sizeof line,
                "  per call: %.2f us, of which operators %.2f us (%.1f%%); outside them (guards, boxing, allocation, "
                "mock) %.2f us\n",
                perCall, ops, perCall > 0 ? 100 * ops / perCall : 0.0, perCall - ops);
  out += line;
  return out;
}

}  // namespace magpy::replay

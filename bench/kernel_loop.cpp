// Replay's own cost per call, against a loop of the same kernels: the
// operators a replayed call runs, each called alone through the dispatcher
// with the arguments it had, as nothing but a loop of them would.
//
//   magpy-bench-kernels record.mgp [calls] [threads]
//
// Uses the public Session API on the record's first logged call: times
// Session::call (guards, the graph, the mock, as magpy-run --repeat does),
// then replays the call once under an observer that keeps each top-level
// operator and its arguments, and times each operator alone, `calls` times,
// on those arguments (a kernel that writes its input writes it again; the
// time is what counts). Prints per operator and the totals; the difference
// is what replay adds around the kernels (slots, boxing, allocation
// tracking, guards, mock).
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "magpy/replay/session.h"

namespace {

using Clock = std::chrono::steady_clock;

struct SeenOperator {
  c10::OperatorName name;
  std::vector<c10::IValue> inputs;
};

std::vector<SeenOperator> gSeen;
int gDepth = 0;

std::unique_ptr<at::ObserverContext> onStart(const at::RecordFunction& fn) {
  if (gDepth++ == 0 && fn.operator_name()) {
    auto in = fn.inputs();
    gSeen.push_back({*fn.operator_name(), std::vector<c10::IValue>(in.begin(), in.end())});
  }
  return nullptr;
}

void onEnd(const at::RecordFunction&, at::ObserverContext*) { --gDepth; }

template <typename F>
double medianMicros(int calls, F&& f) {
  std::vector<double> us;
  for (int round = 0; round < 7; ++round) {
    auto t0 = Clock::now();
    for (int k = 0; k < calls; ++k) f();
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / calls);
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: magpy-bench-kernels record.mgp [calls] [threads]\n";
    return 2;
  }
  int calls = argc > 2 ? std::atoi(argv[2]) : 2000;
  at::set_num_threads(argc > 3 ? std::atoi(argv[3]) : 1);
  try {
    magpy::replay::Session session = magpy::replay::Session::open(argv[1]);
    if (session.file().calls.empty()) throw std::runtime_error("the record logged no call");
    size_t function = session.file().calls[0].function;
    auto args = session.loggedArgs(0);
    auto kwargs = session.loggedKwargs(0);
    session.call(function, args, kwargs);  // warm: compiles, folds, allocates
    double replayUs = medianMicros(calls, [&] { session.call(function, args, kwargs); });

    auto handle = at::addThreadLocalCallback(
        at::RecordFunctionCallback(onStart, onEnd).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
    session.call(function, args, kwargs);
    at::removeCallback(handle);

    std::printf("%-36s %14s\n", "operator (alone, through the dispatcher)", "us per call");
    double kernelsUs = 0;
    c10::AutoGradMode grad(false);  // replay runs these under no_grad unless the record says otherwise
    for (const SeenOperator& seen : gSeen) {
      c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(seen.name.name.c_str(),
                                                                             seen.name.overload_name.c_str());
      torch::jit::Stack stack;
      double us = medianMicros(calls, [&] {
        stack.assign(seen.inputs.begin(), seen.inputs.end());
        op.callBoxed(stack);
      });
      kernelsUs += us;
      std::string name = seen.name.name + (seen.name.overload_name.empty() ? "" : "." + seen.name.overload_name);
      std::printf("%-36s %14.2f\n", name.c_str(), us);
    }
    std::printf("%zu operators alone: %.2f us; the replayed call: %.2f us; replay's own cost: %.2f us per call "
                "(%.2f us per operator)\n",
                gSeen.size(), kernelsUs, replayUs, replayUs - kernelsUs,
                gSeen.empty() ? 0.0 : (replayUs - kernelsUs) / double(gSeen.size()));
  } catch (const std::exception& e) {
    std::cerr << "magpy-bench-kernels: " << e.what() << "\n";
    return 2;
  }
  return 0;
}

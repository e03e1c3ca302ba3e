// Time of a full guard check per call in native replay: every record's
// guards, state guards included (as after a call that changed state).
//
//   magpy-bench-guards record.mgp [calls]
//
// Uses only the public Session API: for each function with a logged call,
// it marks the state changed (Session::self) and asks which records accept
// the call (Session::explain), `calls` times; prints the median.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iomanip>
#include <iostream>

#include "magpy/replay/session.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: magpy-bench-guards record.mgp [calls]\n";
    return 2;
  }
  int calls = argc > 2 ? std::atoi(argv[2]) : 200;
  try {
    magpy::replay::Session session = magpy::replay::Session::open(argv[1]);
    const auto& file = session.file();
    for (size_t f = 0; f < file.functions.size(); ++f) {
      auto call = std::find_if(file.calls.begin(), file.calls.end(), [&](auto& c) { return c.function == f; });
      if (call == file.calls.end()) continue;
      size_t index = size_t(call - file.calls.begin());
      auto args = session.loggedArgs(index);
      auto kwargs = session.loggedKwargs(index);
      size_t guards = 0;
      for (auto& r : file.functions[f].records) guards += r.guards.size();
      std::vector<double> us;
      for (int k = 0; k < calls; ++k) {
        session.self(f);  // state guards are checked afresh
        auto t0 = std::chrono::steady_clock::now();
        session.explain(f, args, kwargs);
        us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(us.begin(), us.end());
      std::cout << file.functions[f].name << ": " << guards << " guards in " << file.functions[f].records.size()
                << " records, full check median " << std::fixed << std::setprecision(1) << us[us.size() / 2]
                << " us (min " << us.front() << " us) over " << calls << " checks\n"
                << std::defaultfloat;
    }
  } catch (const std::exception& e) {
    std::cerr << "magpy-bench-guards: " << e.what() << "\n";
    return 2;
  }
  return 0;
}

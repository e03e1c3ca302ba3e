// Record files that are well formed on the outside (right magic, version,
// hash) and hostile inside: each names the one error magpy must give.
// Shared by the unit tests, the CLI tests (through write_hostile_records)
// and the fuzzer's seed corpus.
#pragma once

#include <string>
#include <vector>

namespace magpy::hostile {

struct Case {
  std::string name;    // file stem: "deep_value"
  std::string bytes;   // the whole .mgp file
  // What magpy-run must do: exit status (2: refused with an error; 1: a
  // call matched no record; 0: replayed) and a piece of its message.
  int runStatus = 2;
  std::string expect;
  bool loads = false;  // the reader accepts it (the trouble is in what replay does with it)
};

std::vector<Case> cases();

}  // namespace magpy::hostile

// libFuzzer target: an input is a record body, mutated byte by byte
// (replay_body.h says what each input goes through).
#include "replay_body.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  magpy::fuzz::replayBody(data, size);
  return 0;
}

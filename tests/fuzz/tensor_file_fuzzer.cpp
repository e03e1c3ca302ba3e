// libFuzzer target: an input is the pickle of a torch.save file (its
// data.pkl). The fuzzer wraps it into a zip archive beside eight storages
// named "0" to "7" of 256 bytes each, so mutations reach the restricted
// unpickler, the storage and view checks and the conversion to values
// instead of stopping at the zip's structure. The reader's refusal is
// magpy::Error; anything else (a crash, a sanitizer report, another
// exception) is a finding.
#include <unistd.h>

#include <caffe2/serialize/inline_container.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "magpy/support/error.h"
#include "replay/torch_save.h"

namespace {

const std::string& path() {
  static const std::string p = "/tmp/magpy_tensor_fuzz_" + std::to_string(getpid()) + ".pt";
  return p;
}

void writeArchive(const std::string& pickle) {
  caffe2::serialize::PyTorchStreamWriter w(path());
  w.writeRecord("data.pkl", pickle.data(), pickle.size());
  std::string storage(256, '\0');
  for (size_t k = 0; k < storage.size(); ++k) storage[k] = char(k * 7);
  for (int k = 0; k < 8; ++k) w.writeRecord("data/" + std::to_string(k), storage.data(), storage.size());
  w.writeEndOfFile();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  writeArchive(std::string(reinterpret_cast<const char*>(data), size));
  try {
    magpy::replay::readTorchSave(path(), "the input file");
  } catch (const magpy::Error&) {
    // A clean refusal is the expected outcome for most inputs.
  }
  std::remove(path().c_str());
  return 0;
}

// record_bodies OUT_DIR file.mgp...: writes the body of each record file
// that loads (format.h's `body`) to OUT_DIR/<stem>.body, the fuzzer's seeds.
#include <filesystem>
#include <iostream>

#include "magpy/record/format.h"
#include "magpy/support/error.h"

int main(int argc, char** argv) {
  return magpy::runReportingErrors("record_bodies", [&] {
    if (argc < 2) throw magpy::Error("usage: record_bodies OUT_DIR file.mgp...");
    std::filesystem::path out = argv[1];
    int written = 0;
    for (int i = 2; i < argc; ++i) {
      magpy::record::RecordFile file;
      try {
        file = magpy::record::readRecordFile(argv[i]);
      } catch (const magpy::Error&) {
        continue;  // refused records make no seed
      }
      std::filesystem::path name = out / std::filesystem::path(argv[i]).stem();
      magpy::record::writeFileAtomically(name.string() + ".body", magpy::record::encodeBody(file));
      ++written;
    }
    std::cout << "record_bodies: " << written << " seeds in " << out.string() << "\n";
    return 0;
  });
}

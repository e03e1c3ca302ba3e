// write_hostile_records DIR: writes each hostile case to DIR/<name>.mgp and
// DIR/index.tsv ("name<TAB>exit status of magpy-run<TAB>1 if it loads<TAB>expected
// message").
#include <fstream>
#include <iostream>

#include "hostile_records.h"
#include "magpy/record/format.h"
#include "magpy/support/error.h"

int main(int argc, char** argv) {
  return magpy::runReportingErrors("write_hostile_records", [&] {
    if (argc != 2) throw magpy::Error("usage: write_hostile_records DIR");
    std::string dir = argv[1];
    std::ofstream index(dir + "/index.tsv");
    for (const auto& c : magpy::hostile::cases()) {
      magpy::record::writeFileAtomically(dir + "/" + c.name + ".mgp", c.bytes);
      index << c.name << "\t" << c.runStatus << "\t" << c.loads << "\t" << c.expect << "\n";
    }
    return index ? 0 : 2;
  });
}

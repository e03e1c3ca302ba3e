// magpy-inspect: print, summarize and compare .mgp records.
#include <CLI/CLI.hpp>

#include <iostream>

#include "magpy/record/format.h"
#include "magpy/record/text.h"
#include "magpy/support/error.h"

int main(int argc, char** argv) {
  CLI::App app{"Print, summarize and compare magpy records (.mgp)", "magpy-inspect"};
  std::string file;
  bool summary = false;
  app.add_option("record", file, "The .mgp file to print");
  app.add_flag("--summary", summary, "One line per compiled function instead of the full text");

  auto* diff = app.add_subcommand("diff", "Compare two records; exit 0 when equal, 1 when they differ, 2 on error");
  std::string left, right;
  diff->add_option("a", left, "First .mgp file")->required();
  diff->add_option("b", right, "Second .mgp file")->required();
  app.require_subcommand(0, 1);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  try {
    using namespace magpy::record;
    if (diff->parsed()) {
      std::string text = diffCanonical(readRecordFile(left), readRecordFile(right));
      if (text.empty()) {
        std::cout << "records are the same\n";
        return 0;
      }
      std::cout << "--- " << left << "\n+++ " << right << "\n" << text;
      return 1;
    }
    if (file.empty()) {
      std::cerr << "magpy-inspect: error: give a record to print, or 'diff A B'\n" << app.help();
      return 2;
    }
    RecordFile f = readRecordFile(file);
    std::cout << (summary ? printSummary(f) : printCanonical(f));
    return 0;
  } catch (const magpy::Error& e) {
    std::cerr << "magpy-inspect: error: " << e.what() << "\n";
    return 2;
  }
}

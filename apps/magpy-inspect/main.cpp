// magpy-inspect: print, picture, export and compare .mgp records.
#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>

#include "magpy/interop/fx.h"
#include "magpy/record/diff.h"
#include "magpy/record/dot.h"
#include "magpy/record/format.h"
#include "magpy/record/text.h"
#include "magpy/support/error.h"

namespace {

using namespace magpy::record;

struct Options {
  std::string file;
  bool summary = false;
  std::vector<std::string> show;
  std::string format = "text";
  std::string function;
  int record = -1;
  bool fx = false;
  std::string dot;  // "graph" or "refgraph" when set
  bool png = false;
  std::string output;
};

void writeText(const std::string& text, const std::string& path) {
  if (path.empty() || path == "-") std::cout << text;
  else writeFileAtomically(path, text);
}

int picture(const RecordFile& f, const Options& o) {
  auto [fi, ri] = chooseRecord(f, o.function, o.record < 0 ? 0 : o.record);
  const Record& r = f.functions[fi].records[ri];
  std::string title = f.functions[fi].name + ", record " + std::to_string(ri);
  std::string dot;
  if (o.dot == "refgraph") {
    dot = refGraphDot(r.refs, title + ": RefGraph");
  } else {
    if (!r.breaks.empty())
      throw magpy::Error(title + " has no operator graph (" + std::to_string(r.breaks.size()) +
                         " graph breaks); --dot refgraph draws what it read");
    dot = graphDot(r.graph, title + ": operator graph");
  }
  if (!o.png) {
    writeText(dot, o.output);
    return 0;
  }
  renderPng(dot, o.output);
  std::cout << "wrote " << o.output << "\n";
  return 0;
}

int run(const Options& o) {
  RecordFile f = readRecordFile(o.file);
  if (o.fx) {
    magpy::interop::FxExportOptions fx;
    fx.function = o.function;
    fx.record = o.record < 0 ? 0 : o.record;
    auto s = magpy::interop::writeFxExport(f, fx, o.output);
    std::cout << "wrote " << o.output << " and " << s.dataPath << ": " << s.function << " record " << fx.record << ", "
              << s.operators << " operators, " << s.tensors << " tensors; example from " << s.example << "\n";
    return 0;
  }
  if (!o.dot.empty()) return picture(f, o);
  bool json = o.format == "json";
  if (o.summary) {
    writeText(printSummary(f, json), o.output);
    return 0;
  }
  ViewOptions view;
  view.json = json;
  view.function = o.function;
  view.record = o.record;
  for (auto& s : o.show) view.sections.insert(parseSection(s));
  writeText(printView(f, view), o.output);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Print, picture, export and compare magpy records (.mgp)", "magpy-inspect"};
  Options o;
  app.add_option("record", o.file, "The .mgp file");
  app.add_flag("--summary", o.summary, "One line per compiled function");
  app.add_option("--show", o.show,
                 "Only these sections: environment, state, guards, graph, mock, breaks, refgraph, calls, blobs")
      ->delimiter(',');
  app.add_option("--format", o.format, "text or json (views and --summary; diff has its own --format)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  app.add_option("--function", o.function, "Only this compiled function (full name or unique suffix)");
  app.add_option("--record", o.record, "Only this record of the function (default: all; 0 for --fx, --dot)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--fx", o.fx, "Write a torch.fx export of one record: Python source (-o FILE.py) and FILE.pt");
  app.add_option("--dot", o.dot, "Write Graphviz for one record's operator graph, or its RefGraph")
      ->check(CLI::IsMember({"graph", "refgraph"}))
      ->expected(0, 1)
      ->default_str("graph");
  app.add_flag("--png", o.png, "Render the --dot picture to a PNG (-o FILE.png; needs Graphviz's dot)");
  app.add_option("-o,--output", o.output, "Write to this file instead of standard output");

  auto* diff = app.add_subcommand("diff", "Compare two records; exit 0 when equal, 1 when they differ, 2 on error");
  std::string left, right, diffFormat = "text";
  diff->add_option("a", left, "First .mgp file")->required();
  diff->add_option("b", right, "Second .mgp file")->required();
  diff->add_option("--format", diffFormat, "text or json")->check(CLI::IsMember({"text", "json"}))->capture_default_str();
  app.require_subcommand(0, 1);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  return magpy::runReportingErrors("magpy-inspect", [&] {
    if (diff->parsed()) {
      auto changes = diffRecords(readRecordFile(left), readRecordFile(right));
      std::cout << printChanges(changes, diffFormat == "json");
      return changes.empty() ? 0 : 1;
    }
    if (o.file.empty()) {
      std::cerr << "magpy-inspect: error: give a record to inspect, or 'diff A B'\n\n" << app.help();
      return 2;
    }
    if (o.png && o.dot.empty()) o.dot = "graph";
    if ((o.fx || o.png) && o.output.empty()) {
      std::cerr << "magpy-inspect: error: " << (o.fx ? "--fx" : "--png") << " needs -o FILE\n";
      return 2;
    }
    if (o.fx && !o.dot.empty()) {
      std::cerr << "magpy-inspect: error: --fx and --dot write different files; give one\n";
      return 2;
    }
    return run(o);
  });
}

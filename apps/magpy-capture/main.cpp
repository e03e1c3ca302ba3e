// magpy-capture: run a PyTorch script, capture what it passes to
// magpy.compile(...), write the records to a .mgp file.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <iostream>

#include "magpy/capture/capture.h"
#include "magpy/support/error.h"

int main(int argc, char** argv) {
  CLI::App app{"Run a Python script and capture the functions it passes to magpy.compile(...) as operator graphs",
               "magpy-capture"};
  magpy::capture::Options opt;
  opt.program = argv[0];
  bool quiet = false;
  app.add_option("-o,--output", opt.output, "Record file to write (default: <script stem>.mgp here; as a rank of a torch.distributed job, <script stem>.rank<N>.mgp, and {rank} in the name is the rank)");
  // One value per occurrence, so the script after it stays the script.
  app.add_option_function<std::string>(
         "--annotations", [&](const std::string& path) { opt.annotations.push_back(path); },
         "Extra annotation file or directory (repeatable)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_flag("--explain", opt.explain, "Print each guard miss and graph break as it happens");
  app.add_flag("--keep-partial", opt.keepPartial, "Write the records even if the script fails");
  app.add_option("--log-calls", opt.logCalls, "Calls whose inputs and results the record keeps for replay")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--log-budget", opt.logBudget,
                 "Bytes the logged calls' state changes may take (512M, 2G, none); auto: half the state's bytes, at "
                 "least 16M. The log ends before a call that would pass it")
      ->capture_default_str();
  app.add_option("--report", opt.report,
                 "Write a coverage report: records and why each was made, graph breaks, suggested annotations");
  std::string format = "text";
  app.add_option("--format", format, "Format of the --report: text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  std::string stateAt = "first-read";
  app.add_option("--state-at", stateAt,
                 "Which state of the compiled modules the record keeps: first-read (as the records first read it; "
                 "the logged calls replay from it) or exit (as the script left it, e.g. trained weights; no call log)")
      ->check(CLI::IsMember({"first-read", "exit"}))
      ->capture_default_str();
  std::string dynamic = "auto";
  app.add_option("--dynamic", dynamic,
                 "auto: two records of a function that differ only in argument sizes become one dynamic record "
                 "(sizes as symbols, checked per call); off: every record keeps its sizes (magpy.compile(fn, "
                 "dynamic=...) overrides it per function)")
      ->check(CLI::IsMember({"auto", "off"}))
      ->capture_default_str();
  app.add_option("--backend", opt.backend,
                 "How a record's calls with grad mode off run once it served two: aten (operator by operator), "
                 "compiled (a TorchScript graph with libtorch's inference passes), auto (compiled where its first "
                 "call shows it faster). Compiled graphs are checked against operator by operator on their first "
                 "call; calls with grad mode on run operator by operator (magpy.compile(fn, backend=...) overrides)")
      ->check(CLI::IsMember({"aten", "compiled", "auto"}))
      ->capture_default_str();
  app.add_option("--compile-after", opt.compileAfter,
                 "Calls without autograd a record serves operator by operator before the next one tries its "
                 "compiled graph (--backend compiled or auto)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--freeze-state", opt.freezeState,
               "Let compiled graphs freeze the state tensors they only read (fold and re-lay them out once): the "
               "script promises to write them only through torch operations, never through .data, numpy views or "
               "another process (magpy.compile(fn, freeze_state=...) overrides)");
  app.add_flag("-q,--quiet", quiet, "Print nothing but errors");
  app.prefix_command();  // everything from the script on belongs to the script
  app.footer("Usage: magpy-capture [options] script.py [script arguments...]");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  std::vector<std::string> rest = app.remaining();
  if (rest.empty()) {
    std::cerr << "magpy-capture: error: no script given\n" << app.help();
    return 2;
  }
  opt.script = rest.front();
  opt.args.assign(rest.begin() + 1, rest.end());
  opt.reportJson = format == "json";
  opt.stateAtExit = stateAt == "exit";
  opt.dynamic = dynamic == "auto";
  opt.progress = !quiet && isatty(STDERR_FILENO);

  return magpy::runReportingErrors("magpy-capture", [&] {
    auto out = magpy::capture::captureScript(opt);
    if (out.wrote && !quiet)
      std::cerr << "magpy-capture: wrote " << out.output << (out.wroteReport ? " and " + opt.report : "") << "\n"
                << out.summary;
    else if (!out.wrote)
      std::cerr << "magpy-capture: " << opt.script << " exited with status " << out.exitStatus
                << "; no record written (use --keep-partial to keep what was captured)\n";
    return out.exitStatus;
  });
}

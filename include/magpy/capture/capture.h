// Capturing a script: run it in an embedded CPython, monitor every function
// it hands to magpy.compile(...), act as a JIT while it runs, and write the
// records to a .mgp file when it ends.
#pragma once

#include <string>
#include <vector>

namespace magpy::capture {

struct Options {
  std::string program;                  // argv[0] of magpy-capture, for sys.executable
  std::string script;                   // the script to run
  std::vector<std::string> args;        // its own arguments
  std::string output;                   // .mgp path; default: <script stem>.mgp in the working directory
  std::vector<std::string> annotations; // extra annotation files or directories
  bool explain = false;                 // print every guard miss on stderr as it happens
  bool keepPartial = false;             // write the records even when the script fails
  int logCalls = 16;                    // calls per session whose inputs and results are kept
  // Bytes the logged calls' state changes may take ("512M", "none"); auto:
  // half the bytes of the state the records read, and at least 16 MiB. A
  // training script changes its weights before every call: without a
  // budget its record would keep a copy of them per logged call.
  std::string logBudget = "auto";
  std::string report;                   // coverage report to write beside the records; empty: none
  bool reportJson = false;              // the report as JSON instead of text
  bool progress = false;                // a progress line on stderr (for a terminal)
  bool stateAtExit = false;             // keep compiled modules' state as the script left it (no call log)
  bool dynamic = true;                  // make records whose argument sizes change dynamic (--dynamic auto|off)
  // How calls autograd records nothing in run once a record served a few:
  // "aten" (operator by operator), "compiled" or "auto" (compiled where the
  // first such call shows it faster); both check it agrees first.
  std::string backend = "auto";
  // Calls without autograd a record serves operator by operator before
  // its next one tries the compiled graph: a record of a shape seen once or
  // twice never pays the trial (--compile-after).
  int compileAfter = 2;
  // Compiled graphs may freeze the state tensors they only read: the
  // program promises to write them only through torch operations (not
  // `.data`, numpy views or other processes), which the JIT sees.
  bool freezeState = false;
};

struct Outcome {
  int exitStatus = 0;   // the script's, as python3 would report it
  bool wrote = false;   // whether the record file was written
  std::string output;   // its path
  std::string summary;  // what was captured, one line per compiled function
  bool wroteReport = false;
};

// Throws magpy::Error when capture cannot start or the records cannot be
// written; a script that fails is an Outcome with a non-zero exitStatus
// (its traceback already printed, as Python prints it).
Outcome captureScript(const Options& options);

// The directory of the annotations that ship with magpy.
std::string builtinAnnotations();

}  // namespace magpy::capture

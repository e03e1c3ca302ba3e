// Running a script in an embedded CPython the way `python3 script.py args`
// would: its own argv, __main__, __file__ and sys.path[0]; its exit status
// and exceptions reported as Python reports them.
#include <Python.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <iostream>

#include "capture/compiled_function.h"
#include "capture/jit.h"
#include "capture/pyobjects.h"
#include "magpy/capture/capture.h"
#include "magpy/record/format.h"
#include "magpy/replay/distributed.h"
#include "magpy/replay/tensors.h"
#include "magpy/support/error.h"

#ifndef MAGPY_VERSION
#define MAGPY_VERSION "0.0.0"
#endif
#ifndef MAGPY_ANNOTATIONS_DIR
#define MAGPY_ANNOTATIONS_DIR "annotations"
#endif

namespace magpy::capture {
namespace {

namespace fs = std::filesystem;

void checkStatus(PyStatus status, const char* what) {
  if (PyStatus_Exception(status))
    throw Error(std::string("cannot start the embedded Python (") + what + "): " + (status.err_msg ? status.err_msg : "unknown"));
}

void initInterpreter(const Options& o) {
  if (PyImport_AppendInittab("magpy", initMagpyModule) < 0) throw Error("cannot register the magpy module");
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  config.parse_argv = 0;  // the script's arguments are its own
  std::vector<std::string> argv{o.script};
  argv.insert(argv.end(), o.args.begin(), o.args.end());
  std::vector<std::wstring> wide;
  for (auto& a : argv) {
    wchar_t* w = Py_DecodeLocale(a.c_str(), nullptr);
    if (!w) throw Error("cannot decode argument '" + a + "'");
    wide.emplace_back(w);
    PyMem_RawFree(w);
  }
  std::vector<wchar_t*> ptrs;
  for (auto& w : wide) ptrs.push_back(w.data());
  checkStatus(PyConfig_SetArgv(&config, Py_ssize_t(ptrs.size()), ptrs.data()), "argv");
  // sys.executable: the interpreter magpy embeds, so subprocesses the
  // script starts run plain Python with the same packages.
  checkStatus(PyConfig_SetBytesString(&config, &config.program_name, "/usr/bin/python3"), "program name");
  PyStatus status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  checkStatus(status, "initialize");
}

// Runs the script as __main__; returns its exit status as python3 would.
int runMain(const Options& o) {
  PyObject* main = PyImport_AddModule("__main__");
  PyObject* globals = PyModule_GetDict(main);
  PyRef file = PyRef::steal(PyUnicode_DecodeFSDefault(o.script.c_str()));
  PyDict_SetItemString(globals, "__file__", file.get());
  PyDict_SetItemString(globals, "__cached__", Py_None);

  // sys.path[0] is the script's directory, as for `python3 script.py`.
  std::error_code ec;
  fs::path dir = fs::absolute(o.script, ec).parent_path();
  PyObject* path = PySys_GetObject("path");
  PyRef d = PyRef::steal(PyUnicode_DecodeFSDefault(dir.c_str()));
  if (path && PyList_Check(path)) PyList_Insert(path, 0, d.get());

  FILE* fp = std::fopen(o.script.c_str(), "rb");
  if (!fp) throw Error(o.script + ": cannot open the script (does it exist?)");
  PyObject* result = PyRun_FileExFlags(fp, o.script.c_str(), Py_file_input, globals, globals, /*closeit=*/1, nullptr);
  if (result) {
    Py_DECREF(result);
    return 0;
  }
  if (PyErr_ExceptionMatches(PyExc_SystemExit)) {
    // SystemExit(code): None -> 0, int -> it, anything else printed -> 1.
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyRef code = value ? PyRef::steal(PyObject_GetAttrString(value, "code")) : PyRef();
    PyErr_Clear();
    int status = 0;
    if (code && code.get() != Py_None) {
      if (PyLong_Check(code.get())) {
        status = int(PyLong_AsLong(code.get()));
      } else {
        PyObject_Print(code.get(), stderr, Py_PRINT_RAW);
        std::fputc('\n', stderr);
        status = 1;
      }
    }
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return status;
  }
  PyErr_Print();  // the traceback, exactly as Python prints it
  return 1;
}

std::string versionOf(const char* module) {
  PyRef m = PyRef::steal(PyImport_ImportModule(module));
  PyRef v = m ? PyRef::steal(PyObject_GetAttrString(m.get(), "__version__")) : PyRef();
  PyErr_Clear();
  const char* s = v && PyUnicode_Check(v.get()) ? PyUnicode_AsUTF8(v.get()) : nullptr;
  return s ? s : "unknown";
}

}  // namespace

std::string builtinAnnotations() {
  if (const char* env = std::getenv("MAGPY_ANNOTATIONS")) return env;
  return MAGPY_ANNOTATIONS_DIR;
}

// The record's file name. A rank of a torch.distributed job (torchrun's
// environment) writes its own: "{rank}" in -o is its number, and the
// default name is <stem>.rank<N>.mgp.
std::string recordFileName(const Options& o) {
  auto rank = replay::rankEnvironment();
  std::string name = o.output;
  if (!rank || rank->worldSize == 1) return name.empty() ? fs::path(o.script).stem().string() + ".mgp" : replay::forRank(name, 0);
  if (name.empty()) return fs::path(o.script).stem().string() + ".rank" + std::to_string(rank->rank) + ".mgp";
  if (name.find("{rank}") == std::string::npos)
    throw Error("-o " + name + ": every rank of this " + std::to_string(rank->worldSize) + "-process job would write it; "
                "put {rank} in the name (-o step.{rank}.mgp)");
  return replay::forRank(name, rank->rank);
}

Outcome captureScript(const Options& o) {
  Outcome out;
  out.output = recordFileName(o);
  std::error_code ec;
  if (!fs::is_regular_file(o.script, ec)) throw Error(o.script + ": no such script; pass the path of a Python file");

  // Loads the annotations: bad ones fail before the script runs. The
  // session holds Python objects, so it ends before the interpreter does.
  auto session = std::make_unique<Session>(o);
  initInterpreter(o);
  session->activate();
  out.exitStatus = runMain(o);
  session->endProgress();
  try {
    if (out.exitStatus == 0 || o.keepPartial) {
      record::RecordFile file = session->recordFile(o.stateAtExit);
      file.env.magpy_version = MAGPY_VERSION;
      file.env.python_version = std::to_string(PY_MAJOR_VERSION) + "." + std::to_string(PY_MINOR_VERSION) + "." +
                                std::to_string(PY_MICRO_VERSION);
      file.env.torch_version = torchImported() ? versionOf("torch") : "not imported";
      file.env.annotations_hash = 0;
      file.script = o.script;
      record::AnnotationSet set;
      set.load(builtinAnnotations());
      for (auto& a : o.annotations) set.load(a);
      file.env.annotations_hash = set.hash();
      record::writeRecordFile(file, out.output);
      out.wrote = true;
      if (!o.report.empty()) {
        record::writeFileAtomically(o.report, record::coverageReport(file, session->callCounts(), o.reportJson));
        out.wroteReport = true;
      }
    }
    out.summary = session->summary();
  } catch (...) {
    session.reset();
    Py_FinalizeEx();
    throw;
  }
  session.reset();
  if (Py_FinalizeEx() < 0 && out.exitStatus == 0) out.exitStatus = 120;  // as python3 does when flushing fails
  return out;
}

}  // namespace magpy::capture

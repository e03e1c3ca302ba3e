// The tools' behaviour at their edges: scripts that fail, bad records, bad
// arguments. Messages are compared with golden files in tests/golden.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "magpy/record/format.h"
#include "support.h"

using namespace magpy::e2e;

namespace {
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST(Capture, RunsTheScriptLikePython) {
  Scratch s("like_python");
  s.write("show.py",
          "import sys, os\n"
          "print(sys.argv)\n"
          "print(__name__, os.path.basename(__file__))\n"
          "print(sys.path[0] == os.path.dirname(os.path.abspath(__file__)))\n");
  Result py = s.run("/usr/bin/python3 show.py -o x --flag 3");
  Result cap = s.run("magpy-capture -q show.py -o x --flag 3");
  ASSERT_EQ(cap.status, 0) << cap.err;
  EXPECT_EQ(cap.out, py.out);
  EXPECT_TRUE(s.exists("show.mgp"));      // the script's own -o is its own
  EXPECT_FALSE(s.exists("x"));
}

TEST(Capture, AScriptThatRaisesWritesNoRecord) {
  Scratch s("raises");
  s.write("boom.py", "def f():\n    raise ValueError('bad input')\nf()\n");
  Result r = s.run("magpy-capture boom.py");
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, "Traceback (most recent call last):")) << r.err;
  EXPECT_TRUE(contains(r.err, "ValueError: bad input")) << r.err;
  EXPECT_TRUE(contains(r.err, "magpy-capture: boom.py exited with status 1; no record written")) << r.err;
  EXPECT_FALSE(s.exists("boom.mgp"));

  Result keep = s.run("magpy-capture --keep-partial boom.py");
  EXPECT_EQ(keep.status, 1);
  EXPECT_TRUE(s.exists("boom.mgp"));
}

TEST(Capture, ExitStatusIsTheScripts) {
  Scratch s("exit");
  s.write("quit.py", "import sys\nsys.exit(3)\n");
  EXPECT_EQ(s.run("magpy-capture quit.py").status, 3);
  EXPECT_FALSE(s.exists("quit.mgp"));
  s.write("ok.py", "import sys\nsys.exit(0)\n");
  EXPECT_EQ(s.run("magpy-capture ok.py").status, 0);
  EXPECT_TRUE(s.exists("ok.mgp"));
}

// No C++ exception crosses into CPython: a failure inside magpy at each
// place the interpreter enters it (armed by magpy._fail_next_entry) is a
// Python RuntimeError the script can catch, or for the trace function a
// graph break; the script runs on and the record is written.
TEST(Capture, FailuresInsideMagpyNeverUnwindThroughPython) {
  Scratch s("entries");
  s.write("entries.py",
          "import torch, magpy\n"
          "def inner(x):\n"
          "    return x * 2\n"
          "def f(x):\n"
          "    y = inner(x)\n"
          "    print('eager', y.sum().item())\n"  // a graph break: later calls run as segments
          "    return y + 1\n"
          "c = magpy.compile(f)\n"
          "x = torch.ones(2)\n"
          "c(x)\n"
          "for entry in ['compiled_call', 'frame_hook']:\n"
          "    magpy._fail_next_entry(entry)\n"
          "    try:\n"
          "        c(x)\n"
          "        print(entry, 'did not fail')\n"
          "    except RuntimeError as e:\n"
          "        print(entry, 'raised', e)\n"
          "magpy._fail_next_entry('trace')\n"
          "g = magpy.compile(lambda t: t - 1)\n"
          "print('traced', g(x).tolist(), g(x).tolist())\n");
  Result r = s.run("magpy-capture entries.py");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "compiled_call raised magpy: a failure armed by magpy._fail_next_entry")) << r.out;
  EXPECT_TRUE(contains(r.out, "frame_hook raised magpy: a failure armed by magpy._fail_next_entry")) << r.out;
  EXPECT_TRUE(contains(r.out, "traced [0.0, 0.0] [0.0, 0.0]")) << r.out;
  Result report = s.run("magpy-inspect entries.mgp");
  EXPECT_TRUE(contains(report.out, "internal error while monitoring: a failure armed by magpy._fail_next_entry"))
      << report.out;
}

TEST(Capture, SetupErrors) {
  Scratch s("setup");
  Result missing = s.run("magpy-capture nothere.py");
  EXPECT_EQ(missing.status, 2);
  EXPECT_EQ(missing.err, golden("capture_missing_script.txt", missing.err));
  Result none = s.run("magpy-capture");
  EXPECT_EQ(none.status, 2);
  EXPECT_TRUE(contains(none.err, "no script given")) << none.err;
  s.write("bad.yaml", "version: 1\nfunctions:\n  - name: x.y\n    pur: false\n");
  s.write("ok.py", "pass\n");
  Result ann = s.run("magpy-capture --annotations bad.yaml ok.py");
  EXPECT_EQ(ann.status, 2);
  EXPECT_EQ(ann.err, golden("capture_bad_annotation.txt", ann.err));
}

TEST(Run, BadRecordFiles) {
  Scratch s("bad_records");
  ASSERT_EQ(s.run("magpy-capture -q -o good.mgp " + example("mlp.py")).status, 0);
  std::string good = s.read("good.mgp");
  s.write("truncated.mgp", good.substr(0, good.size() / 2));
  std::string flipped = good;
  flipped[good.size() / 2] = char(flipped[good.size() / 2] ^ 0x55);
  s.write("corrupted.mgp", flipped);
  s.write("text.mgp", "hello\n");
  std::string newer = good;
  newer[8] = char(magpy::record::kFormatVersion + 1);
  s.write("newer.mgp", newer);

  std::string all;
  for (const char* file : {"missing.mgp", "truncated.mgp", "corrupted.mgp", "text.mgp", "newer.mgp"}) {
    Result r = s.run(std::string("magpy-run ") + file);
    EXPECT_EQ(r.status, 2) << file;
    EXPECT_EQ(r.out, "") << file;
    all += withoutNumbers(r.err);
    Result i = s.run(std::string("magpy-inspect ") + file);
    EXPECT_EQ(i.status, 2) << file;
  }
  EXPECT_EQ(all, golden("run_bad_records.txt", all));
}

// Records well formed outside and hostile inside (tests/hostile): magpy-run
// and magpy-inspect give one precise message and the expected status,
// within 10 seconds and 1 GB each.
TEST(Run, HostileRecords) {
  Scratch s("hostile");
  ASSERT_EQ(s.run("write_hostile_records .").status, 0);
  std::istringstream index(s.read("index.tsv"));
  std::string line;
  size_t cases = 0;
  while (std::getline(index, line)) {
    std::istringstream fields(line);
    std::string name, status, loads, expect;
    std::getline(fields, name, '\t');
    std::getline(fields, status, '\t');
    std::getline(fields, loads, '\t');
    std::getline(fields, expect);
    SCOPED_TRACE(name);
    ++cases;
    std::string measure = "/usr/bin/python3 " + sourceDir() + "/tests/e2e/measure.py usage.txt ";
    Result r = s.run(measure + "magpy-run " + name + ".mgp");
    EXPECT_EQ(r.status, std::stoi(status)) << r.out << r.err;
    EXPECT_TRUE(contains(r.out + r.err, expect)) << r.out << r.err;
    if (r.status == 2) {
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
    double mb = 0, seconds = 0;
    std::istringstream(s.read("usage.txt")) >> mb >> seconds;
    EXPECT_LT(mb, 1024) << "peak memory of magpy-run";
    EXPECT_LT(seconds, 10) << "seconds magpy-run took";

    Result i = s.run(measure + "magpy-inspect " + name + ".mgp > /dev/null");
    EXPECT_EQ(i.status, loads == "1" ? 0 : 2) << i.err;
    if (loads != "1") {
      EXPECT_TRUE(contains(i.err, expect)) << i.err;
    }
    std::istringstream(s.read("usage.txt")) >> mb >> seconds;
    EXPECT_LT(mb, 1024) << "peak memory of magpy-inspect";
    EXPECT_LT(seconds, 10) << "seconds magpy-inspect took";
  }
  EXPECT_GE(cases, 20u);
}

TEST(Run, NeverLinksPython) {
  Scratch s("ldd");
  Result r = s.run("ldd \"$(command -v magpy-run)\"");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(contains(r.out, "libpython")) << r.out;
  EXPECT_FALSE(contains(r.out, "libtorch_python")) << r.out;
  EXPECT_TRUE(contains(r.out, "libtorch")) << r.out;
}

TEST(Run, ExplainsGuardMisses) {
  Scratch s("explain");
  s.write("scaled.py",
          "import torch, magpy\n"
          "class M(torch.nn.Module):\n"
          "    def __init__(self):\n"
          "        super().__init__()\n"
          "        self.scale = 2.0\n"
          "    def forward(self, x):\n"
          "        return x * self.scale\n"
          "m = M()\n"
          "f = magpy.compile(m)\n"
          "f(torch.ones(2))\n"
          "m.scale = 3.0\n"
          "f(torch.ones(2))\n"
          "m.scale = 4.0\n"
          "f(torch.ones(2))\n"
          "assert f._magpy_stats()['records'] == 1 and f._magpy_stats()['hits'] == 1\n");
  Result cap = s.run("magpy-capture --explain scaled.py");
  ASSERT_EQ(cap.status, 0) << cap.err;
  EXPECT_TRUE(contains(cap.err, "call 1 matches no record (record 0 needs self.scale == 2.0, got 3.0)")) << cap.err;
  EXPECT_TRUE(contains(cap.err, "self.scale changes between calls (was 2.0, now 3.0): lifting it into the graph")) << cap.err;
  EXPECT_TRUE(contains(cap.err, "this record computes with self.scale in its graph, for any value; it replaces record 0"))
      << cap.err;
  Result run = s.run("magpy-run scaled.mgp");
  EXPECT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_TRUE(contains(run.out, "1 state changes made by the script applied first")) << run.out;
}

// --profile: a table of the operators the timed calls ran, on the backend
// the record's first call chose; --backend and --profile misuse are one
// clear error each.
TEST(Run, ProfilesTheBackendItRuns) {
  Scratch s("profile");
  ASSERT_EQ(s.run("magpy-capture -q -o mlp.mgp " + example("mlp.py")).status, 0);
  for (std::string backend : {"aten", "compiled"}) {
    Result r = s.run("magpy-run mlp.mgp --repeat 20 --profile --show-optimizations --backend " + backend);
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_TRUE(contains(r.out, "profile __main__.MLP record 0 (" + backend + " backend), 20 calls:\n"
                                "  operator                                    calls   total (ms) per call (us)   share\n"))
        << r.out;
    EXPECT_TRUE(contains(r.out, "  aten::relu                                     40")) << r.out;
    EXPECT_TRUE(contains(r.out, "  per call: ")) << r.out;
    EXPECT_TRUE(contains(r.out, "outside them (guards, boxing, allocation, mock)")) << r.out;
    EXPECT_EQ(contains(r.out, "backend: compiled ("), backend == "compiled") << r.out;
  }
  std::string all;
  for (const char* args : {"--profile", "--backend jit", "--backend"}) {
    Result r = s.run(std::string("magpy-run mlp.mgp ") + args);
    EXPECT_EQ(r.status, 2) << args;
    all += r.err;
  }
  EXPECT_EQ(all, golden("run_profile_errors.txt", all));
}

TEST(Inspect, UsageErrors) {
  Scratch s("inspect_usage");
  EXPECT_EQ(s.run("magpy-inspect").status, 2);
  EXPECT_EQ(s.run("magpy-inspect diff only_one.mgp").status, 2);
  EXPECT_EQ(s.run("magpy-inspect diff a.mgp b.mgp").status, 2);  // missing files are errors, not differences
}

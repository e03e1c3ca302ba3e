// Every program in tests/corpus runs under magpy-capture (the program
// checks its own results, side effects and record counts against eager
// execution), then its record is replayed natively by magpy-run, with and
// without graph optimizations and on the compiled backend, and each of its
// operator graphs is exported to torch.fx and checked in Python.
//
// Markers in a program's leading comments:
//   # magpy-test: breaks            its records have graph breaks: replay must refuse them
//   # magpy-test: refused natively  its guards need Python values: replay must refuse its calls
//   # magpy-test: compiled          every record runs on the compiled backend (none falls back)
//   # magpy-capture-args: ARGS      extra magpy-capture arguments (paths relative to tests/corpus)
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "support.h"

using namespace magpy::e2e;

namespace {

std::vector<std::string> corpus() {
  std::vector<std::string> names;
  for (auto& e : std::filesystem::directory_iterator(sourceDir() + "/tests/corpus"))
    if (e.path().extension() == ".py" && e.path().filename() != "harness.py") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string marker(const std::string& file, const std::string& key) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line) && line.rfind("#", 0) == 0;)
    if (line.rfind("# " + key + ":", 0) == 0) return line.substr(key.size() + 3);
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

class Corpus : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(Corpus, MatchesEagerAndReplays) {
  std::string name = GetParam();
  std::string dir = sourceDir() + "/tests/corpus";
  std::string file = dir + "/" + name + ".py";
  Scratch s("corpus_" + name);
  // Extra arguments name files relative to the corpus directory.
  Result cap = s.run("cd '" + dir + "' && magpy-capture " + marker(file, "magpy-capture-args") + " -o '" +
                     s.path(name + ".mgp") + "' " + file);
  ASSERT_EQ(cap.status, 0) << cap.out << cap.err;

  Result run = s.run("magpy-run --explain " + name + ".mgp");
  if (contains(marker(file, "magpy-test"), "breaks")) {
    EXPECT_EQ(run.status, 1) << run.out << run.err;
    EXPECT_TRUE(contains(run.out, "graph breaks, which need Python")) << run.out;
  } else if (contains(marker(file, "magpy-test"), "refused natively")) {
    EXPECT_EQ(run.status, 1) << run.out << run.err;
    EXPECT_TRUE(contains(run.out, "no record matches") || contains(run.out, "which needs Python")) << run.out;
  } else {
    EXPECT_EQ(run.status, 0) << run.out << run.err;
    EXPECT_FALSE(contains(run.out, "MISMATCH")) << run.out;
  }

  // Optimized replay (the default) and unoptimized replay give the same outcome.
  Result plain = s.run("magpy-run --optimize none " + name + ".mgp");
  EXPECT_EQ(plain.status, run.status) << plain.out << plain.err;
  EXPECT_FALSE(contains(plain.out, "MISMATCH")) << plain.out;

  // So does the compiled backend, which checks itself against operator-by-
  // operator replay on each record's first call.
  Result compiled = s.run("magpy-run --backend compiled --show-optimizations " + name + ".mgp");
  EXPECT_EQ(compiled.status, run.status) << compiled.out << compiled.err;
  EXPECT_FALSE(contains(compiled.out, "MISMATCH")) << compiled.out;
  if (contains(marker(file, "magpy-test"), "compiled")) {
    EXPECT_TRUE(contains(compiled.out, "backend: compiled")) << compiled.out;
    EXPECT_FALSE(contains(compiled.out, "backend: operator by operator")) << compiled.out;
  }

  Result fx = s.run("/usr/bin/python3 " + sourceDir() + "/tests/e2e/fx_check.py \"$(command -v magpy-inspect)\" " + name +
                    ".mgp .");
  EXPECT_EQ(fx.status, 0) << fx.out << fx.err;
}

INSTANTIATE_TEST_SUITE_P(Programs, Corpus, ::testing::ValuesIn(corpus()), [](const auto& info) { return info.param; });

// Two captures of a program that seeds its random numbers are the same
// bytes, libtorch error texts and bound methods read afresh included.
// (Some torch builds seed from the clock at start: sitecustomize seeds.)
TEST(CorpusCaptures, AreByteIdentical) {
  Scratch s("corpus_determinism");
  s.write("sitecustomize.py", "import torch\ntorch.manual_seed(0)\n");
  std::string dir = sourceDir() + "/tests/corpus";
  for (std::string name : {"autograd_functions", "sparse_input"}) {
    for (std::string copy : {"a", "b"}) {
      Result cap = s.run("cd '" + dir + "' && PYTHONPATH='" + s.dir() + "' magpy-capture -q -o '" +
                         s.path(copy + ".mgp") + "' " + name + ".py");
      ASSERT_EQ(cap.status, 0) << name << cap.out << cap.err;
    }
    EXPECT_EQ(s.read("a.mgp"), s.read("b.mgp")) << name;
  }
}

// magpy-inspect on real captures: torch.fx export checked by Python and
// TorchScript, Graphviz pictures, JSON views, semantic diffs of captures
// that differ in one way each, and magpy-capture's coverage report.
#include <gtest/gtest.h>

#include <regex>

#include "support.h"

using namespace magpy::e2e;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Content hashes of call results follow the machine's BLAS kernels; the
// goldens keep everything else.
std::string withoutHashes(const std::string& text) {
  return std::regex_replace(text, std::regex("hash=[0-9a-f]{16}"), "hash=<hash>");
}

std::string fxCheck(const Scratch& s, const std::string& record) {
  return "/usr/bin/python3 " + sourceDir() + "/tests/e2e/fx_check.py \"$(command -v magpy-inspect)\" " + record + " " +
         s.dir();
}

}  // namespace

TEST(Inspect, FxExportRebuildsTheGraphInPython) {
  Scratch s("fx_mlp");
  ASSERT_EQ(s.run("magpy-capture -q " + example("mlp.py")).status, 0);
  Result fx = s.run("magpy-inspect mlp.mgp --fx -o graph.py");
  ASSERT_EQ(fx.status, 0) << fx.out << fx.err;
  EXPECT_TRUE(contains(fx.out, "wrote graph.py and graph.pt: __main__.MLP record 0, 8 operators, 6 tensors")) << fx.out;
  std::string py = s.read("graph.py");
  EXPECT_TRUE(contains(py, "linear = call('linear', torch.ops.aten.linear, (arg0, fc1_weight, fc1_bias))")) << py;
  Result check = s.run("/usr/bin/python3 graph.py");
  ASSERT_EQ(check.status, 0) << check.out << check.err;
  EXPECT_TRUE(contains(check.out, "ok: torch.fx and torch.jit.script outputs equal the record's")) << check.out;

  // The exported module is an ordinary GraphModule: parameters by their names.
  s.write("use.py",
          "import graph\n"
          "m = graph.build()\n"
          "print(sorted(n for n, _ in m.named_parameters()))\n"
          "print([n.op for n in m.graph.nodes][:3])\n");
  Result use = s.run("/usr/bin/python3 use.py");
  ASSERT_EQ(use.status, 0) << use.err;
  EXPECT_TRUE(contains(use.out, "['fc1.bias', 'fc1.weight', 'fc2.bias', 'fc2.weight', 'out.bias', 'out.weight']")) << use.out;
  EXPECT_TRUE(contains(use.out, "['placeholder', 'get_attr', 'get_attr']")) << use.out;
}

TEST(Inspect, FxExportOfEveryRecordOfAnExample) {
  Scratch s("fx_containers");
  ASSERT_EQ(s.run("magpy-capture -q " + example("containers.py")).status, 0);
  Result check = s.run(fxCheck(s, "containers.mgp"));
  EXPECT_EQ(check.status, 0) << check.out << check.err;
  EXPECT_TRUE(contains(check.out, " 0 failed")) << check.out;
}

TEST(Inspect, FxExportErrors) {
  Scratch s("fx_errors");
  ASSERT_EQ(s.run("cd " + sourceDir() + "/examples && magpy-capture -q -o " + s.path("breaks.mgp") + " breaks.py").status, 0);
  Result broken = s.run("magpy-inspect breaks.mgp --fx --function Tagged -o graph.py");
  EXPECT_EQ(broken.status, 2);
  EXPECT_TRUE(contains(broken.err, "__main__.Tagged record 0 has no operator graph: its calls run Python")) << broken.err;
  Result which = s.run("magpy-inspect breaks.mgp --fx -o graph.py");
  EXPECT_EQ(which.status, 2);
  EXPECT_TRUE(contains(which.err, "compiled functions; choose one with --function")) << which.err;
  Result noOut = s.run("magpy-inspect breaks.mgp --fx");
  EXPECT_EQ(noOut.status, 2);
  EXPECT_TRUE(contains(noOut.err, "--fx needs -o FILE")) << noOut.err;
  EXPECT_FALSE(s.exists("graph.py"));
}

TEST(Inspect, GraphvizPictures) {
  Scratch s("dot");
  ASSERT_EQ(s.run("magpy-capture -q " + example("mlp.py")).status, 0);
  Result graph = s.run("magpy-inspect mlp.mgp --dot");
  ASSERT_EQ(graph.status, 0) << graph.err;
  EXPECT_EQ(graph.out.rfind("digraph magpy {", 0), 0u) << graph.out;
  EXPECT_TRUE(contains(graph.out, "linear = aten::linear\\nfloat32[1, 32]")) << graph.out;

  Result refs = s.run("magpy-inspect mlp.mgp --dot refgraph -o refs.dot");
  ASSERT_EQ(refs.status, 0) << refs.err;
  std::string dot = s.read("refs.dot");
  EXPECT_TRUE(contains(dot, "r0 [label=\"external state\"")) << dot;
  EXPECT_TRUE(contains(dot, "[label=\"self\"]")) << dot;
  EXPECT_TRUE(contains(dot, "[label=\".fc1\"]")) << dot;
  EXPECT_TRUE(contains(dot, "fillcolor=\"#cfe2ff\"")) << dot;  // guarded
  EXPECT_TRUE(contains(dot, "fillcolor=\"#d1e7dd\"")) << dot;  // the result

  for (const char* which : {"graph", "refgraph"}) {
    Result png = s.run(std::string("magpy-inspect mlp.mgp --dot ") + which + " --png -o " + which + ".png");
    ASSERT_EQ(png.status, 0) << png.out << png.err;
    EXPECT_EQ(s.read(std::string(which) + ".png").substr(0, 8), "\x89PNG\r\n\x1a\n") << which;
  }
  EXPECT_FALSE(s.exists("graph.png.tmp"));
}

TEST(Inspect, JsonViews) {
  Scratch s("json");
  ASSERT_EQ(s.run("magpy-capture -q " + example("mlp.py")).status, 0);
  ASSERT_EQ(s.run("magpy-inspect mlp.mgp --summary --format json -o summary.json").status, 0);
  ASSERT_EQ(s.run("magpy-inspect mlp.mgp --show guards,mock,breaks --format json -o view.json").status, 0);
  ASSERT_EQ(s.run("magpy-inspect mlp.mgp --format json -o all.json").status, 0);
  s.write("check.py",
          "import json\n"
          "summary = json.load(open('summary.json'))\n"
          "print('summary', summary[0]['function'], summary[0]['records'], summary[0]['guards'])\n"
          "view = json.load(open('view.json'))\n"
          "record = view['functions'][0]['records'][0]\n"
          "print('view', list(record), record['mock']['result'])\n"
          "full = json.load(open('all.json'))\n"
          "print('all', list(full), len(full['functions'][0]['records'][0]['graph']))\n");
  Result check = s.run("/usr/bin/python3 check.py");
  ASSERT_EQ(check.status, 0) << check.err;
  EXPECT_TRUE(contains(check.out, "summary __main__.MLP 1 84")) << check.out;
  EXPECT_TRUE(contains(check.out, "view ['index', 'origin', 'guards', 'mock', 'breaks'] out[0]")) << check.out;
  EXPECT_TRUE(contains(check.out, "all ['format', 'environment', 'script', 'state_at', 'functions', 'globals', 'calls', 'blobs'] 16"))
      << check.out;
  Result bad = s.run("magpy-inspect mlp.mgp --show grafs");
  EXPECT_EQ(bad.status, 2);
  EXPECT_TRUE(contains(bad.err, "unknown section 'grafs'; the sections are environment, state, guards")) << bad.err;
}

// Captures of tests/e2e/programs/variants.py that differ from "base" in one
// way each; the diff must name that change in the user's terms.
class Diff : public ::testing::TestWithParam<const char*> {};

TEST_P(Diff, NamesTheOneChange) {
  std::string variant = GetParam();
  Scratch s("diff_" + variant);
  std::string program = sourceDir() + "/tests/e2e/programs/variants.py";
  ASSERT_EQ(s.run("magpy-capture -q -o base.mgp " + program + " base").status, 0);
  ASSERT_EQ(s.run("magpy-capture -q -o other.mgp " + program + " " + variant).status, 0);
  Result diff = s.run("magpy-inspect diff base.mgp other.mgp");
  EXPECT_EQ(diff.status, 1) << diff.err;
  std::string text = withoutHashes(diff.out);
  EXPECT_EQ(text, golden("diff_" + variant + ".txt", text));
  Result json = s.run("magpy-inspect diff base.mgp other.mgp --format json");
  EXPECT_EQ(json.status, 1);
  EXPECT_TRUE(contains(json.out, "\"same\": false")) << json.out;
  Result same = s.run("magpy-inspect diff other.mgp other.mgp --format json");
  EXPECT_EQ(same.status, 0);
  EXPECT_TRUE(contains(same.out, "\"same\": true")) << same.out;
}

INSTANTIATE_TEST_SUITE_P(Variants, Diff, ::testing::Values("shape", "global", "layer", "weight", "batches"),
                         [](const auto& info) { return std::string(info.param); });

TEST(Report, BreaksAndTheAnnotationThatRemovesThem) {
  Scratch s("report");
  std::string capture = "cd " + sourceDir() + "/examples && magpy-capture -q -o " + s.path("breaks.mgp") + " ";
  Result text = s.run(capture + "--report " + s.path("report.txt") + " breaks.py");
  ASSERT_EQ(text.status, 0) << text.err;
  std::string report = s.read("report.txt");
  EXPECT_EQ(report, golden("report_breaks.txt", report));

  Result json = s.run(capture + "--report " + s.path("report.json") + " --format json breaks.py");
  ASSERT_EQ(json.status, 0) << json.err;
  s.write("extract.py",
          "import json\n"
          "r = json.load(open('report.json'))\n"
          "open('suggested.yaml', 'w').write(r['suggested_annotations']['yaml'])\n"
          "b = r['functions'][0]['breaks'][0]\n"
          "print(b['where'], b['callee'], b['records'])\n");
  Result extract = s.run("/usr/bin/python3 extract.py");
  ASSERT_EQ(extract.status, 0) << extract.err;
  EXPECT_TRUE(contains(extract.out, "breaks.py:20 zlib.crc32 [0, 1]")) << extract.out;

  // The suggestion, applied, leaves no graph break.
  Result again = s.run(capture + "--annotations " + s.path("suggested.yaml") + " --report " + s.path("after.txt") +
                       " breaks.py");
  ASSERT_EQ(again.status, 0) << again.err;
  std::string after = s.read("after.txt");
  EXPECT_TRUE(contains(after, "record 0: one graph of 3 operators")) << after;
  EXPECT_FALSE(contains(after, "graph breaks")) << after;
}

// --explain says which record a new one joined as a dynamic record, or
// where the program used a size (and so kept its sizes).
TEST(Explain, DynamicRecordsSayWhatTheyJoinedAndWhyNot) {
  Scratch s("explain_dynamic");
  std::string program = sourceDir() + "/tests/e2e/programs/variants.py";
  Result joined = s.run("magpy-capture -q --explain -o batches.mgp " + program + " batches");
  ASSERT_EQ(joined.status, 0) << joined.err;
  s.write("reads.py",
          "import torch, magpy\n"
          "f = magpy.compile(lambda x: x * 2 if x.shape[0] in (2, 5) else x)\n"
          "f(torch.ones(2, 3)); f(torch.ones(4, 3))\n");
  Result kept = s.run("magpy-capture -q --explain reads.py");
  ASSERT_EQ(kept.status, 0) << kept.err;
  std::string text = joined.err + kept.err;
  EXPECT_EQ(text, golden("explain_dynamic.txt", text));
}

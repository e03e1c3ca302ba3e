#include <gtest/gtest.h>

#include <ATen/ops/allclose.h>
#include <ATen/ops/tensor.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "magpy/interop/fx.h"
#include "magpy/replay/value_files.h"
#include "magpy/support/error.h"
#include "sample.h"

using namespace magpy;

namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::filesystem::path scratch(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("magpy_fx_test_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace

TEST(FxExport, WritesGraphBuilderAndData) {
  auto dir = scratch("writes");
  auto summary = interop::writeFxExport(sample::sampleFile(), {}, (dir / "graph.py").string());
  EXPECT_EQ(summary.dataPath, (dir / "graph.pt").string());
  EXPECT_EQ(summary.operators, 3u);
  EXPECT_EQ(summary.tensors, 1u);
  EXPECT_EQ(summary.example, "the inputs of logged call 0");
  std::string py = slurp(dir / "graph.py");
  for (const char* line : {"arg0 = graph.placeholder('arg0')", "w = graph.get_attr('w')",
                           "mul = call('mul', torch.ops.aten.mul, (arg0, w))",
                           "relu = call('relu', torch.ops.aten.relu, (mul,))",
                           "mul_1 = call('mul_1', torch.ops.aten.mul, (relu, 1.0))", "graph.output((mul_1,))"})
    EXPECT_NE(py.find(line), std::string::npos) << line << "\n" << py;

  replay::Value data = replay::loadValueFile(summary.dataPath);
  ASSERT_EQ(data.kind, replay::Value::Kind::Dict);
  const replay::Value& inputs = *data.heap->item(record::Atom::string("inputs"));
  const replay::Value& outputs = *data.heap->item(record::Atom::string("outputs"));
  ASSERT_EQ(inputs.heap->items.size(), 1u);
  EXPECT_TRUE(at::allclose(inputs.heap->items[0].tensor, at::tensor({0.5f, 1.0f})));
  ASSERT_EQ(outputs.heap->items.size(), 1u);
  EXPECT_TRUE(at::allclose(outputs.heap->items[0].tensor, at::tensor({0.75f, 0.0f})));
}

// Names from a record reach the exported Python escaped: a newline or a
// quote in a script, function or node name ends no comment and no string.
TEST(FxExport, NamesFromTheRecordStayInert) {
  auto dir = scratch("inert");
  record::RecordFile f = sample::sampleFile();
  const std::string evil = "x'\"\n__import__('os').system('touch pwned')#\r\x1b[2J";
  f.script = evil;
  f.functions[0].name = "m." + evil;
  for (auto& n : f.functions[0].records[0].graph.nodes)
    if (n.kind != record::NodeKind::Output) n.name += evil;
  std::string path = (dir / "graph.py").string();
  interop::writeFxExport(f, {}, path);
  std::string check =
      "/usr/bin/python3 -c \"import ast, sys; t = ast.parse(open(sys.argv[1]).read()); "
      "sys.exit(any(isinstance(n, ast.Name) and n.id == '__import__' for n in ast.walk(t)))\" " + path;
  EXPECT_EQ(std::system(check.c_str()), 0) << slurp(path);
}

TEST(FxExport, KeywordOnlyArgumentsAreKeywords) {
  auto dir = scratch("kwargs");
  record::RecordFile f = sample::sampleFile();
  auto& mul = f.functions[0].records[0].graph.nodes[2];
  mul.target = "aten::add";  // add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1)
  mul.args.push_back(record::Arg::integer(2));
  interop::writeFxExport(f, {}, (dir / "graph.py").string());
  std::string py = slurp(dir / "graph.py");
  EXPECT_NE(py.find("mul = call('mul', torch.ops.aten.add, (arg0, w), {'alpha': 2})"), std::string::npos) << py;
}

TEST(FxExport, RefusesWhatItCannotExport) {
  auto dir = scratch("refuses");
  std::string out = (dir / "graph.py").string();
  record::RecordFile unknown = sample::sampleFile();
  unknown.functions[0].records[0].graph.nodes[3].target = "aten::no_such_op";
  try {
    interop::writeFxExport(unknown, {}, out);
    FAIL() << "exported an unknown operator";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node %relu runs aten::no_such_op, which this libtorch"), std::string::npos)
        << e.what();
  }
  record::RecordFile broken = sample::sampleFile();
  broken.functions[0].records[0].breaks.push_back({"sample.py:9", "Net.forward", "CALL", "print is native code", ""});
  EXPECT_THROW(interop::writeFxExport(broken, {}, out), Error);
  interop::FxExportOptions missing;
  missing.record = 3;
  EXPECT_THROW(interop::writeFxExport(sample::sampleFile(), missing, out), Error);
  EXPECT_FALSE(std::filesystem::exists(out));
}

#include <gtest/gtest.h>
#include <algorithm>
#include <vector>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include "magpy/record/format.h"
#include "magpy/record/graph_utils.h"
#include "magpy/record/text.h"
#include "magpy/support/error.h"
#include "magpy/support/hash.h"
#include "sample.h"

using namespace magpy;
using namespace magpy::record;

namespace {

std::string errorOf(const std::string& bytes) {
  try {
    decode(bytes, "x.mgp");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

// The content hash is part of the format (since version 16): fixed values for a
// short run and a run that goes through the four lanes, and every byte of
// each lane and of the tail counts.
TEST(Format, ContentHashIsFixedAndReadsEveryByte) {
  unsigned char bytes[100];
  for (int i = 0; i < 100; ++i) bytes[i] = static_cast<unsigned char>(i * 7 + 1);
  EXPECT_EQ(magpy::hexDigest(magpy::hashBytes(bytes, 100)), "abcd1450c1914d20");
  EXPECT_EQ(magpy::hexDigest(magpy::hashBytes(bytes, 8)), "124a857c0f9c5f58");
  uint64_t whole = magpy::hashBytes(bytes, 100);
  for (int i : {0, 8, 16, 24, 31, 32, 63, 64, 70, 99}) {
    bytes[i] ^= 1;
    EXPECT_NE(magpy::hashBytes(bytes, 100), whole) << "byte " << i;
    bytes[i] ^= 1;
  }
}

// A record body is hashed as it is written, in pieces of any size.
TEST(Format, ContentHashOfPiecesIsTheHashOfTheWhole) {
  std::vector<unsigned char> bytes(300);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 13 + 5);
  for (size_t size : {0, 1, 7, 8, 31, 32, 63, 64, 65, 95, 96, 100, 300})
    for (size_t piece : {1, 3, 8, 31, 32, 33, 64, 500}) {
      magpy::ContentHasher h;
      for (size_t at = 0; at < size; at += piece) h.update(bytes.data() + at, std::min(piece, size - at));
      EXPECT_EQ(h.digest(), magpy::hashBytes(bytes.data(), size)) << size << " bytes in pieces of " << piece;
    }
}

TEST(Format, RoundTripKeepsEverything) {
  RecordFile f = sample::sampleFile();
  RecordFile back = decode(encode(f));
  EXPECT_EQ(printCanonical(back), printCanonical(f));
  EXPECT_EQ(encode(back), encode(f));
  ASSERT_EQ(back.functions.size(), 1u);
  EXPECT_EQ(back.functions[0].records[0].graph.nodes[4].args[1].kind, Arg::Kind::WrappedScalar);
  EXPECT_EQ(back.blobs[0].bytes, f.blobs[0].bytes);
  EXPECT_EQ(back.env, f.env);
}

// A logged update that removes what its path names (del G['scale'])
// round trips and prints as a removal; one that removes a root or comes
// with a value is refused.
TEST(Format, RemovalUpdatesRoundTripAndAreValidated) {
  RecordFile f = sample::sampleFile();
  StateUpdate removal;
  removal.path = parsePath("G['scale']");
  removal.how = StateUpdate::How::Remove;
  f.calls[0].updates.push_back(removal);
  RecordFile back = decode(encode(f));
  ASSERT_EQ(back.calls[0].updates.size(), 1u);
  EXPECT_EQ(back.calls[0].updates[0].how, StateUpdate::How::Remove);
  EXPECT_TRUE(contains(printCanonical(back), "removed before the call: G['scale']")) << printCanonical(back);

  RecordFile withValue = f;
  withValue.calls[0].updates[0].value = Value::ofAtom(Atom::integer(3));
  EXPECT_TRUE(contains(errorOf(encode(withValue)), "a state update removes G['scale'], which is a root or comes with a value"))
      << errorOf(encode(withValue));
  RecordFile root = f;
  root.calls[0].updates[0].path.steps.clear();
  EXPECT_TRUE(contains(errorOf(encode(root)), "which is a root")) << errorOf(encode(root));
}

// An update that changes a list, dict or tensor in place round trips and
// prints as such; one whose value is none of them is refused.
TEST(Format, InPlaceUpdatesRoundTripAndAreValidated) {
  RecordFile f = sample::sampleFile();
  StateUpdate refill;
  refill.path = parsePath("G['table']");
  refill.how = StateUpdate::How::Refill;
  refill.value.kind = Value::Kind::Dict;
  refill.value.keys = {Atom::string("a")};
  refill.value.items = {Value::ofAtom(Atom::integer(2))};
  f.calls[0].updates.push_back(refill);
  RecordFile back = decode(encode(f));
  ASSERT_EQ(back.calls[0].updates.size(), 1u);
  EXPECT_EQ(back.calls[0].updates[0].how, StateUpdate::How::Refill);
  EXPECT_TRUE(contains(printCanonical(back), "changed in place before the call: G['table']")) << printCanonical(back);

  f.calls[0].updates[0].value = Value::ofAtom(Atom::integer(3));
  EXPECT_TRUE(contains(errorOf(encode(f)), "changes G['table'] in place to something not a list, dict or tensor"))
      << errorOf(encode(f));
}

TEST(Format, LiftedNumbersRoundTripAndPrintTheirTypes) {
  RecordFile f = sample::sampleFile();
  Graph& g = f.functions[0].records[0].graph;
  Node steps;
  steps.kind = NodeKind::GetAttr;
  steps.name = steps.target = "steps";
  steps.source = AccessPath::global("", "STEPS");
  steps.number = "int";
  steps.seen = Atom::integer(3);
  Node next = sample::opNode("add_steps", "operator.add", "", {Arg::node(int64_t(g.nodes.size()) - 1), Arg::integer(1)});
  next.number = "int";
  g.nodes.insert(g.nodes.end() - 1, steps);
  next.args[0] = Arg::node(int64_t(g.nodes.size()) - 2);
  g.nodes.insert(g.nodes.end() - 1, next);
  g.nodes.back().args.push_back(Arg::node(int64_t(g.nodes.size()) - 2));
  RecordFile back = decode(encode(f));
  EXPECT_EQ(printCanonical(back), printCanonical(f));
  std::string text = printGraph(back.functions[0].records[0].graph);
  EXPECT_TRUE(contains(text, "%steps = get_attr G['STEPS']  : int (3 at capture)")) << text;
  EXPECT_TRUE(contains(text, "%add_steps = operator.add(%steps, 1)  : int")) << text;
}

TEST(Format, GradModeRegionsRoundTripAndPrint) {
  RecordFile f = sample::sampleFile();
  f.functions[0].records[0].graph.nodes[3].grad = GradMode::Off;
  f.functions[0].records[0].graph.nodes[4].grad = GradMode::On;
  RecordFile back = decode(encode(f));
  EXPECT_EQ(back.functions[0].records[0].graph.nodes[3].grad, GradMode::Off);
  EXPECT_EQ(back.functions[0].records[0].graph.nodes[4].grad, GradMode::On);
  std::string text = printGraph(back.functions[0].records[0].graph);
  EXPECT_TRUE(contains(text, "%relu = aten::relu(%mul)  : float32[2]  [no_grad]  # sample.py:7")) << text;
  EXPECT_TRUE(contains(text, "[enable_grad]")) << text;

  // Only an ATen operator runs in a region.
  f.functions[0].records[0].graph.nodes[1].grad = GradMode::Off;
  EXPECT_TRUE(contains(errorOf(encode(f)), "node w has a grad mode region but is no ATen operator")) << errorOf(encode(f));
}

// A check (what the program read into Python) is a node with no result;
// the validator holds it to its shape.
TEST(Format, ChecksRoundTripAndAreValidated) {
  RecordFile f = sample::sampleFile();
  Graph& g = f.functions[0].records[0].graph;
  Arg sizes;
  sizes.kind = Arg::Kind::IntList;
  sizes.ints = {2};
  g.nodes.insert(g.nodes.begin() + 3, sample::opNode("expect_sizes", kExpectSizes, "", {Arg::node(2), sizes}));
  for (auto& n : g.nodes) record::forEachNodeArg(n, [](int64_t& j) { j += j >= 3; });
  RecordFile back = decode(encode(f));
  EXPECT_EQ(back.functions[0].records[0].graph.nodes[3].target, kExpectSizes);
  EXPECT_TRUE(contains(printGraph(back.functions[0].records[0].graph), "magpy.expect_sizes(%mul, [2])"))
      << printGraph(back.functions[0].records[0].graph);
  EXPECT_FALSE(back.functions[0].records[0].graph.nodes[3].isOp());

  g.nodes[3].args[1] = Arg::integer(2);
  EXPECT_TRUE(contains(errorOf(encode(f)), "node expect_sizes is a check but does not take (value, sizes)"))
      << errorOf(encode(f));
  g.nodes[3].target = kExpectEqual;
  g.nodes[3].args[1] = Arg::node(1);
  g.nodes[3].outputs.push_back(g.nodes[2].outputs[0]);
  EXPECT_TRUE(contains(errorOf(encode(f)), "does not take (value, constant) and return nothing")) << errorOf(encode(f));
}

TEST(Format, ForwardOnlyRecordsRoundTripAndSayWhy) {
  RecordFile f = sample::sampleFile();
  f.functions[0].records[0].forwardOnly = "custom autograd Function Mish: its backward needs Python";
  RecordFile back = decode(encode(f));
  EXPECT_EQ(back.functions[0].records[0].forwardOnly, f.functions[0].records[0].forwardOnly);
  std::string text = printCanonical(back);
  EXPECT_TRUE(contains(text, "forward only (the JIT runs its calls as Python; replay without autograd serves them): "
                             "custom autograd Function Mish")) << text;
}

// A lifted number's guard is a kind of its own in memory and, in the file,
// the type check it always was: files from before read the same.
TEST(Format, NumberChecksAreWrittenAsTypeChecks) {
  RecordFile f = sample::sampleFile();
  Guard lifted{AccessPath::global("", "STEPS"), numberCheck(NumberType::Float)};
  Guard typed = lifted;
  typed.check = Check{};
  typed.check.kind = Check::Kind::Type;
  typed.check.s = "builtins.float";
  f.functions[0].records[0].guards.push_back(lifted);
  RecordFile asType = f;
  asType.functions[0].records[0].guards.back() = typed;
  EXPECT_EQ(encode(f), encode(asType));
  RecordFile read = decode(encode(asType));
  const Guard& back = read.functions[0].records[0].guards.back();
  EXPECT_EQ(back.check.kind, Check::Kind::Number);
  EXPECT_EQ(back.check.number, NumberType::Float);
  EXPECT_EQ(back, lifted);
  EXPECT_EQ(describe(back.check), "type builtins.float");
}

// Names reach terminals and comments in exported code: the writer escapes
// control characters in them, and the reader refuses a name that has any.
TEST(Format, NamesAreWrittenWithoutControlCharacters) {
  RecordFile f = sample::sampleFile();
  f.functions[0].name = "m.f\n\x1b[2J";
  f.functions[0].records[0].graph.nodes[1].name = "w\r";
  RecordFile back = decode(encode(f));
  EXPECT_EQ(back.functions[0].name, "m.f\\n\\x1b[2J");
  EXPECT_EQ(back.functions[0].records[0].graph.nodes[1].name, "w\\r");

  std::string body = encodeBody(sample::sampleFile());
  std::string name = sample::sampleFile().functions[0].name;
  size_t at = body.find(name);
  ASSERT_NE(at, std::string::npos);
  body[at + 1] = '\n';
  EXPECT_TRUE(contains(errorOf(wrapBody(body)), "holds control characters")) << errorOf(wrapBody(body));
}

TEST(Format, EncodingIsDeterministic) {
  EXPECT_EQ(encode(sample::sampleFile()), encode(sample::sampleFile()));
}

TEST(Format, RejectsWrongMagic) {
  EXPECT_TRUE(contains(errorOf("not a record at all, clearly"), "not a magpy record")) << errorOf("nope");
  EXPECT_TRUE(contains(errorOf(""), "not a magpy record"));
}

TEST(Format, RejectsTruncatedFiles) {
  std::string bytes = encode(sample::sampleFile());
  EXPECT_TRUE(contains(errorOf(bytes.substr(0, 20)), "truncated")) << errorOf(bytes.substr(0, 20));
  EXPECT_TRUE(contains(errorOf(bytes.substr(0, bytes.size() - 5)), "truncated"));
}

TEST(Format, RejectsOtherVersions) {
  std::string bytes = encode(sample::sampleFile());
  bytes[8] = char(kFormatVersion + 1);
  std::string e = errorOf(bytes);
  EXPECT_TRUE(contains(e, "format " + std::to_string(kFormatVersion + 1))) << e;
  EXPECT_TRUE(contains(e, "newer magpy")) << e;
  bytes[8] = char(kFormatVersion - 1);
  e = errorOf(bytes);
  EXPECT_TRUE(contains(e, "no longer reads; capture it again")) << e;
}

TEST(Format, RejectsCorruptedBytes) {
  std::string bytes = encode(sample::sampleFile());
  for (size_t at : {size_t(41), bytes.size() / 2, bytes.size() - 3}) {
    std::string bad = bytes;
    bad[at] = char(bad[at] ^ 0x5a);
    std::string e = errorOf(bad);
    EXPECT_TRUE(contains(e, "corrupted")) << "byte " << at << ": " << e;
  }
  EXPECT_TRUE(contains(errorOf(bytes + "x"), "unexpected bytes after its end"));
}

TEST(Format, RejectsDanglingReferences) {
  RecordFile f = sample::sampleFile();
  f.functions[0].records[0].graph.nodes[2].args[0] = Arg::node(9);
  EXPECT_TRUE(contains(errorOf(encode(f)), "not defined before it")) << errorOf(encode(f));
  RecordFile g = sample::sampleFile();
  g.calls[0].result.blob = 7;
  EXPECT_TRUE(contains(errorOf(encode(g)), "missing blob 7")) << errorOf(encode(g));
  RecordFile h = sample::sampleFile();
  h.blobs[1].bytes[0] ^= 1;
  EXPECT_TRUE(contains(errorOf(encode(h)), "content hash")) << errorOf(encode(h));
}

TEST(Format, FilesAreWrittenAtomically) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / "magpy_format_test";
  fs::create_directories(dir);
  fs::path file = dir / "r.mgp";
  writeRecordFile(sample::sampleFile(), file.string());
  EXPECT_EQ(printCanonical(readRecordFile(file.string())), printCanonical(sample::sampleFile()));
  for (auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().filename(), "r.mgp");  // no temporary left behind
  EXPECT_THROW(writeRecordFile(sample::sampleFile(), (dir / "missing" / "r.mgp").string()), Error);
  fs::remove_all(dir);
}

// A file is written as its body is made: tensor bytes past the writer's
// buffer and many compressed blocks give the same bytes as encode().
TEST(Format, StreamedFileHasTheBytesOfEncode) {
  namespace fs = std::filesystem;
  RecordFile f = sample::sampleFile();
  std::vector<float> values(900000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(i % 977) * 0.25f - float(i % 13);
  f.blobs.push_back(sample::floatBlob({int64_t(values.size())}, values));
  fs::path file = fs::temp_directory_path() / ("magpy_streamed_" + std::to_string(::getpid()) + ".mgp");
  writeRecordFile(f, file.string());
  std::ifstream in(file, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  fs::remove(file);
  EXPECT_EQ(bytes, encode(f));
  EXPECT_EQ(decode(bytes).blobs.back().bytes, f.blobs.back().bytes);
}

TEST(Format, MissingFileIsAClearError) {
  try {
    readRecordFile("/nonexistent/x.mgp");
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "no such file")) << e.what();
  }
}

// A result size that is the value of a graph node (x.view(n // 2, -1)),
// and a predicate on sizes: both round trip; the validator holds node
// sizes to earlier int nodes and predicates to one operand.
TEST(Format, SizesOfGraphValuesAndPredicatesRoundTripAndAreValidated) {
  RecordFile f = sample::sampleFile();
  Graph& g = f.functions[0].records[0].graph;
  Node size = sample::opNode("size", "aten::size", "int", {Arg::node(0), Arg::integer(0)});
  Node half = sample::opNode("floordiv", "operator.floordiv", "", {Arg::node(2), Arg::integer(2)});
  half.number = "int";
  half.seen = Atom::integer(1);
  Node gt = sample::opNode("gt", "operator.gt", "", {Arg::node(2), Arg::integer(1)});
  gt.number = "bool";
  gt.seen = Atom::boolean(true);
  Node check = sample::opNode("expect_true", kExpectTrue, "", {Arg::node(4)});
  g.nodes.insert(g.nodes.begin() + 2, {size, half, gt, check});
  for (size_t i = 6; i < g.nodes.size(); ++i) record::forEachNodeArg(g.nodes[i], [](int64_t& j) { j += j >= 2 ? 4 : 0; });
  TensorMeta& m = g.nodes[6].outputs[0];  // %mul
  m.sym = {SymDim{}};
  m.sym[0].node = 3;
  m.sym[0].offset = 0;
  RecordFile back = decode(encode(f));
  const Graph& h = back.functions[0].records[0].graph;
  EXPECT_EQ(h.nodes[6].outputs[0].sym[0].node, 3);
  EXPECT_TRUE(contains(printGraph(h), "magpy.expect_true(%gt)")) << printGraph(h);
  EXPECT_TRUE(contains(printGraph(h), "float32[%floordiv]")) << printGraph(h);

  m.sym[0].node = 7;  // a later node
  EXPECT_TRUE(contains(errorOf(encode(f)), "which names no int the graph computes before it")) << errorOf(encode(f));
  m.sym[0].node = 4;  // a bool
  EXPECT_TRUE(contains(errorOf(encode(f)), "which names no int the graph computes before it")) << errorOf(encode(f));
  m.sym[0].node = 3;
  m.sym[0].offset = 5;
  EXPECT_TRUE(contains(errorOf(encode(f)), "neither a node's value nor a symbol's")) << errorOf(encode(f));
  m.sym[0].offset = 0;
  g.nodes[5].args.push_back(Arg::node(3));
  EXPECT_TRUE(contains(errorOf(encode(f)), "does not take (comparison)")) << errorOf(encode(f));
  g.nodes[5].args.pop_back();
  g.nodes[3].args.pop_back();  // floordiv of one operand
  EXPECT_TRUE(contains(errorOf(encode(f)), "neither a number input, number arithmetic")) << errorOf(encode(f));
}

// The writer refuses f with its first record's graph changed by `change`,
// saying `why`.
void expectRejected(const RecordFile& f, const std::function<void(Graph&)>& change, const std::string& why) {
  RecordFile bad = f;
  change(bad.functions[0].records[0].graph);
  std::string e = errorOf(encode(bad));
  EXPECT_TRUE(contains(e, why)) << e;
}

// A loop region round trips and prints indented; the validator holds
// regions to their shape: carried values right after the loop, nothing
// after it reads its body but through its end, bounded trip counts and
// nesting, and no region left open.
TEST(Format, LoopRegionsRoundTripAndAreValidated) {
  RecordFile f = sample::sampleFile();
  Graph& g = f.functions[0].records[0].graph;
  g = sample::loopGraph();
  RecordFile back = decode(encode(f));
  std::string text = printGraph(back.functions[0].records[0].graph);
  EXPECT_TRUE(contains(text, "  %loop = magpy.loop(%size, [%h0])  : int\n    %h = magpy.carried(%loop, 0)")) << text;
  EXPECT_TRUE(contains(text, "\n  %loop_end = magpy.loop_end(%loop, [%add], [%mul])")) << text;

  auto rejects = [&](const std::function<void(Graph&)>& change, const std::string& why) { expectRejected(f, change, why); };
  rejects([](Graph& g) { g.nodes.back().args[0] = Arg::node(6); }, "uses %add of a loop or branch side that has ended");
  rejects([](Graph& g) { g.nodes[11].args[0] = Arg::node(8); }, "only getitem takes apart");
  rejects([](Graph& g) { g.nodes[10].args[1] = Arg::integer(2); }, "takes a value the region does not give");
  rejects([](Graph& g) { std::swap(g.nodes[4], g.nodes[5]); }, "carried values are all declared");
  rejects([](Graph& g) { g.nodes[3].args[0] = Arg::integer(kMaxTripCount + 1); }, "runs " + std::to_string(kMaxTripCount + 1) + " times");
  rejects([](Graph& g) { g.nodes[3].args[0] = Arg::node(1); }, "neither an int nor an int node");
  rejects([](Graph& g) { g.nodes[8].args[1].ints = {}; }, "one next value per carried value");
  rejects([](Graph& g) { g.nodes.erase(g.nodes.begin() + 8, g.nodes.end() - 1); g.nodes.back().args = {}; },
          "the output is inside a loop");
  rejects([](Graph& g) {
    Node inner = g.nodes[3];
    inner.args[0] = Arg::integer(2);
    inner.args[1].ints = {};
    for (int k = 0; k < kMaxLoopNesting; ++k) g.nodes.insert(g.nodes.begin() + 3, inner);
  }, "nests loops deeper than 4");
}

// A branch round trips and prints its sides indented; the validator holds
// it to its shape: a side's values are seen only through the branch's end,
// the else side does not read the then side, an unseen side is empty, seen
// sides give as many values, and branches nest as deep as loops.
TEST(Format, BranchesRoundTripAndAreValidated) {
  RecordFile f = sample::sampleFile();
  Graph& g = f.functions[0].records[0].graph;
  g = sample::branchGraph();
  RecordFile back = decode(encode(f));
  std::string text = printGraph(back.functions[0].records[0].graph);
  EXPECT_TRUE(contains(text, "  %if = magpy.if(%keep, True, True, [2])\n    %relu = aten::relu(%x)")) << text;
  EXPECT_TRUE(contains(text, "\n  %if_else = magpy.if_else(%if, [%mul])\n    %neg = aten::neg(%x)")) << text;
  EXPECT_TRUE(contains(text, "\n  %if_end = magpy.if_end(%if, [%neg])\n  %getitem = getitem(%if_end, 0)")) << text;

  auto rejects = [&](const std::function<void(Graph&)>& change, const std::string& why) { expectRejected(f, change, why); };
  rejects([](Graph& g) { g.nodes[9].args[0] = Arg::node(4); }, "uses %mul of a loop or branch side that has ended");
  rejects([](Graph& g) { g.nodes[6].args[0] = Arg::node(3); }, "uses %relu of a loop or branch side that has ended");
  rejects([](Graph& g) { g.nodes[9].args[0] = Arg::node(7); }, "only getitem takes apart");
  rejects([](Graph& g) { g.nodes[8].args[1] = Arg::integer(1); }, "takes a value the region does not give");
  rejects([](Graph& g) { g.nodes[3].args[0] = Arg::node(2); }, "uses the branch marker %if");
  rejects([](Graph& g) { g.nodes[2].args[2] = Arg::boolean(false); }, "ends a side capture never saw");
  rejects([](Graph& g) { g.nodes[2].args[1] = g.nodes[2].args[2] = Arg::boolean(false); }, "with a side seen");
  rejects([](Graph& g) { g.nodes[7].args[1].ints = {6, 0}; }, "gives 2 values for 1 places");
  rejects([](Graph& g) { g.nodes[2].args[3].ints = {2, 1}; }, "[increasing places]");
  rejects([](Graph& g) { g.nodes[5].args[1].ints = {1000}; }, "not a tensor computed before it");
  rejects([](Graph& g) { g.nodes.erase(g.nodes.begin() + 7, g.nodes.end() - 1); g.nodes.back().args = {}; },
          "the output is inside a loop or a branch");
  rejects([](Graph& g) { std::swap(g.nodes[5], g.nodes[7]); }, "not the innermost region open");
  rejects([](Graph& g) {
    Node inner = g.nodes[2];
    inner.args[1] = Arg::boolean(false);  // then unseen: an empty side, its if_else right after it
    for (int k = 0; k < kMaxLoopNesting; ++k) g.nodes.insert(g.nodes.begin() + 3, inner);
  }, "nests loops and branches deeper than 4");
}

// A backward node round trips; the validator holds it to its shape: a
// root, its gradient or None, distinct leaves that are graph inputs
// requiring grad, retain_graph, one gradient per leaf, outside regions.
TEST(Format, BackwardNodesRoundTripAndAreValidated) {
  RecordFile f = sample::sampleFile();
  Graph& g = f.functions[0].records[0].graph;
  g = sample::backwardGraph();
  RecordFile back = decode(encode(f));
  std::string text = printGraph(back.functions[0].records[0].graph);
  EXPECT_TRUE(contains(text, "  %backward = magpy.backward(%sum, None, [%w], False)  : float32[3]\n")) << text;
  EXPECT_FALSE(contains(text, "outside the operator policy")) << text;

  auto rejects = [&](const std::function<void(Graph&)>& change, const std::string& why) { expectRejected(f, change, why); };
  const std::string shape = "does not take (root, gradient or None, [leaves], retain_graph)";
  rejects([](Graph& g) { g.nodes[4].outputs.push_back(g.nodes[4].outputs[0]); }, shape);
  rejects([](Graph& g) { g.nodes[4].args[3] = Arg::integer(0); }, shape);
  rejects([](Graph& g) { g.nodes[4].args[0] = Arg::node(5); }, shape);
  rejects([](Graph& g) { g.nodes[4].args[2].ints = {2}; }, "not a distinct graph input requiring grad");
  rejects([](Graph& g) { g.nodes[4].args[2].ints = {1}; }, "not a distinct graph input requiring grad");
  rejects([](Graph& g) {
    g.nodes[4].args[2].ints = {0, 0};
    g.nodes[4].outputs.push_back(g.nodes[4].outputs[0]);
  }, "not a distinct graph input requiring grad");
}

// A state tensor may carry its .grad, a tensor like it, and nothing else.
TEST(Format, StateTensorsCarryTheirGradients) {
  RecordFile f = sample::sampleFile();
  Value& w = f.functions[0].self.items[0];
  ASSERT_EQ(w.kind, Value::Kind::Tensor);
  w.names = {"grad"};
  w.items = {sample::tensorValue(1, w.meta)};
  RecordFile back = decode(encode(f));
  EXPECT_EQ(back.functions[0].self.items[0].names, std::vector<std::string>{"grad"});
  EXPECT_TRUE(contains(printCanonical(back), ".grad = tensor float32[2]")) << printCanonical(back);
  f.functions[0].self.items[0].names = {"data"};
  EXPECT_THROW(decode(encode(f)), Error);
  f.functions[0].self.items[0].names = {"grad"};
  f.functions[0].self.items[0].items[0].meta.shape = {1};
  EXPECT_THROW(decode(encode(f)), Error);
}

// A dict keyed by a tensor of the same tree (optimizer state): the key is
// the tensor's id, defined before or after the dict.
TEST(Format, DictKeysThatAreTensorsRoundTripAndAreValidated) {
  RecordFile f = sample::sampleFile();
  Value& self = f.functions[0].self;
  self.items[0].id = 1;
  Value state;
  state.kind = Value::Kind::Dict;
  state.type = "collections.defaultdict";
  state.atom = Atom::string("builtins.dict");
  state.keys = {Atom::none(), Atom::string("n")};
  state.keyRefs = {1, 0};
  state.items = {Value::ofAtom(Atom::integer(3)), Value::ofAtom(Atom::integer(4))};
  self.names.insert(self.names.begin(), "state");  // before the tensor it is keyed by
  self.items.insert(self.items.begin(), state);
  Effect e;
  e.kind = Effect::Kind::SetObjectItem;
  e.target = AccessPath::self().attr("state");
  e.keyPath = AccessPath::self().attr("w");
  e.value = ValueExpr::constant(Atom::integer(5));
  f.functions[0].records[0].mock.effects.push_back(e);
  RecordFile back = decode(encode(f));
  EXPECT_EQ(back.functions[0].self.items[0].keyRefs, (std::vector<uint32_t>{1, 0}));
  EXPECT_EQ(back.functions[0].records[0].mock.effects.back().keyPath, AccessPath::self().attr("w"));
  std::string text = printCanonical(back);
  EXPECT_TRUE(contains(text, "self.state[@1] = 3")) << text;
  EXPECT_TRUE(contains(text, "self.state[@self.w] = 5")) << text;

  auto refused = [&](auto change) {
    RecordFile bad = f;
    change(bad.functions[0].self.items[0]);
    EXPECT_THROW(decode(encode(bad)), Error);
  };
  refused([](Value& d) { d.keyRefs = {2, 0}; });     // no object #2
  refused([](Value& d) { d.keyRefs = {1}; });        // not one per key
  refused([](Value& d) { d.keyRefs = {1, 1}; });     // one key twice
  refused([](Value& d) { d.keys[0] = Atom::integer(1); });  // an atom beside it
  RecordFile notTensor = f;
  notTensor.functions[0].self.id = 2;
  notTensor.functions[0].self.items[0].keyRefs = {2, 0};  // the object holding the dict: no tensor
  EXPECT_THROW(decode(encode(notTensor)), Error);
}

// A mock's Extend round-trips and prints as a call; one whose value is not
// a list display is refused.
TEST(Format, ExtendRoundTripsAndIsValidated) {
  RecordFile f = sample::sampleFile();
  Effect e;
  e.kind = Effect::Kind::Extend;
  e.target = AccessPath::self().attr("log");
  e.value.kind = ValueExpr::Kind::List;
  e.value.items = {ValueExpr::constant(Atom::integer(5))};
  f.functions[0].records[0].mock.effects.push_back(e);
  RecordFile back = decode(encode(f));
  EXPECT_EQ(back.functions[0].records[0].mock.effects.back().kind, Effect::Kind::Extend);
  std::string text = printCanonical(back);
  EXPECT_TRUE(contains(text, "self.log.extend([5])")) << text;
  f.functions[0].records[0].mock.effects.back().value = ValueExpr::constant(Atom::integer(5));
  try {
    decode(encode(f));
    FAIL();
  } catch (const Error& err) {
    EXPECT_TRUE(contains(err.what(), "the mock extends self.log with a 5, not a list")) << err.what();
  }
}

// Without the call log, its tensors go; references to the others follow
// them to their new places.
TEST(Format, UnusedBlobsAreDropped) {
  RecordFile f = sample::sampleFile();
  f.functions[0].self.items[0].blob = 2;
  std::swap(f.blobs[0], f.blobs[2]);  // the state's tensor last
  f.calls.clear();
  dropUnusedBlobs(f);
  ASSERT_EQ(f.blobs.size(), 1u);
  EXPECT_EQ(f.functions[0].self.items[0].blob, 0u);
  EXPECT_EQ(f.blobs[0].bytes, sample::sampleFile().blobs[0].bytes);
  EXPECT_NO_THROW(decode(encode(f)));
}

// A scheduler's wrapper holds a weak reference to the optimizer that holds
// the wrapper: a Ref to an object holding it is allowed there only
// (replay holds it weakly: state_access_test.cpp).
TEST(Format, OnlyAWeakReferenceMayReferToAnObjectHoldingIt) {
  RecordFile f = sample::sampleFile();
  Value& self = f.functions[0].self;
  self.id = 1;
  Value back;
  back.kind = Value::Kind::Ref;
  back.id = 1;
  Value ref;
  ref.kind = Value::Kind::Object;
  ref.type = "builtins.weakref";
  ref.names = {kWeakReferent};
  ref.items = {back};
  self.names.push_back("_ref");
  self.items.push_back(ref);
  EXPECT_EQ(errorOf(encode(f)), "");
  self.items.back().names = {"target"};  // any other attribute: a cycle
  EXPECT_TRUE(contains(errorOf(encode(f)), "contains itself")) << errorOf(encode(f));
}

// t.item() is an ATen operator that computes a number: one tensor operand,
// an int or float type and the value seen.
TEST(Format, ItemNodesAreValidated) {
  RecordFile f = sample::sampleFile();
  Graph& g = f.functions[0].records[0].graph;
  Node item = sample::opNode("item", kItem, "", {Arg::node(0)});
  item.number = "float";
  item.seen = Atom::floating(0.5);
  g.nodes.insert(g.nodes.end() - 1, item);
  RecordFile back = decode(encode(f));
  EXPECT_TRUE(contains(printGraph(back.functions[0].records[0].graph), "%item = aten::item(%arg0)  : float")) << printGraph(back.functions[0].records[0].graph);
  g.nodes[g.nodes.size() - 2].seen = Atom::integer(1);  // an int seen, a float said
  EXPECT_TRUE(contains(errorOf(encode(f)), "neither a number input, number arithmetic")) << errorOf(encode(f));
  g.nodes[g.nodes.size() - 2].seen = Atom::floating(0.5);
  g.nodes[g.nodes.size() - 2].args.push_back(Arg::node(0));
  EXPECT_TRUE(contains(errorOf(encode(f)), "neither a number input, number arithmetic")) << errorOf(encode(f));
}

// A float list holding numbers the graph computes: a node or -1 per entry,
// and a constant per entry; printed as a Python list.
TEST(Format, NumberListsRoundTripAndAreValidated) {
  RecordFile f = sample::sampleFile();
  Graph& g = f.functions[0].records[0].graph;
  Node item = sample::opNode("item", kItem, "", {Arg::node(0)});
  item.number = "float";
  item.seen = Atom::floating(0.5);
  Arg list;
  list.kind = Arg::Kind::NumberList;
  list.ints = {int64_t(g.nodes.size() - 1), -1};  // the item, inserted before the output
  list.floats = {0, 2.5};
  Node div = sample::opNode("_foreach_div_", "aten::_foreach_div_", "ScalarList",
                            {Arg{Arg::Kind::NodeList, 0, 0, "", {0, 0}, {}}, list});
  g.nodes.insert(g.nodes.end() - 1, {item, div});
  RecordFile back = decode(encode(f));
  std::string text = printGraph(back.functions[0].records[0].graph);
  EXPECT_TRUE(contains(text, "aten::_foreach_div_.ScalarList([%arg0, %arg0], [%item, 2.5])")) << text;
  Node& written = g.nodes[g.nodes.size() - 2];
  written.args[1].floats = {2.5};  // one constant for two entries
  EXPECT_TRUE(contains(errorOf(encode(f)), "number list whose nodes and constants differ")) << errorOf(encode(f));
  written.args[1].floats = {0, 2.5};
  written.args[1].ints = {int64_t(g.nodes.size()), -1};  // a node after it
  EXPECT_TRUE(contains(errorOf(encode(f)), "not defined before it")) << errorOf(encode(f));
}

TEST(Format, CollectivesRoundTripAndAreValidated) {
  RecordFile f = sample::sampleFile();
  Graph& g = f.functions[0].records[0].graph;
  Node reduce = sample::opNode("allreduce_", "c10d::allreduce_", "",
                               {Arg{Arg::Kind::NodeList, 0, 0, "", {0}, {}}, Arg{Arg::Kind::Group}, Arg::integer(0),
                                Arg::integer(-1)});
  reduce.outputs = {g.nodes[0].outputs.at(0)};
  g.nodes.insert(g.nodes.end() - 1, reduce);
  RecordFile back = decode(encode(f));
  std::string text = printGraph(back.functions[0].records[0].graph);
  EXPECT_TRUE(contains(text, "c10d::allreduce_([%arg0], process_group, 0, -1)")) << text;
  EXPECT_TRUE(hasCollectives(back.functions[0].records[0].graph));
  Node& written = g.nodes[g.nodes.size() - 2];
  written.args[2] = Arg::integer(1);  // AVG, which Gloo refuses: no record holds it
  EXPECT_TRUE(contains(errorOf(encode(f)), "does not take ([tensor], process group, reduce op, -1)")) << errorOf(encode(f));
  written.args[2] = Arg::integer(0);
  written.args[1] = Arg::integer(0);  // a group the record would name
  EXPECT_TRUE(contains(errorOf(encode(f)), "does not take ([tensor], process group")) << errorOf(encode(f));
}

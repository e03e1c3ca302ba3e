#include "magpy/interop/fx.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>

#include "magpy/record/format.h"
#include "magpy/record/graph_utils.h"
#include "magpy/record/text.h"
#include "magpy/replay/passes.h"
#include "magpy/replay/guards.h"
#include "magpy/replay/plan.h"
#include "magpy/replay/session.h"
#include "magpy/replay/state.h"
#include "magpy/replay/tensors.h"
#include "magpy/replay/value_files.h"
#include "magpy/support/error.h"
#include "magpy/support/strings.h"

namespace magpy::interop {
namespace {


using record::Arg;
using record::isIdentifier;
using record::Node;
using record::NodeKind;

std::string pyFloat(double f) {
  std::string s = formatDouble(f);
  return s == "nan" || s == "inf" || s == "-inf" ? "float(\"" + s + "\")" : s;
}

// torch.fx names state by its dotted path under the root module
// ("blocks.0.weight"); anything else (globals, list items, a tensor's
// .data read next to the tensor itself, which would make "w" both a
// tensor and a module) by the node.
std::string attrTarget(const Node& n, const record::Graph& g) {
  if (n.blob >= 0) return n.name;
  std::vector<std::string> parts(1);
  for (char c : n.target) {
    if (c == '.') parts.emplace_back();
    else parts.back() += c;
  }
  bool dotted = isIdentifier(parts[0]);
  for (size_t k = 1; k < parts.size(); ++k) dotted = dotted && !parts[k].empty() && isIdentifier("_" + parts[k]);
  auto nests = [](const std::string& outer, const std::string& inner) {
    return inner.size() > outer.size() && inner.compare(0, outer.size(), outer) == 0 && inner[outer.size()] == '.';
  };
  for (const Node& other : g.nodes) {
    bool getAttr = other.kind == NodeKind::GetAttr && other.blob < 0;
    if (getAttr && (nests(other.target, n.target) || nests(n.target, other.target))) dotted = false;
  }
  return dotted ? n.target : n.name;
}

const c10::FunctionSchema& schemaOf(const Node& n) {
  auto op = c10::Dispatcher::singleton().findSchema({n.target, n.overload});
  if (!op)
    throw Error("node %" + n.name + " runs " + n.opName() + ", which this libtorch (" + replay::libtorchVersion() +
                ") does not have; export with the torch the record was captured with");
  return op->schema();
}

// "aten::linear" -> "torch.ops.aten.linear": the packet, which TorchScript
// resolves to the overload the arguments select.
std::string packet(const std::string& target) {
  size_t colons = target.find("::");
  return "torch.ops." + target.substr(0, colons) + "." + target.substr(colons + 2);
}

class SourceWriter {
 public:
  // Each node's value is a variable of build(), named after the node; the
  // names build() itself binds or imports are not available.
  explicit SourceWriter(const record::Graph& g) : g_(g), names_({"call", "graph", "root", "data", "torch", "operator", "os"}) {
    for (auto& n : g.nodes) vars_.push_back(names_.create(n.name));
  }

  // A grad mode region is what Dynamo's graphs hold: calls of
  // torch._C._set_grad_enabled before its operators, and after them one
  // back to the mode the module was called in. Lines to run before node i.
  std::string switchBefore(size_t i) {
    const Node& n = g_.nodes[i];
    if (!n.isOp() && n.kind != NodeKind::Output) return "";
    record::GradMode want = n.kind == NodeKind::Output ? record::GradMode::Ambient : n.grad;
    if (want == mode_) return "";
    std::string out;
    if (entryMode_.empty()) {
      entryMode_ = names_.create("grad_enabled_at_entry");
      out += entryMode_ + " = call(" + quote(entryMode_) + ", torch.is_grad_enabled, ())\n    ";
    }
    mode_ = want;
    std::string to = want == record::GradMode::Ambient ? entryMode_ : want == record::GradMode::On ? "True" : "False";
    return out + "call(" + quote(names_.create("set_grad_enabled")) + ", torch._C._set_grad_enabled, (" + to + ",))\n    ";
  }

  std::string arg(const Arg& a) const {
    auto ref = [&](int64_t i) { return i < 0 ? std::string("None") : vars_[size_t(i)]; };
    auto list = [](std::vector<std::string> parts) { return "[" + join(parts, ", ") + "]"; };
    std::vector<std::string> parts;
    switch (a.kind) {
      case Arg::Kind::None: return "None";
      case Arg::Kind::Bool: return a.i ? "True" : "False";
      case Arg::Kind::Int: return std::to_string(a.i);
      case Arg::Kind::Float: return pyFloat(a.f);
      case Arg::Kind::Str: return quote(a.s);
      case Arg::Kind::Node: return ref(a.i);
      case Arg::Kind::IntList: return formatInts(a.ints);
      case Arg::Kind::FloatList:
        for (double f : a.floats) parts.push_back(pyFloat(f));
        return list(parts);
      case Arg::Kind::BoolList:
        for (auto b : a.ints) parts.push_back(b ? "True" : "False");
        return list(parts);
      case Arg::Kind::NodeList:
        for (auto i : a.ints) parts.push_back(ref(i));
        return list(parts);
      case Arg::Kind::SizeList:
        for (size_t k = 0; k + 1 < a.ints.size(); k += 2)
          parts.push_back(a.ints[k] ? ref(a.ints[k + 1]) : std::to_string(a.ints[k + 1]));
        return list(parts);
      case Arg::Kind::NumberList:
        for (size_t k = 0; k < a.ints.size() && k < a.floats.size(); ++k)
          parts.push_back(a.ints[k] >= 0 ? ref(a.ints[k]) : pyFloat(a.floats[k]));
        return list(parts);
      case Arg::Kind::DType:
      case Arg::Kind::Layout:
      case Arg::Kind::MemoryFormat: return "torch." + a.s;
      // A device as its string: both eager and TorchScript convert it.
      case Arg::Kind::Device: return quote(a.s);
      case Arg::Kind::Group: return "torch.distributed.distributed_c10d._get_default_group()";
      case Arg::Kind::WrappedScalar:
        return a.s == "bool" ? (a.i ? "True" : "False") : a.s.rfind("float", 0) == 0 ? pyFloat(a.f) : std::to_string(a.i);
    }
    return "None";
  }

  // One line of build() per node.
  std::string line(size_t i) const {
    const Node& n = g_.nodes[i];
    const std::string& v = vars_[i];
    // A lifted number changes from call to call: the module takes it as an argument.
    if (n.isInput() && !n.number.empty())
      return v + " = graph.placeholder(" + quote(n.name) + ", type_expr=" + n.number + ")";
    switch (n.kind) {
      case NodeKind::Placeholder: return v + " = graph.placeholder(" + quote(n.name) + ")";
      case NodeKind::GetAttr: return v + " = graph.get_attr(" + quote(attrTarget(n, g_)) + ")";
      case NodeKind::Output: {
        std::vector<std::string> outs;
        for (auto& a : n.args) outs.push_back(arg(a));
        return "graph.output((" + join(outs, ", ") + (outs.size() == 1 ? ",))" : "))");
      }
      case NodeKind::CallMethod:
      case NodeKind::CallModule:
        throw Error("node %" + n.name + " is a " + toString(n.kind) + ", which capture does not make");
      case NodeKind::CallFunction: break;
    }
    if (record::isNumberOp(n.target)) {  // Python's arithmetic, as torch.fx records it on symbolic sizes
      std::vector<std::string> operands;
      for (auto& a : n.args) operands.push_back(arg(a));
      return v + " = call(" + quote(n.name) + ", " + n.target + ", (" + join(operands, ", ") +
             (operands.size() == 1 ? ",))" : "))");
    }
    if (n.target == "getitem")
      return v + " = call(" + quote(n.name) + ", operator.getitem, (" + arg(n.args.at(0)) + ", " + arg(n.args.at(1)) + "))";
    if (n.target == record::kExpectTrue)
      return v + " = call(" + quote(n.name) + ", _expect_true, (" + arg(n.args.at(0)) + ",))";
    if (record::isCheck(n.target))  // the helpers the export defines, which TorchScript compiles too
      return v + " = call(" + quote(n.name) + ", " + (n.target == record::kExpectEqual ? "_expect_equal" : "_expect_sizes") +
             ", (" + arg(n.args.at(0)) + ", " + arg(n.args.at(1)) + "))";
    const c10::FunctionSchema& schema = schemaOf(n);
    if (n.args.size() != schema.arguments().size())
      throw Error("node %" + n.name + " passes " + std::to_string(n.args.size()) + " arguments to " + n.opName() +
                  ", whose schema in this libtorch takes " + std::to_string(schema.arguments().size()));
    std::vector<std::string> positional, keywords;
    for (size_t k = 0; k < n.args.size(); ++k) {
      const c10::Argument& formal = schema.arguments()[k];
      if (formal.kwarg_only()) keywords.push_back(quote(formal.name()) + ": " + arg(n.args[k]));
      else positional.push_back(arg(n.args[k]));
    }
    std::string s = v + " = call(" + quote(n.name) + ", " + packet(n.target) + ", (" + join(positional, ", ") +
                    (positional.size() == 1 ? ",)" : ")");
    if (!keywords.empty()) s += ", {" + join(keywords, ", ") + "}";
    return s + ")";
  }

 private:
  const record::Graph& g_;
  record::Namespace names_;
  std::vector<std::string> vars_;
  record::GradMode mode_ = record::GradMode::Ambient;
  std::string entryMode_;  // the variable holding the mode at entry, once a region needs it
};

// Inputs for the graph and what the record computes from them.
struct Example {
  std::vector<replay::Value> inputs;          // placeholders, in graph order
  std::vector<std::pair<std::string, at::Tensor>> tensors;  // get_attr target -> tensor
  std::vector<std::string> parameters;        // targets that require grad
  std::vector<replay::Value> outputs;
  at::Tensor rng;  // the CPU generator's state the outputs were computed from
  std::string defaultDtype;  // torch's default dtype the outputs were computed with ("float32")
  std::string from;
};

at::Tensor tensorLike(const record::TensorMeta& m) {
  auto options = at::TensorOptions().dtype(replay::dtypeFromName(m.dtype));
  return at::isFloatingType(replay::dtypeFromName(m.dtype)) ? at::randn(m.shape, options) : at::zeros(m.shape, options);
}

Example makeExample(const record::RecordFile& file, size_t fi, size_t ri) {
  const record::CompiledFunction& fn = file.functions[fi];
  const record::Graph& graph = fn.records[ri].graph;
  Example ex;
  // The record may come from anyone: its example runs under the operator
  // policy and the memory and time budgets, as magpy-run would run it.
  replay::SessionOptions options = replay::SessionOptions::untrusted();
  options.passes = replay::PassOptions::none();
  replay::Session session(file, options);
  // The first logged call that ran this record, with the state the calls
  // before it left: the inputs Python gave the record.
  int64_t call = -1;
  for (size_t c = 0; c < file.calls.size() && call < 0; ++c)
    if (file.calls[c].function == fi && file.calls[c].record == int32_t(ri)) call = int64_t(c);
  // The calls before it, replayed natively, leave the state Python had,
  // unless one of this function's calls was refused (its state would not be).
  std::string stateLost;
  try {
    if (call >= 0 && session.replayLog([](const replay::LoggedStep&) { return true; }, size_t(call))[fi])
      stateLost = "an earlier call of " + fn.name + " needs Python";
  } catch (const Error& e) {
    stateLost = e.what();
  }
  bool checks = std::any_of(graph.nodes.begin(), graph.nodes.end(),
                            [&](const Node& n) { return record::isCheck(n.target) && !record::decidesOnSizesOnly(graph, n); });
  if ((call < 0 || !stateLost.empty()) && checks)
    throw Error(fn.name + " record " + std::to_string(ri) + " checks values its program read into Python, and " +
                (stateLost.empty() ? "no logged call ran it" : stateLost) + ": random inputs would fail the checks, so "
                "there is no example to export it with (capture with more --log-calls)");
  if (!stateLost.empty()) {
    call = -1;
    session = replay::Session(file, options);
  }
  replay::CallState state;
  state.globals = &session.globals();
  state.module = fn.module;
  if (call >= 0) {
    session.applyLoggedUpdates(size_t(call));
    state.args = session.loggedArgs(size_t(call));
    state.kwargs = session.loggedKwargs(size_t(call));
    ex.from = "the inputs of logged call " + std::to_string(call);
  } else {
    ex.from = "random inputs with the recorded shapes (" +
              (stateLost.empty() ? "no logged call ran this record" : "native replay of the log cannot reach it: " + stateLost) + ")";
  }
  state.self = session.self(fi);

  std::map<std::string, c10::IValue> byPath;  // graph inputs by access path, for the native run
  for (auto& n : graph.nodes) {
    if (n.isInput() && !n.number.empty()) {
      record::Atom a = call >= 0 ? replay::resolve(n.source, state).atom : n.seen;
      if (a.kind != (n.number == "int" ? record::Atom::Kind::Int : record::Atom::Kind::Float))
        throw Error("%" + n.name + " reads " + record::toString(n.source) + ", which is not a Python " + n.number);
      byPath[record::toString(n.source)] = a.kind == record::Atom::Kind::Int ? c10::IValue(a.i) : c10::IValue(a.f);
      ex.inputs.push_back(replay::Value::ofAtom(a));
    } else if (n.kind == NodeKind::Placeholder) {
      replay::Value v = call >= 0 ? replay::resolve(n.source, state) : replay::Value::ofTensor(tensorLike(n.outputs.at(0)));
      if (v.kind == replay::Value::Kind::Opaque) {  // logged as sharing memory with another argument
        v = replay::Value::ofTensor(tensorLike(n.outputs.at(0)));
        ex.from += "; %" + n.name + " random (it shared memory with another argument)";
      }
      at::Tensor t = v.tensor;
      if (!t.defined()) throw Error("placeholder %" + n.name + " reads " + record::toString(n.source) + ", which is not a tensor");
      byPath[record::toString(n.source)] = t;
      ex.inputs.push_back(replay::Value::ofTensor(t.detach().clone()));
    } else if (n.kind == NodeKind::GetAttr) {
      at::Tensor t = n.blob >= 0 ? replay::tensorFromBlob(file.blobs[size_t(n.blob)], n.outputs.at(0))
                                 : replay::resolve(n.source, state).tensor;
      if (!t.defined()) throw Error("get_attr %" + n.name + " reads " + record::toString(n.source) + ", which is not a tensor");
      if (n.blob < 0) byPath[record::toString(n.source)] = t;
      if (t.requires_grad()) ex.parameters.push_back(attrTarget(n, graph));
      ex.tensors.push_back({attrTarget(n, graph), t.detach().clone()});
    }
  }
  replay::Plan plan(graph, file.blobs);
  std::vector<c10::IValue> inputs;
  for (auto& path : plan.inputPaths()) inputs.push_back(byPath.at(record::toString(path)));
  at::NoGradGuard noGrad;
  // Random operators (dropout in training) draw from the generator state
  // the logged call began with; the export restores it before running.
  ex.rng = at::detail::getDefaultCPUGenerator().get_state();
  // Operators under autocast pick other kernels and dtypes: a GraphModule
  // holds no autocast region.
  for (auto& g : fn.records[ri].guards)
    if ((g.path == record::AccessPath::runtime("autocast") || g.path == record::AccessPath::runtime("autocast_cpu")) &&
        g.check.atom.kind == record::Atom::Kind::Bool && g.check.atom.i != 0)
      throw Error(fn.name + " record " + std::to_string(ri) + " runs its operators under autocast (" +
                  record::toString(g.path) + "), which the torch.fx export does not write yet");
  // Factories without a dtype take the default the record was made with.
  for (auto& g : fn.records[ri].guards)
    if (g.path == record::AccessPath::runtime("default_dtype"))
      replay::assign(g.path, replay::Value::ofAtom(g.check.atom), state);
  ex.defaultDtype = replay::runtimeState("default_dtype")->s;
  // A dynamic record's sizes, as its placeholders show them for this call.
  replay::SymbolValues symbols;
  for (auto& n : graph.nodes) {
    if (n.kind != NodeKind::Placeholder || n.outputs.empty() || !n.outputs[0].dynamic()) continue;
    auto sizes = byPath.at(record::toString(n.source)).toTensor().sizes();
    for (size_t d = 0; d < sizes.size() && d < n.outputs[0].sym.size(); ++d)
      if (n.outputs[0].sym[d].symbol >= 0 && !symbols.unify(n.outputs[0].sym[d].symbol, sizes[d]))
        throw Error("placeholder %" + n.name + " has sizes the record's symbols do not allow");
  }
  for (auto& out : plan.runWith(std::move(inputs), &symbols))
    ex.outputs.push_back(out.isInt()      ? replay::Value::ofAtom(record::Atom::integer(out.toInt()))
                         : out.isDouble() ? replay::Value::ofAtom(record::Atom::floating(out.toDouble()))
                                          : replay::Value::ofTensor(out.toTensor()));
  return ex;
}

// Text from a record inside a Python comment: a newline or carriage return
// in a name would end the comment and start code.
std::string commentText(const std::string& text) { return escapeControls(text); }

// For a dynamic record: which inputs take other sizes.
std::string dynamicSizesComment(const record::Record& rec) {
  std::string lines;
  for (auto& n : rec.graph.nodes)
    if (n.kind == NodeKind::Placeholder && !n.outputs.empty() && n.outputs[0].dynamic())
      lines += "#   " + commentText(n.name + ": " + record::typeText(n.outputs[0])) + "\n";
  if (lines.empty()) return "";
  return "# Dynamic sizes (every s >= " + std::to_string(record::kMinSymbolValue) +
         "; a symbol named twice is one size): the module takes\n" + lines + "#\n";
}

// A random operator whose result nothing uses: it moves the generator, so
// the record keeps it, but TorchScript's dead code elimination drops it and
// every later draw then differs.
std::string unusedRandomDraw(const record::Graph& g) {
  std::vector<size_t> uses = record::useCounts(g);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (uses[i] == 0 && replay::isRandom(g.nodes[i])) return g.nodes[i].name;
  return "";
}

bool hasGradRegion(const record::Graph& g) {
  return std::any_of(g.nodes.begin(), g.nodes.end(), [](const Node& n) { return n.grad != record::GradMode::Ambient; });
}

std::string shortName(const std::string& qualified) {
  std::string s = qualified.substr(qualified.rfind('.') + 1);
  return isIdentifier(s) ? s : "Exported";
}

// The export's data file: the graph's tensors, which are parameters, and
// the example's inputs, outputs and generator state.
void saveExampleData(const std::string& path, Example ex) {
  std::vector<record::Atom> tensorKeys;
  std::vector<replay::Value> tensorValues, parameterNames;
  for (auto& [target, t] : ex.tensors) {
    tensorKeys.push_back(record::Atom::string(target));
    tensorValues.push_back(replay::Value::ofTensor(t));
  }
  for (auto& p : ex.parameters) parameterNames.push_back(replay::Value::ofAtom(record::Atom::string(p)));
  replay::Value payload = replay::Value::dict(
      {record::Atom::string("tensors"), record::Atom::string("parameters"), record::Atom::string("inputs"),
       record::Atom::string("outputs"), record::Atom::string("rng")},
      {replay::Value::dict(std::move(tensorKeys), std::move(tensorValues)), replay::Value::list(std::move(parameterNames)),
       replay::Value::list(std::move(ex.inputs)), replay::Value::list(std::move(ex.outputs)), replay::Value::ofTensor(ex.rng)});
  replay::saveValueFile(path, payload);
}

}  // namespace

FxExportSummary writeFxExport(const record::RecordFile& file, const FxExportOptions& options,
                              const std::string& pythonPath) {
  auto [fi, ri] = record::chooseRecord(file, options.function, options.record);
  const record::CompiledFunction& fn = file.functions[fi];
  const record::Record& rec = fn.records[ri];
  if (!rec.breaks.empty())
    throw Error(fn.name + " record " + std::to_string(ri) + " has no operator graph: its calls run Python (" +
                std::to_string(rec.breaks.size()) + " graph breaks, first " + record::toString(rec.breaks.front()) + ")");

  for (const Node& n : rec.graph.nodes) {
    const char* what = n.target == record::kLoop ? "a loop" : n.target == record::kIf ? "a branch"
                       : n.target == record::kBackward ? "a backward pass"
                       : record::isCollective(n.target) ? "a collective" : nullptr;
    if (what)
      throw Error(fn.name + " record " + std::to_string(ri) + " has " + what + " (%" + n.name +
                  "), which the torch.fx export does not write yet: replay it with magpy-run");
  }
  std::filesystem::path data = std::filesystem::path(pythonPath).replace_extension(".pt");
  if (data == std::filesystem::path(pythonPath))
    throw Error("the export's data file would overwrite " + pythonPath + "; name the Python file *.py");

  SourceWriter writer(rec.graph);
  std::ostringstream body;
  for (size_t i = 0; i < rec.graph.nodes.size(); ++i) body << "    " << writer.switchBefore(i) << writer.line(i) << "\n";
  Example ex = makeExample(file, fi, ri);

  FxExportSummary summary;
  summary.dataPath = data.string();
  summary.function = fn.name;
  summary.operators = rec.graph.numOps();
  summary.tensors = ex.tensors.size();
  summary.example = ex.from;

  std::string droppedDraw = unusedRandomDraw(rec.graph);
  std::string unscripted = !droppedDraw.empty() ? "it drops the unused random draw %" + droppedDraw
                           : hasGradRegion(rec.graph) ? "it cannot call torch._C._set_grad_enabled"
                                                      : "";
  std::string scriptCheck =
      unscripted.empty()
          ? "        inputs, expected = example()\n"
            "        _check(\"torch.jit.script\", torch.jit.script(build())(*inputs), expected)\n"
            "    print(f\"ok: torch.fx and torch.jit.script outputs equal the record's ({len(expected)} tensors)\")\n"
          : "    # torch.jit.script is not compared: " + commentText(unscripted) + ".\n"
            "    print(\"ok: torch.fx outputs equal the record's (%d tensors); torch.jit.script not compared \"\n"
            "          \"(%s)\" % (len(expected), " + quote(unscripted) + "))\n";
  std::ostringstream py;
  py << "# torch.fx export of " << commentText(fn.name) << ", record " << ri << " (" << summary.operators << " operators),\n"
     << "# captured from " << commentText(file.script) << " with torch " << commentText(file.env.torch_version)
     << " by magpy " << commentText(file.env.magpy_version) << ".\n"
     << "#\n"
     << "#   build()    the torch.fx.GraphModule; its tensors are in " << commentText(data.filename().string()) << " beside this file\n"
     << "#   example()  (inputs, outputs): " << commentText(ex.from) << ",\n"
     << "#              and the outputs the record computes from them; it also sets torch's\n"
     << "#              CPU random generator and default dtype to those the outputs were computed with\n"
     << "#\n"
     << dynamicSizesComment(rec)
     << "# Running this file checks build() and torch.jit.script(build()) against example().\n"
     << "import builtins\nimport math\nimport operator\nimport os\nfrom typing import List\n\nimport torch\nimport torch.fx\n\n"
     << "DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), " << quote(data.filename().string()) << ")\n\n\n"
     << "def _owner(root, target):\n"
     << "    \"\"\"The module that holds `target` (\"blocks.0.weight\"), made on the way, and the last name.\"\"\"\n"
     << "    *path, name = target.split(\".\")\n"
     << "    for part in path:\n"
     << "        if not hasattr(root, part):\n"
     << "            root.add_module(part, torch.nn.Module())\n"
     << "        root = getattr(root, part)\n"
     << "    return root, name\n\n\n"
     << "def _expect_equal(value: torch.Tensor, seen: torch.Tensor):\n"
     << "    \"\"\"A check of the record: the program read `value` into Python and decided with it.\"\"\"\n"
     << "    torch._assert(torch.equal(value, seen), \"not the captured call: a value the program read differs\")\n\n\n"
     << "def _expect_true(holds: bool):\n"
     << "    \"\"\"A check of the record: a comparison of sizes or numbers the program decided on.\"\"\"\n"
     << "    torch._assert(holds, \"not the captured call: a decision the program made goes the other way\")\n\n\n"
     << "def _expect_sizes(value: torch.Tensor, sizes: List[int]):\n"
     << "    \"\"\"A check of the record: the program read the sizes of `value`, which depend on tensor contents.\"\"\"\n"
     << "    torch._assert(list(value.shape) == sizes, \"not the captured call: sizes the program read differ\")\n\n\n"
     << "def build():\n"
     << "    data = torch.load(DATA)\n"
     << "    root = torch.nn.Module()\n"
     << "    for target, tensor in data[\"tensors\"].items():\n"
     << "        owner, name = _owner(root, target)\n"
     << "        if target in data[\"parameters\"]:\n"
     << "            owner.register_parameter(name, torch.nn.Parameter(tensor))\n"
     << "        else:\n"
     << "            owner.register_buffer(name, tensor)\n"
     << "    graph = torch.fx.Graph()\n\n"
     << "    def call(name, target, args, kwargs=None):\n"
     << "        return graph.create_node(\"call_function\", target, args, kwargs or {}, name=name)\n\n"
     << body.str()
     << "    return torch.fx.GraphModule(root, graph, class_name=" << quote(shortName(fn.name)) << ")\n\n\n"
     << "def example():\n"
     << "    data = torch.load(DATA)\n"
     << "    torch.set_rng_state(data[\"rng\"])\n"
     << "    torch.set_default_dtype(torch." << ex.defaultDtype << ")\n"
     << "    return data[\"inputs\"], data[\"outputs\"]\n\n\n"
     << "def _check(what, outputs, expected):\n"
     << "    assert len(outputs) == len(expected), f\"{what}: {len(outputs)} outputs, the record has {len(expected)}\"\n"
     << "    for i, (got, want) in enumerate(zip(outputs, expected)):\n"
     << "        # Random example inputs (a record no logged call ran) may give NaN, as a batch\n"
     << "        # norm of a negative running variance does: the record's outputs have it too.\n"
     << "        torch.testing.assert_close(got, want, equal_nan=True, msg=lambda m: f\"{what}: output {i}: {m}\")\n\n\n"
     << "if __name__ == \"__main__\":\n"
     << "    import warnings\n\n"
     << "    # torch's own notice when scripting any GraphModule; not about this graph.\n"
     << "    warnings.filterwarnings(\"ignore\", message=\"The TorchScript type system doesn't support instance-level\")\n"
     << "    with torch.no_grad():\n"
     << "        inputs, expected = example()\n"
     << "        _check(\"torch.fx\", build()(*inputs), expected)\n"
     << scriptCheck;

  saveExampleData(summary.dataPath, std::move(ex));
  record::writeFileAtomically(pythonPath, py.str());
  return summary;
}

}  // namespace magpy::interop

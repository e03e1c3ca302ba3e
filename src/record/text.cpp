#include "magpy/record/text.h"

#include <sstream>

#include "magpy/record/format.h"
#include "magpy/record/graph_utils.h"
#include "magpy/record/op_policy.h"
#include "magpy/support/error.h"
#include "magpy/support/hash.h"
#include "magpy/support/json.h"
#include "magpy/support/strings.h"

namespace magpy::record {

std::string argText(const Arg& a, const Graph& g) {
  auto ref = [&](int64_t i) { return i < 0 ? std::string("None") : "%" + g.nodes[size_t(i)].name; };
  switch (a.kind) {
    case Arg::Kind::None: return "None";
    case Arg::Kind::Bool: return a.i ? "True" : "False";
    case Arg::Kind::Int: return std::to_string(a.i);
    case Arg::Kind::Float: return formatDouble(a.f);
    case Arg::Kind::Str: return quote(a.s);
    case Arg::Kind::Node: return ref(a.i);
    case Arg::Kind::IntList: return formatInts(a.ints);
    case Arg::Kind::FloatList: {
      std::vector<std::string> parts;
      for (double f : a.floats) parts.push_back(formatDouble(f));
      return "[" + join(parts, ", ") + "]";
    }
    case Arg::Kind::BoolList: {
      std::vector<std::string> parts;
      for (auto b : a.ints) parts.push_back(b ? "True" : "False");
      return "[" + join(parts, ", ") + "]";
    }
    case Arg::Kind::NodeList: {
      std::vector<std::string> parts;
      for (auto i : a.ints) parts.push_back(ref(i));
      return "[" + join(parts, ", ") + "]";
    }
    case Arg::Kind::SizeList: {
      std::vector<std::string> parts;
      for (size_t k = 0; k + 1 < a.ints.size(); k += 2)
        parts.push_back(a.ints[k] ? ref(a.ints[k + 1]) : std::to_string(a.ints[k + 1]));
      return "[" + join(parts, ", ") + "]";
    }
    case Arg::Kind::NumberList: {
      std::vector<std::string> parts;
      for (size_t k = 0; k < a.ints.size() && k < a.floats.size(); ++k)
        parts.push_back(a.ints[k] >= 0 ? ref(a.ints[k]) : formatDouble(a.floats[k]));
      return "[" + join(parts, ", ") + "]";
    }
    case Arg::Kind::DType:
    case Arg::Kind::Layout:
    case Arg::Kind::MemoryFormat: return "torch." + a.s;
    case Arg::Kind::Device: return "device(" + quote(a.s) + ")";
    case Arg::Kind::Group: return "process_group";
    case Arg::Kind::WrappedScalar:
      return a.s == "bool" ? (a.i ? "True" : "False") : a.s.rfind("float", 0) == 0 ? formatDouble(a.f) : std::to_string(a.i);
  }
  return "?";
}

std::string describeValue(const Value& v, const RecordFile& file) {
  switch (v.kind) {
    case Value::Kind::Atom: return toString(v.atom);
    case Value::Kind::Tensor: {
      std::string s = "tensor " + toString(v.meta);
      if (v.blob < file.blobs.size()) s += " hash=" + hexDigest(file.blobs[v.blob].hash);
      return s;
    }
    case Value::Kind::Opaque: return "<" + v.type + ">";
    case Value::Kind::Object: return "<" + objectLabel(v.type, v.atom) + " object>";
    case Value::Kind::Ref: return "the same object as #" + std::to_string(v.id);
    case Value::Kind::Tuple: return "tuple len " + std::to_string(v.items.size());
    case Value::Kind::List: return "list len " + std::to_string(v.items.size());
    case Value::Kind::Dict: return "dict len " + std::to_string(v.items.size());
  }
  return "?";
}

size_t findFunction(const RecordFile& file, const std::string& name) {
  const auto& fns = file.functions;
  std::vector<size_t> matches;
  for (size_t i = 0; i < fns.size(); ++i) {
    const std::string& full = fns[i].name;
    if (full == name) return i;
    if (full.size() > name.size() && full.compare(full.size() - name.size(), name.size(), name) == 0 &&
        full[full.size() - name.size() - 1] == '.')
      matches.push_back(i);
  }
  if (matches.size() == 1) return matches[0];
  std::string names;
  for (auto& fn : fns) names += "\n  " + fn.name;
  throw Error((matches.empty() ? "no compiled function named '" : "several compiled functions match '") + name +
              "'; the record has:" + names);
}

std::pair<size_t, size_t> chooseRecord(const RecordFile& file, const std::string& function, int record) {
  size_t fi = 0;
  if (!function.empty()) {
    fi = findFunction(file, function);
  } else if (file.functions.empty()) {
    throw Error("the record file has no compiled functions");
  } else if (file.functions.size() > 1) {
    std::string names;
    for (auto& fn : file.functions) names += "\n  " + fn.name;
    throw Error("the record has " + std::to_string(file.functions.size()) +
                " compiled functions; choose one with --function:" + names);
  }
  const CompiledFunction& fn = file.functions[fi];
  if (record < 0 || size_t(record) >= fn.records.size())
    throw Error(fn.name + " has " + std::to_string(fn.records.size()) + " records; there is no record " +
                std::to_string(record));
  return {fi, size_t(record)};
}

Section parseSection(const std::string& name) {
  static const std::pair<const char*, Section> names[] = {
      {"environment", Section::Environment}, {"state", Section::State}, {"guards", Section::Guards},
      {"graph", Section::Graph}, {"mock", Section::Mock}, {"breaks", Section::Breaks},
      {"refgraph", Section::RefGraph}, {"calls", Section::Calls}, {"blobs", Section::Blobs}};
  std::vector<std::string> known;
  for (auto& [n, s] : names) {
    if (name == n) return s;
    known.push_back(n);
  }
  throw Error("unknown section '" + name + "'; the sections are " + join(known, ", "));
}

std::vector<std::string> roleNames(uint8_t roles) {
  std::vector<std::string> names;
  if (roles & RefGraphView::kGuarded) names.push_back("guarded");
  if (roles & RefGraphView::kWritten) names.push_back("written");
  if (roles & RefGraphView::kResult) names.push_back("result");
  return names;
}

namespace {

// What a node's value is: "  : float32[2, 3]", "  : int" (a lifted number).
std::string metaText(const Node& n, const Graph& g) {
  if (!n.number.empty() && n.isInput()) return "  : " + n.number + " (" + toString(n.seen) + " at capture)";
  if (!n.number.empty()) return "  : " + n.number;
  if (n.outputs.empty()) return "";
  std::vector<std::string> parts;
  for (auto& m : n.outputs) parts.push_back(typeText(m, g));
  return "  : " + join(parts, ", ");
}

// A value tree as "path = leaf" lines, depth first, so a diff names the path.
struct Leaf {
  std::string path, text;
};

void flatten(const Value& v, const std::string& path, const RecordFile& file, std::vector<Leaf>& out) {
  std::string id = v.id ? "  #" + std::to_string(v.id) : "";
  switch (v.kind) {
    case Value::Kind::Tuple:
    case Value::Kind::List:
      out.push_back({path, std::string(v.kind == Value::Kind::Tuple ? "tuple" : "list") + " len " +
                               std::to_string(v.items.size()) + (v.type.empty() ? "" : " " + v.type) + id});
      for (size_t i = 0; i < v.items.size(); ++i) flatten(v.items[i], path + "[" + std::to_string(i) + "]", file, out);
      return;
    case Value::Kind::Dict:
      out.push_back({path, "dict len " + std::to_string(v.items.size()) + (v.type.empty() ? "" : " " + v.type) + id});
      for (size_t i = 0; i < v.items.size(); ++i) flatten(v.items[i], path + "[" + keyText(v, i) + "]", file, out);
      return;
    case Value::Kind::Object:
    case Value::Kind::Opaque:
      out.push_back({path, (v.kind == Value::Kind::Object ? objectLabel(v.type, v.atom) : "<" + v.type + ">") + id});
      for (size_t i = 0; i < v.items.size(); ++i) flatten(v.items[i], path + "." + v.names[i], file, out);
      return;
    default:
      out.push_back({path, describeValue(v, file) + id});
      for (size_t i = 0; i < v.items.size() && i < v.names.size(); ++i)  // a tensor's .grad
        flatten(v.items[i], path + "." + v.names[i], file, out);
  }
}

void leavesText(const Value& v, const std::string& path, const RecordFile& file, std::ostream& out, int indent) {
  std::vector<Leaf> leaves;
  flatten(v, path, file, leaves);
  for (auto& l : leaves) out << std::string(size_t(indent), ' ') << l.path << " = " << l.text << "\n";
}

void leavesJson(const Value& v, const std::string& path, const RecordFile& file, JsonWriter& j) {
  std::vector<Leaf> leaves;
  flatten(v, path, file, leaves);
  j.beginArray();
  for (auto& l : leaves) j.beginObject().field("path", l.path).field("value", l.text).endObject();
  j.endArray();
}

// A dynamic tensor's sizes as expressions: "sizes": ["s0", "16"].
void symbolicSizesJson(const TensorMeta& m, JsonWriter& j) {
  if (!m.dynamic()) return;
  j.key("sizes").beginArray();
  for (auto& d : m.sym) j.value(toString(d));
  j.endArray();
}

void checkJson(const Check& c, JsonWriter& j) {
  switch (c.kind) {
    case Check::Kind::Type: j.field("check", "type").field("type", c.s); break;
    case Check::Kind::Number: j.field("check", "number").field("type", c.s); break;
    case Check::Kind::Equals: j.field("check", "equals").field("value", toString(c.atom)); break;
    case Check::Kind::Length: j.field("check", "length").field("length", c.i); break;
    case Check::Kind::DictKeys: {
      j.field("check", "keys").key("keys").beginArray();
      for (auto& k : c.keys) j.value(toString(k));
      j.endArray();
      break;
    }
    case Check::Kind::Tensor: {
      j.field("check", "tensor").field("dtype", c.meta.dtype).key("shape").beginArray();
      for (auto d : c.meta.shape) j.value(d);
      j.endArray().key("strides").beginArray();
      for (auto d : c.meta.strides) j.value(d);
      j.endArray().field("device", c.meta.device).field("requires_grad", c.meta.requires_grad);
      symbolicSizesJson(c.meta, j);
      break;
    }
    case Check::Kind::Identity: j.field("check", "identity").field("name", c.s).field("code_hash", c.i); break;
    case Check::Kind::Alias: j.field("check", "alias").field("same_as", toString(c.path)); break;
    case Check::Kind::Absent: j.field("check", "absent"); break;
    case Check::Kind::Distinct: j.field("check", "distinct").field("not_same_as", toString(c.path)); break;
  }
}

// Why magpy-run would refuse this node under the default operator policy.
std::string policyConcern(const Node& n) { return n.isOp() ? outsidePolicy(n.target, n.overload) : ""; }

void graphJson(const Graph& g, JsonWriter& j) {
  j.beginArray();
  for (auto& n : g.nodes) {
    j.beginObject().field("name", n.name).field("kind", toString(n.kind));
    if (n.isInput()) {
      j.field("target", n.target);
      if (n.blob >= 0) j.field("constant_blob", n.blob);
      else j.field("source", toString(n.source));
    } else if (n.kind == NodeKind::Output) {
      j.key("values").beginArray();
      for (auto& a : n.args) j.value(argText(a, g));
      j.endArray();
    } else {
      j.field("op", n.opName()).key("args").beginArray();
      for (auto& a : n.args) j.value(argText(a, g));
      j.endArray();
      if (std::string why = policyConcern(n); !why.empty()) j.field("outside_policy", why);
    }
    if (!n.outputs.empty()) {
      j.key("outputs").beginArray();
      for (auto& m : n.outputs) {
        j.beginObject().field("dtype", m.dtype).key("shape").beginArray();
        for (auto d : m.shape) j.value(d);
        j.endArray();
        symbolicSizesJson(m, j);
        j.endObject();
      }
      j.endArray();
    }
    if (!n.number.empty()) j.field("number", n.number);
    if (n.isInput() && !n.number.empty()) j.field("seen", toString(n.seen));
    if (n.grad != GradMode::Ambient) j.field("grad_mode", toString(n.grad));
    if (!n.where.empty()) j.field("where", n.where);
    j.endObject();
  }
  j.endArray();
}

void breaksJson(const std::vector<GraphBreak>& breaks, JsonWriter& j) {
  j.beginArray();
  for (auto& b : breaks)
    j.beginObject().field("where", b.where).field("function", b.function).field("opcode", b.opcode).field("reason", b.reason).endObject();
  j.endArray();
}

bool selected(const RecordFile& f, const ViewOptions& o, size_t fi) {
  return o.function.empty() || findFunction(f, o.function) == fi;
}

std::string viewText(const RecordFile& f, const ViewOptions& o) {
  std::ostringstream out;
  if (o.shows(Section::Environment)) {
    out << "magpy record, format " << kFormatVersion << "\n";
    out << "environment: magpy " << f.env.magpy_version << ", python " << f.env.python_version << ", torch "
        << f.env.torch_version << ", annotations " << hexDigest(f.env.annotations_hash) << "\n";
    out << "script: " << f.script << "\n";
    out << "state: " << (f.stateAt == kStateAtExit ? "as the script left it (magpy-capture --state-at exit)"
                                                   : "as each record first read it") << "\n";
  }
  for (size_t fi = 0; fi < f.functions.size(); ++fi) {
    if (!selected(f, o, fi)) continue;
    auto& fn = f.functions[fi];
    out << "\nfunction " << fn.name << " (globals of " << fn.module << ")\n";
    if (o.shows(Section::State)) {
      out << " state:\n";
      leavesText(fn.self, "self", f, out, 2);
    }
    for (size_t ri = 0; ri < fn.records.size(); ++ri) {
      if (o.record >= 0 && size_t(o.record) != ri) continue;
      auto& r = fn.records[ri];
      out << " record " << ri << " (" << r.origin << ")\n";
      if (o.shows(Section::Guards)) {
        out << "  guards (" << r.guards.size() << "):\n";
        for (auto& g : r.guards) out << "   " << toString(g) << "\n";
      }
      if (o.shows(Section::Graph)) {
        out << "  graph (" << r.graph.nodes.size() << " nodes, " << r.graph.numOps() << " ops):\n";
        std::istringstream graph(printGraph(r.graph));
        for (std::string line; std::getline(graph, line);) out << "  " << line << "\n";
      }
      if (o.shows(Section::Mock)) {
        out << "  mock:\n";
        out << "   return " << toString(r.mock.result) << "\n";
        for (auto& e : r.mock.effects) out << "   " << toString(e) << "\n";
      }
      if (o.shows(Section::Breaks) && !r.breaks.empty()) {
        out << "  breaks (" << r.breaks.size() << "):\n";
        for (auto& b : r.breaks) out << "   " << toString(b) << "\n";
      }
      if (o.shows(Section::Breaks) && !r.forwardOnly.empty())
        out << "  forward only (the JIT runs its calls as Python; replay without autograd serves them): "
            << r.forwardOnly << "\n";
      if (o.shows(Section::RefGraph)) {
        out << "  refgraph (" << r.refs.nodes.size() << " nodes, " << r.refs.edges.size() << " edges):\n";
        for (size_t i = 0; i < r.refs.nodes.size(); ++i) {
          auto& n = r.refs.nodes[i];
          out << "   n" << i << ": " << n.label;
          if (n.versions > 1) out << " (" << n.versions << " versions)";
          if (n.roles) out << " [" << join(roleNames(n.roles), ", ") << "]";
          out << "\n";
        }
        for (auto& e : r.refs.edges)
          out << "   n" << e.from << (e.version ? " v" + std::to_string(e.version) : "") << " -" << e.label << "-> n" << e.to << "\n";
      }
    }
  }
  if (o.shows(Section::State) && !f.globals.empty()) {
    out << "\nglobals:\n";
    for (auto& m : f.globals) leavesText(m.globals, "G(" + m.module + ")", f, out, 1);
  }
  if (o.shows(Section::Calls)) {
    out << "\ncalls (" << f.calls.size() << "):\n";
    for (size_t i = 0; i < f.calls.size(); ++i) {
      auto& c = f.calls[i];
      out << " call " << i << ": " << f.functions[c.function].name << ", "
          << (c.record < 0 ? std::string("eager") : "record " + std::to_string(c.record))
          << (c.monitored ? ", monitored" : ", replayed") << "\n";
      for (auto& u : c.updates) {
        std::string owner = u.function >= 0 && uint32_t(u.function) != c.function ? f.functions[size_t(u.function)].name + ": " : "";
        if (u.how == StateUpdate::How::Remove) out << "  removed before the call: " << owner << toString(u.path) << "\n";
        else if (u.how == StateUpdate::How::Refill) leavesText(u.value, "changed in place before the call: " + owner + toString(u.path), f, out, 2);
        else leavesText(u.value, "changed before the call: " + owner + toString(u.path), f, out, 2);
      }
      leavesText(c.args, "args", f, out, 2);
      leavesText(c.kwargs, "kwargs", f, out, 2);
      leavesText(c.result, "result", f, out, 2);
    }
  }
  if (o.shows(Section::Blobs)) {
    out << "\nblobs (" << f.blobs.size() << "):\n";
    for (size_t i = 0; i < f.blobs.size(); ++i)
      out << " blob " << i << ": " << f.blobs[i].dtype << formatInts(f.blobs[i].shape) << " hash=" << hexDigest(f.blobs[i].hash) << "\n";
  }
  return out.str();
}

std::string viewJson(const RecordFile& f, const ViewOptions& o) {
  JsonWriter j;
  j.beginObject().field("format", uint64_t(kFormatVersion));
  if (o.shows(Section::Environment)) {
    j.key("environment").beginObject().field("magpy", f.env.magpy_version).field("python", f.env.python_version)
        .field("torch", f.env.torch_version).field("annotations", hexDigest(f.env.annotations_hash)).endObject();
    j.field("script", f.script);
    j.field("state_at", f.stateAt);
  }
  j.key("functions").beginArray();
  for (size_t fi = 0; fi < f.functions.size(); ++fi) {
    if (!selected(f, o, fi)) continue;
    auto& fn = f.functions[fi];
    j.beginObject().field("name", fn.name).field("module", fn.module);
    if (o.shows(Section::State)) {
      j.key("state");
      leavesJson(fn.self, "self", f, j);
    }
    j.key("records").beginArray();
    for (size_t ri = 0; ri < fn.records.size(); ++ri) {
      if (o.record >= 0 && size_t(o.record) != ri) continue;
      auto& r = fn.records[ri];
      j.beginObject().field("index", ri).field("origin", r.origin);
      if (o.shows(Section::Guards)) {
        j.key("guards").beginArray();
        for (auto& g : r.guards) {
          j.beginObject().field("path", toString(g.path));
          checkJson(g.check, j);
          j.endObject();
        }
        j.endArray();
      }
      if (o.shows(Section::Graph)) {
        j.key("graph");
        graphJson(r.graph, j);
      }
      if (o.shows(Section::Mock)) {
        j.key("mock").beginObject().field("result", toString(r.mock.result)).key("effects").beginArray();
        for (auto& e : r.mock.effects) j.value(toString(e));
        j.endArray().endObject();
      }
      if (o.shows(Section::Breaks)) {
        j.key("breaks");
        breaksJson(r.breaks, j);
        if (!r.forwardOnly.empty()) j.field("forward_only", r.forwardOnly);
      }
      if (o.shows(Section::RefGraph)) {
        j.key("refgraph").beginObject().key("nodes").beginArray();
        for (auto& n : r.refs.nodes) {
          j.beginObject().field("label", n.label).field("versions", uint64_t(n.versions)).key("roles").beginArray();
          for (auto& role : roleNames(n.roles)) j.value(role);
          j.endArray().endObject();
        }
        j.endArray().key("edges").beginArray();
        for (auto& e : r.refs.edges)
          j.beginObject().field("from", uint64_t(e.from)).field("version", uint64_t(e.version)).field("label", e.label)
              .field("to", uint64_t(e.to)).endObject();
        j.endArray().endObject();
      }
      j.endObject();
    }
    j.endArray().endObject();
  }
  j.endArray();
  if (o.shows(Section::State)) {
    j.key("globals").beginArray();
    for (auto& m : f.globals) {
      j.beginObject().field("module", m.module).key("values");
      leavesJson(m.globals, "G(" + m.module + ")", f, j);
      j.endObject();
    }
    j.endArray();
  }
  if (o.shows(Section::Calls)) {
    j.key("calls").beginArray();
    for (auto& c : f.calls) {
      j.beginObject().field("function", f.functions[c.function].name).field("record", int64_t(c.record))
          .field("monitored", c.monitored).key("args");
      leavesJson(c.args, "args", f, j);
      j.key("kwargs");
      leavesJson(c.kwargs, "kwargs", f, j);
      j.key("result");
      leavesJson(c.result, "result", f, j);
      j.endObject();
    }
    j.endArray();
  }
  if (o.shows(Section::Blobs)) {
    j.key("blobs").beginArray();
    for (auto& b : f.blobs) {
      j.beginObject().field("dtype", b.dtype).key("shape").beginArray();
      for (auto d : b.shape) j.value(d);
      j.endArray().field("hash", hexDigest(b.hash)).endObject();
    }
    j.endArray();
  }
  j.endObject();
  return j.take();
}

}  // namespace

std::string printGraph(const Graph& g) {
  std::ostringstream out;
  size_t depth = 0;  // regions open: loop bodies and branch sides are indented
  for (auto& n : g.nodes) {
    bool closes = n.target == kLoopEnd || n.target == kIfElse || n.target == kIfEnd;
    if (closes && depth) --depth;
    out << std::string(2 + 2 * depth, ' ');
    if (n.target == kLoop || n.target == kIf || n.target == kIfElse) ++depth;
    switch (n.kind) {
      case NodeKind::Placeholder:
      case NodeKind::GetAttr:
        out << "%" << n.name << " = " << toString(n.kind) << " "
            << (n.blob >= 0 ? "constant blob " + std::to_string(n.blob) : toString(n.source)) << metaText(n, g);
        break;
      case NodeKind::Output: {
        std::vector<std::string> parts;
        for (auto& a : n.args) parts.push_back(argText(a, g));
        out << "output (" << join(parts, ", ") << ")";
        break;
      }
      default: {
        std::vector<std::string> parts;
        for (auto& a : n.args) parts.push_back(argText(a, g));
        out << "%" << n.name << " = " << n.opName() << "(" << join(parts, ", ") << ")" << metaText(n, g);
        if (n.grad != GradMode::Ambient) out << "  [" << toString(n.grad) << "]";
        if (!n.where.empty()) out << "  # " << n.where;
        if (std::string why = policyConcern(n); !why.empty())
          out << "  # outside the operator policy: " << why << " (magpy-run needs --trust-record)";
      }
    }
    out << "\n";
  }
  return out.str();
}

std::string printView(const RecordFile& file, const ViewOptions& options) {
  return options.json ? viewJson(file, options) : viewText(file, options);
}

std::string printCanonical(const RecordFile& file) { return printView(file); }

std::string printSummary(const RecordFile& f, bool json) {
  std::ostringstream out;
  JsonWriter j;
  j.beginArray();
  for (auto& fn : f.functions) {
    size_t graphs = 0, breaks = 0, nodes = 0, guards = 0;
    for (auto& r : fn.records) {
      graphs += r.graph.nodes.empty() ? 0 : 1;
      breaks += r.breaks.size();
      nodes += r.graph.nodes.size();
      guards += r.guards.size();
    }
    out << "function " << fn.name << ": records=" << fn.records.size() << " graphs=" << graphs << " breaks=" << breaks
        << " nodes=" << nodes << " guards=" << guards << "\n";
    j.beginObject().field("function", fn.name).field("records", fn.records.size()).field("graphs", graphs)
        .field("breaks", breaks).field("nodes", nodes).field("guards", guards).endObject();
  }
  j.endArray();
  return json ? j.take() : out.str();
}

}  // namespace magpy::record

#include "magpy/record/text.h"

#include <sstream>

#include "magpy/support/hash.h"
#include "magpy/support/strings.h"

namespace magpy::record {
namespace {

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
    case Arg::Kind::DType:
    case Arg::Kind::Layout:
    case Arg::Kind::MemoryFormat: return "torch." + a.s;
    case Arg::Kind::Device: return "device(" + quote(a.s) + ")";
    case Arg::Kind::WrappedScalar:
      return a.s == "bool" ? (a.i ? "True" : "False") : a.s.rfind("float", 0) == 0 ? formatDouble(a.f) : std::to_string(a.i);
  }
  return "?";
}

std::string metaText(const std::vector<TensorMeta>& outs) {
  if (outs.empty()) return "";
  std::vector<std::string> parts;
  for (auto& m : outs) parts.push_back(m.dtype + formatInts(m.shape));
  return "  : " + join(parts, ", ");
}

// One "path = value" line per leaf, depth first, so a diff names the path.
void flatten(const Value& v, const std::string& path, const RecordFile& file, std::ostream& out, int indent) {
  std::string pad(size_t(indent), ' ');
  std::string id = v.id ? "  #" + std::to_string(v.id) : "";
  switch (v.kind) {
    case Value::Kind::Tuple:
    case Value::Kind::List:
      out << pad << path << ": " << (v.kind == Value::Kind::Tuple ? "tuple" : "list") << " len " << v.items.size() << id << "\n";
      for (size_t i = 0; i < v.items.size(); ++i)
        flatten(v.items[i], path + "[" + std::to_string(i) + "]", file, out, indent);
      return;
    case Value::Kind::Dict:
      out << pad << path << ": dict len " << v.items.size() << id << "\n";
      for (size_t i = 0; i < v.items.size(); ++i)
        flatten(v.items[i], path + "[" + toString(v.keys[i]) + "]", file, out, indent);
      return;
    case Value::Kind::Object:
    case Value::Kind::Opaque:
      out << pad << path << (v.kind == Value::Kind::Object ? ": " + v.type : " = <" + v.type + ">") << id << "\n";
      for (size_t i = 0; i < v.items.size(); ++i) flatten(v.items[i], path + "." + v.names[i], file, out, indent);
      return;
    default:
      out << pad << path << " = " << describeValue(v, file) << id << "\n";
  }
}

}  // namespace

std::string describeValue(const Value& v, const RecordFile& file) {
  switch (v.kind) {
    case Value::Kind::Atom: return toString(v.atom);
    case Value::Kind::Tensor: {
      std::string s = "tensor " + toString(v.meta);
      if (v.blob < file.blobs.size()) s += " hash=" + hexDigest(file.blobs[v.blob].hash);
      return s;
    }
    case Value::Kind::Opaque: return "<" + v.type + ">";
    case Value::Kind::Object: return "<" + v.type + " object>";
    case Value::Kind::Ref: return "the same object as #" + std::to_string(v.id);
    case Value::Kind::Tuple: return "tuple len " + std::to_string(v.items.size());
    case Value::Kind::List: return "list len " + std::to_string(v.items.size());
    case Value::Kind::Dict: return "dict len " + std::to_string(v.items.size());
  }
  return "?";
}

std::string printGraph(const Graph& g) {
  std::ostringstream out;
  for (auto& n : g.nodes) {
    out << "  ";
    switch (n.kind) {
      case NodeKind::Placeholder:
      case NodeKind::GetAttr:
        out << "%" << n.name << " = " << toString(n.kind) << " " << toString(n.source) << metaText(n.outputs);
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
        out << "%" << n.name << " = " << n.opName() << "(" << join(parts, ", ") << ")" << metaText(n.outputs);
        if (!n.where.empty()) out << "  # " << n.where;
      }
    }
    out << "\n";
  }
  return out.str();
}

std::string printCanonical(const RecordFile& f) {
  std::ostringstream out;
  out << "magpy record, format 1\n";
  out << "environment: magpy " << f.env.magpy_version << ", python " << f.env.python_version << ", torch "
      << f.env.torch_version << ", annotations " << hexDigest(f.env.annotations_hash) << "\n";
  out << "script: " << f.script << "\n";
  for (size_t fi = 0; fi < f.functions.size(); ++fi) {
    auto& fn = f.functions[fi];
    out << "\nfunction " << fn.name << " (globals of " << fn.module << ")\n";
    out << " state:\n";
    flatten(fn.self, "self", f, out, 2);
    for (size_t ri = 0; ri < fn.records.size(); ++ri) {
      auto& r = fn.records[ri];
      out << " record " << ri << " (" << r.origin << ")\n";
      out << "  guards (" << r.guards.size() << "):\n";
      for (auto& g : r.guards) out << "   " << toString(g) << "\n";
      out << "  graph (" << r.graph.nodes.size() << " nodes, " << r.graph.numOps() << " ops):\n";
      std::istringstream graph(printGraph(r.graph));
      for (std::string line; std::getline(graph, line);) out << "  " << line << "\n";
      out << "  mock:\n";
      out << "   return " << toString(r.mock.result) << "\n";
      for (auto& e : r.mock.effects) out << "   " << toString(e) << "\n";
      if (!r.breaks.empty()) {
        out << "  breaks (" << r.breaks.size() << "):\n";
        for (auto& b : r.breaks) out << "   " << toString(b) << "\n";
      }
    }
  }
  if (!f.globals.empty()) {
    out << "\nglobals:\n";
    for (auto& m : f.globals) flatten(m.globals, "G(" + m.module + ")", f, out, 1);
  }
  out << "\ncalls (" << f.calls.size() << "):\n";
  for (size_t i = 0; i < f.calls.size(); ++i) {
    auto& c = f.calls[i];
    out << " call " << i << ": " << f.functions[c.function].name << ", "
        << (c.record < 0 ? std::string("eager") : "record " + std::to_string(c.record))
        << (c.monitored ? ", monitored" : ", replayed") << "\n";
    for (auto& u : c.updates) {
      std::string owner = u.function >= 0 && uint32_t(u.function) != c.function ? f.functions[size_t(u.function)].name + ": " : "";
      flatten(u.value, "changed before the call: " + owner + toString(u.path), f, out, 2);
    }
    flatten(c.args, "args", f, out, 2);
    flatten(c.kwargs, "kwargs", f, out, 2);
    flatten(c.result, "result", f, out, 2);
  }
  out << "\nblobs (" << f.blobs.size() << "):\n";
  for (size_t i = 0; i < f.blobs.size(); ++i)
    out << " blob " << i << ": " << f.blobs[i].dtype << formatInts(f.blobs[i].shape) << " hash="
        << hexDigest(f.blobs[i].hash) << "\n";
  return out.str();
}

std::string printSummary(const RecordFile& f) {
  std::ostringstream out;
  for (auto& fn : f.functions) {
    size_t graphs = 0, breaks = 0, nodes = 0, guards = 0;
    for (auto& r : fn.records) {
      graphs += r.graph.nodes.empty() ? 0 : 1;
      breaks += r.breaks.size();
      nodes += r.graph.nodes.size();
      guards += r.guards.size();
    }
    out << "function " << fn.name << ": records=" << fn.records.size() << " graphs=" << graphs
        << " breaks=" << breaks << " nodes=" << nodes << " guards=" << guards << "\n";
  }
  return out.str();
}

}  // namespace magpy::record

namespace magpy::record {
namespace {

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

std::string diffCanonical(const RecordFile& a, const RecordFile& b) {
  auto x = lines(printCanonical(a)), y = lines(printCanonical(b));
  // Trim the common head and tail, then align the middle by longest common
  // subsequence (bounded, so huge rewrites fall back to a block replace).
  size_t head = 0;
  while (head < x.size() && head < y.size() && x[head] == y[head]) ++head;
  size_t tail = 0;
  while (tail < x.size() - head && tail < y.size() - head && x[x.size() - 1 - tail] == y[y.size() - 1 - tail]) ++tail;
  size_t n = x.size() - head - tail, m = y.size() - head - tail;
  if (n == 0 && m == 0) return "";

  std::vector<std::pair<char, std::string>> ops;
  if (n * m <= 4'000'000) {
    std::vector<std::vector<uint32_t>> lcs(n + 1, std::vector<uint32_t>(m + 1, 0));
    for (size_t i = n; i-- > 0;)
      for (size_t j = m; j-- > 0;)
        lcs[i][j] = x[head + i] == y[head + j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    size_t i = 0, j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && x[head + i] == y[head + j]) { ops.push_back({' ', x[head + i]}); ++i; ++j; }
      else if (j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j])) ops.push_back({'+', y[head + j++]});
      else ops.push_back({'-', x[head + i++]});
    }
  } else {
    for (size_t i = 0; i < n; ++i) ops.push_back({'-', x[head + i]});
    for (size_t j = 0; j < m; ++j) ops.push_back({'+', y[head + j]});
  }

  // Print changed lines with the nearest preceding section header, so each
  // hunk says which function/record it is in.
  std::ostringstream out;
  auto sectionOf = [&](size_t upto) {
    for (size_t k = upto; k-- > 0;) {
      const std::string& l = x[k];
      if (l.rfind("function ", 0) == 0 || l.rfind(" record ", 0) == 0 || l.rfind("calls", 0) == 0 ||
          l.rfind("blobs", 0) == 0 || l.rfind("globals", 0) == 0 || l.rfind("environment", 0) == 0)
        return l;
    }
    return std::string("(top)");
  };
  size_t line = head;
  bool inHunk = false;
  for (auto& [op, text] : ops) {
    if (op == ' ') {
      inHunk = false;
      ++line;
      continue;
    }
    if (!inHunk) out << "@@ " << sectionOf(line) << "\n";
    inHunk = true;
    out << op << text << "\n";
    if (op == '-') ++line;
  }
  return out.str();
}

}  // namespace magpy::record

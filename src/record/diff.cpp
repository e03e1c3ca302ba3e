#include "magpy/record/diff.h"

#include <map>
#include <sstream>

#include "magpy/record/format.h"
#include "magpy/record/graph_utils.h"
#include "magpy/record/text.h"
#include "magpy/support/error.h"
#include "magpy/support/hash.h"
#include "magpy/support/json.h"
#include "magpy/support/strings.h"

namespace magpy::record {
namespace {

// A value tree as path -> description of each leaf (tensors by metadata and
// content hash), to compare state and call values path by path. A shared
// value is listed in full under the first path (in tree order) that reaches
// it and as "same object as <path>" under every later one: the listing stays
// linear in the file's size however much is shared, and does not depend on
// whether the file keeps the object at its first use or refers back to it.
class Leaves {
 public:
  Leaves(const Value& root, const RecordFile& f, std::map<std::string, std::string>& out) : f_(f), out_(out) {
    collect(root);
  }

  void walk(const Value& v, const std::string& path, size_t depth = 0) {
    if (depth > 4 * kMaxNesting)
      throw Error("the values to compare nest more than " + std::to_string(4 * kMaxNesting) +
                  " levels deep through shared objects at " + path + "; the record is malformed");
    const Value* value = &v;
    if (v.kind == Value::Kind::Ref) {
      auto it = shared_.find(v.id);
      if (it != shared_.end()) value = it->second;
    }
    if (value->id != 0 && value->kind != Value::Kind::Ref) {
      auto [first, fresh] = firstPath_.emplace(value->id, path);
      if (!fresh) {
        out_[path] = "same object as " + first->second;
        return;
      }
    }
    switch (value->kind) {
      case Value::Kind::Tuple:
      case Value::Kind::List:
        out_[path] = (value->kind == Value::Kind::Tuple ? "tuple len " : "list len ") +
                     std::to_string(value->items.size());
        for (size_t i = 0; i < value->items.size(); ++i)
          walk(value->items[i], path + "[" + std::to_string(i) + "]", depth + 1);
        return;
      case Value::Kind::Dict:
        out_[path] = "dict keys " + std::to_string(value->items.size());
        for (size_t i = 0; i < value->items.size(); ++i)
          walk(value->items[i], path + "[" + keyText(*value, i) + "]", depth + 1);
        return;
      case Value::Kind::Object:
      case Value::Kind::Opaque:
        out_[path] = value->kind == Value::Kind::Object ? objectLabel(value->type, value->atom) : "<" + value->type + ">";
        for (size_t i = 0; i < value->items.size(); ++i) walk(value->items[i], path + "." + value->names[i], depth + 1);
        return;
      default:
        out_[path] = describeValue(*value, f_);
    }
  }

 private:
  void collect(const Value& v) {
    if (v.kind != Value::Kind::Ref && v.id != 0) shared_[v.id] = &v;
    for (auto& item : v.items) collect(item);
  }

  const RecordFile& f_;
  std::map<std::string, std::string>& out_;
  std::map<uint32_t, const Value*> shared_;
  std::map<uint32_t, std::string> firstPath_;
};

void leaves(const Value& v, const std::string& path, const RecordFile& f, std::map<std::string, std::string>& out) {
  Leaves(v, f, out).walk(v, path);
}

void compareMaps(const std::map<std::string, std::string>& a, const std::map<std::string, std::string>& b,
                 const std::string& function, const std::string& kind, std::vector<Change>& out,
                 bool (*isParameter)(const std::string&) = nullptr) {
  auto label = [&](const std::string& text, const char* verb) {
    bool param = isParameter && isParameter(text);
    return (param ? std::string("parameter ") : kind + " ") + verb;
  };
  for (auto& [path, before] : a) {
    auto it = b.find(path);
    if (it == b.end()) out.push_back({label(before, "removed"), function, -1, path, before, ""});
    else if (it->second != before) out.push_back({label(before, "changed"), function, -1, path, before, it->second});
  }
  for (auto& [path, after] : b)
    if (!a.count(path)) out.push_back({label(after, "added"), function, -1, path, "", after});
}

bool tensorLeaf(const std::string& text) { return text.rfind("tensor ", 0) == 0; }

std::string nodeText(const Node& n, const Graph& g) {
  std::string s;
  if (n.isInput()) {
    s = std::string(toString(n.kind)) + " " + (n.blob >= 0 ? "constant" : toString(n.source));
  } else {
    std::vector<std::string> args;
    for (auto& a : n.args) args.push_back(argText(a, g));
    s = (n.kind == NodeKind::Output ? "output" : n.opName()) + "(" + join(args, ", ") + ")";
  }
  for (auto& m : n.outputs) s += " : " + typeText(m, g);
  return s;
}

void diffRecord(const Record& a, const Record& b, const std::string& fn, int index, std::vector<Change>& out) {
  auto add = [&](std::string what, std::string subject, std::string before, std::string after) {
    out.push_back({std::move(what), fn, index, std::move(subject), std::move(before), std::move(after)});
  };
  if (a.origin != b.origin) add("origin changed", "origin", a.origin, b.origin);
  // Guards, by path and kind of check.
  std::map<std::pair<std::string, int>, std::string> ga, gb;
  for (auto& g : a.guards) ga[{toString(g.path), int(g.check.kind)}] = describe(g.check);
  for (auto& g : b.guards) gb[{toString(g.path), int(g.check.kind)}] = describe(g.check);
  for (auto& [key, before] : ga) {
    auto it = gb.find(key);
    if (it == gb.end()) add("guard removed", key.first, before, "");
    else if (it->second != before) add("guard changed", key.first, before, it->second);
  }
  for (auto& [key, after] : gb)
    if (!ga.count(key)) add("guard added", key.first, "", after);
  // Graph nodes, by name (names are deterministic: linear, linear_1, ...),
  // reported in graph order.
  std::map<std::string, std::string> na, nb;
  for (auto& n : a.graph.nodes) na["%" + n.name] = nodeText(n, a.graph);
  for (auto& n : b.graph.nodes) nb["%" + n.name] = nodeText(n, b.graph);
  for (auto& n : a.graph.nodes) {
    std::string name = "%" + n.name;
    auto it = nb.find(name);
    if (it == nb.end()) add("node removed", name, na[name], "");
    else if (it->second != na[name]) add("node changed", name, na[name], it->second);
  }
  for (auto& n : b.graph.nodes)
    if (!na.count("%" + n.name)) add("node added", "%" + n.name, "", nb["%" + n.name]);
  if (toString(a.mock.result) != toString(b.mock.result)) add("mock changed", "result", toString(a.mock.result), toString(b.mock.result));
  std::vector<std::string> ea, eb;
  for (auto& e : a.mock.effects) ea.push_back(toString(e));
  for (auto& e : b.mock.effects) eb.push_back(toString(e));
  if (ea != eb) add("mock changed", "effects", join(ea, "; "), join(eb, "; "));
  std::vector<std::string> ba, bb;
  for (auto& x : a.breaks) ba.push_back(toString(x));
  for (auto& x : b.breaks) bb.push_back(toString(x));
  if (ba != bb) add("breaks changed", "breaks", join(ba, "; "), join(bb, "; "));
}

}  // namespace

std::vector<Change> diffRecords(const RecordFile& a, const RecordFile& b) {
  std::vector<Change> out;
  auto env = [&](const char* what, const std::string& x, const std::string& y) {
    if (x != y) out.push_back({"environment changed", "", -1, what, x, y});
  };
  env("magpy", a.env.magpy_version, b.env.magpy_version);
  env("python", a.env.python_version, b.env.python_version);
  env("torch", a.env.torch_version, b.env.torch_version);
  env("annotations", hexDigest(a.env.annotations_hash), hexDigest(b.env.annotations_hash));
  env("state taken at", a.stateAt, b.stateAt);

  std::map<std::string, const CompiledFunction*> fa, fb;
  for (auto& f : a.functions) fa[f.name] = &f;
  for (auto& f : b.functions) fb[f.name] = &f;
  for (auto& [name, f] : fa)
    if (!fb.count(name)) out.push_back({"function removed", name, -1, name, std::to_string(f->records.size()) + " records", ""});
  for (auto& [name, f] : fb)
    if (!fa.count(name)) out.push_back({"function added", name, -1, name, "", std::to_string(f->records.size()) + " records"});
  for (auto& [name, x] : fa) {
    auto it = fb.find(name);
    if (it == fb.end()) continue;
    const CompiledFunction& y = *it->second;
    size_t common = std::min(x->records.size(), y.records.size());
    for (size_t r = 0; r < common; ++r) diffRecord(x->records[r], y.records[r], name, int(r), out);
    for (size_t r = common; r < x->records.size(); ++r)
      out.push_back({"record removed", name, int(r), "record " + std::to_string(r), x->records[r].origin, ""});
    for (size_t r = common; r < y.records.size(); ++r)
      out.push_back({"record added", name, int(r), "record " + std::to_string(r), "", y.records[r].origin});
    std::map<std::string, std::string> sa, sb;
    leaves(x->self, "self", a, sa);
    leaves(y.self, "self", b, sb);
    compareMaps(sa, sb, name, "state", out, tensorLeaf);
  }
  std::map<std::string, std::string> ga, gb;
  for (auto& m : a.globals) leaves(m.globals, "G(" + m.module + ")", a, ga);
  for (auto& m : b.globals) leaves(m.globals, "G(" + m.module + ")", b, gb);
  compareMaps(ga, gb, "", "global", out, tensorLeaf);

  if (a.calls.size() != b.calls.size())
    out.push_back({"calls changed", "", -1, "logged calls", std::to_string(a.calls.size()), std::to_string(b.calls.size())});
  for (size_t i = 0; i < std::min(a.calls.size(), b.calls.size()); ++i) {
    std::map<std::string, std::string> ca, cb;
    std::string call = "call " + std::to_string(i) + " ";
    leaves(a.calls[i].args, call + "args", a, ca);
    leaves(a.calls[i].kwargs, call + "kwargs", a, ca);
    leaves(a.calls[i].result, call + "result", a, ca);
    ca[call + "record"] = std::to_string(a.calls[i].record);
    leaves(b.calls[i].args, call + "args", b, cb);
    leaves(b.calls[i].kwargs, call + "kwargs", b, cb);
    leaves(b.calls[i].result, call + "result", b, cb);
    cb[call + "record"] = std::to_string(b.calls[i].record);
    compareMaps(ca, cb, "", "call value", out);
  }
  return out;
}

std::string printChanges(const std::vector<Change>& changes, bool json) {
  if (json) {
    JsonWriter j;
    j.beginObject().field("same", changes.empty()).key("changes").beginArray();
    for (auto& c : changes) {
      j.beginObject().field("what", c.what).field("function", c.function).field("record", int64_t(c.record))
          .field("subject", c.subject).field("before", c.before).field("after", c.after).endObject();
    }
    j.endArray().endObject();
    return j.take();
  }
  if (changes.empty()) return "records are the same\n";
  std::ostringstream out;
  std::string function = "\x01";
  int record = -2;
  for (auto& c : changes) {
    if (c.function != function) {
      function = c.function;
      record = -2;
      out << (function.empty() ? std::string("file:") : "function " + function + ":") << "\n";
    }
    if (c.record != record) {
      record = c.record;
      if (record >= 0) out << "  record " << record << ":\n";
    }
    out << (record >= 0 ? "    " : "  ") << c.what << ": " << c.subject;
    if (!c.before.empty() && !c.after.empty()) out << ": " << c.before << " -> " << c.after;
    else if (!c.before.empty()) out << ": " << c.before;
    else if (!c.after.empty()) out << ": " << c.after;
    out << "\n";
  }
  return out.str();
}

}  // namespace magpy::record

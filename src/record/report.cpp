#include "magpy/record/report.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "magpy/support/json.h"
#include "magpy/support/strings.h"

namespace magpy::record {
namespace {

// One distinct graph break of a function and the records that hit it.
struct DistinctBreak {
  GraphBreak what;
  std::vector<size_t> records;
};

std::vector<DistinctBreak> distinctBreaks(const CompiledFunction& fn) {
  std::vector<DistinctBreak> out;
  for (size_t r = 0; r < fn.records.size(); ++r)
    for (auto& b : fn.records[r].breaks) {
      auto it = std::find_if(out.begin(), out.end(), [&](const DistinctBreak& d) { return d.what == b; });
      if (it == out.end()) out.push_back({b, {r}});
      else if (it->records.back() != r) it->records.push_back(r);
    }
  return out;
}

std::string annotationYaml(const std::set<std::string>& callees) {
  std::string yaml = "version: 1\nfunctions:\n";
  for (auto& c : callees) yaml += "  - name: " + c + "\n";
  return yaml;
}

std::string recordsText(const std::vector<size_t>& records) {
  std::vector<std::string> parts;
  for (auto r : records) parts.push_back(std::to_string(r));
  return (records.size() == 1 ? "record " : "records ") + join(parts, ", ");
}

std::string plural(size_t n, const std::string& word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); }

}  // namespace

std::string coverageReport(const RecordFile& file, const std::vector<CallCounts>& counts, bool json) {
  std::map<std::string, const CallCounts*> byName;
  for (auto& c : counts) byName[c.function] = &c;
  static const CallCounts none;
  auto countsOf = [&](const std::string& name) -> const CallCounts& {
    auto it = byName.find(name);
    return it == byName.end() ? none : *it->second;
  };
  std::set<std::string> callees;
  for (auto& fn : file.functions)
    for (auto& r : fn.records)
      for (auto& b : r.breaks)
        if (!b.callee.empty()) callees.insert(b.callee);

  if (json) {
    JsonWriter j;
    j.beginObject().field("script", file.script);
    j.key("environment").beginObject().field("magpy", file.env.magpy_version).field("python", file.env.python_version)
        .field("torch", file.env.torch_version).endObject();
    j.key("functions").beginArray();
    for (auto& fn : file.functions) {
      const CallCounts& c = countsOf(fn.name);
      j.beginObject().field("name", fn.name).field("parent", c.parent).field("calls", uint64_t(c.calls))
          .field("replayed", uint64_t(c.replayed)).field("monitored", uint64_t(c.monitored)).field("eager", uint64_t(c.eager));
      j.key("records").beginArray();
      for (size_t r = 0; r < fn.records.size(); ++r) {
        auto& rec = fn.records[r];
        j.beginObject().field("index", uint64_t(r)).field("graph", rec.breaks.empty())
            .field("operators", uint64_t(rec.graph.numOps())).field("guards", uint64_t(rec.guards.size()))
            .field("origin", rec.origin).endObject();
      }
      j.endArray().key("breaks").beginArray();
      for (auto& d : distinctBreaks(fn)) {
        j.beginObject().field("where", d.what.where).field("function", d.what.function).field("opcode", d.what.opcode)
            .field("reason", d.what.reason).field("callee", d.what.callee).key("records").beginArray();
        for (auto r : d.records) j.value(uint64_t(r));
        j.endArray().endObject();
      }
      j.endArray().endObject();
    }
    j.endArray().key("suggested_annotations").beginObject().key("functions").beginArray();
    for (auto& c : callees) j.value(c);
    j.endArray().field("yaml", callees.empty() ? std::string() : annotationYaml(callees)).endObject();
    j.endObject();
    return j.take();
  }

  std::ostringstream out;
  size_t calls = 0, replayed = 0, monitored = 0, eager = 0;
  for (auto& c : counts) {
    if (!c.parent.empty()) continue;  // a segment's calls happen inside its parent's
    calls += c.calls;
    replayed += c.replayed;
    monitored += c.monitored;
    eager += c.eager;
  }
  out << "magpy coverage report: " << file.script << " (python " << file.env.python_version << ", torch "
      << file.env.torch_version << ", magpy " << file.env.magpy_version << ")\n"
      << plural(calls, "call") << " of compiled functions: " << replayed
      << " replayed from a record, " << monitored << " monitored, " << eager << " run as Python\n";
  for (auto& fn : file.functions) {
    const CallCounts& c = countsOf(fn.name);
    out << "\n" << fn.name << ": " << plural(c.calls, "call") << ", " << c.replayed << " replayed, " << c.monitored << " monitored, "
        << c.eager << " run as Python\n";
    for (size_t r = 0; r < fn.records.size(); ++r) {
      auto& rec = fn.records[r];
      out << "  record " << r << ": "
          << (rec.breaks.empty() ? "one graph of " + plural(rec.graph.numOps(), "operator")
                                 : "graph breaks, runs as Python")
          << ", " << plural(rec.guards.size(), "guard") << "; made by "
          << (rec.origin == "first call" ? "the first call" : rec.origin) << "\n";
    }
    auto breaks = distinctBreaks(fn);
    if (!breaks.empty()) {
      out << "  graph breaks (" << breaks.size() << " distinct):\n";
      for (auto& d : breaks) {
        out << "    " << (d.what.where.empty() ? "(no Python line)" : d.what.where);
        if (!d.what.function.empty()) out << " in " << d.what.function;
        if (!d.what.opcode.empty()) out << " at " << d.what.opcode;
        out << ": " << d.what.reason << " [" << recordsText(d.records) << "]\n";
      }
    }
  }
  out << "\n";
  if (callees.empty()) {
    out << "suggested annotations: none (no graph break was a call to an unannotated native function)\n";
  } else {
    out << "suggested annotations: " << plural(callees.size(), "native function") << " without an annotation broke graphs.\n"
        << "If each only reads its arguments and changes nothing, save these lines as a .yaml file and pass it\n"
        << "with magpy-capture --annotations FILE:\n";
    std::istringstream yaml(annotationYaml(callees));
    for (std::string line; std::getline(yaml, line);) out << "  " << line << "\n";
  }
  return out.str();
}

}  // namespace magpy::record

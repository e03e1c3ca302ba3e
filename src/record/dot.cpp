#include "magpy/record/dot.h"

#include <spawn.h>
#include <sys/wait.h>

#include <filesystem>
#include <sstream>

#include "magpy/record/format.h"
#include "magpy/record/graph_utils.h"
#include "magpy/record/text.h"
#include "magpy/support/error.h"
#include "magpy/support/strings.h"

extern char** environ;

namespace magpy::record {
namespace {

// A double-quoted Graphviz string; "\n" inside becomes a centred line break.
std::string dotString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string shapes(const std::vector<TensorMeta>& outputs) {
  std::vector<std::string> parts;
  for (auto& m : outputs) parts.push_back(typeText(m));
  return join(parts, ", ");
}

void header(std::ostringstream& out, const std::string& title) {
  out << "digraph magpy {\n"
      << "  graph [label=" << dotString(title) << ", labelloc=t, fontname=Helvetica, rankdir=TB];\n"
      << "  node [fontname=Helvetica, fontsize=10, style=filled, fillcolor=white];\n"
      << "  edge [fontname=Helvetica, fontsize=9];\n";
}

}  // namespace

std::string graphDot(const Graph& g, const std::string& title) {
  std::ostringstream out;
  header(out, title);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.target == kLoopEnd || n.target == kIfElse || n.target == kIfEnd) out << "  }\n";  // a region's part is a cluster
    std::string label, attrs;
    switch (n.kind) {
      case NodeKind::Placeholder:
        label = n.name + "\n" + toString(n.source);
        attrs = "shape=ellipse, fillcolor=\"#cfe2ff\"";
        break;
      case NodeKind::GetAttr:
        label = n.name + "\n" + (n.blob >= 0 ? "constant" : toString(n.source));
        attrs = "shape=box, style=\"filled,rounded\", fillcolor=\"#e9ecef\"";
        break;
      case NodeKind::Output:
        label = "output";
        attrs = "shape=ellipse, fillcolor=\"#d1e7dd\"";
        break;
      default:
        label = n.name + " = " + n.opName();
        attrs = "shape=box";
    }
    if (!n.outputs.empty()) label += "\n" + shapes(n.outputs);
    out << "  n" << i << " [label=" << dotString(label) << ", " << attrs << "];\n";
    const char* part = n.target == kLoop ? "loop %" : n.target == kIf ? "then %" : n.target == kIfElse ? "else %" : nullptr;
    if (part) out << "  subgraph cluster_n" << i << " {\n  label=" << dotString(part + n.name) << ";\n";
  }
  for (size_t i = 0; i < g.nodes.size(); ++i)
    forEachNodeArg(g.nodes[i], [&](int64_t j) { out << "  n" << j << " -> n" << i << ";\n"; });
  out << "}\n";
  return out.str();
}

std::string refGraphDot(const RefGraphView& refs, const std::string& title) {
  std::ostringstream out;
  header(out, title);
  for (size_t i = 0; i < refs.nodes.size(); ++i) {
    const auto& n = refs.nodes[i];
    std::string label = n.label;
    if (n.versions > 1) label += "\nv0..v" + std::to_string(n.versions - 1);
    std::vector<std::string> fills;
    if (n.roles & RefGraphView::kGuarded) fills.push_back("#cfe2ff");
    if (n.roles & RefGraphView::kWritten) fills.push_back("#ffd8a8");
    if (n.roles & RefGraphView::kResult) fills.push_back("#d1e7dd");
    std::string attrs = i == 0 ? "shape=box, penwidth=2" : "shape=box";
    if (fills.size() == 1) attrs += ", style=\"filled,rounded\", fillcolor=\"" + fills[0] + "\"";
    else if (fills.size() > 1) attrs += ", style=\"filled,striped\", fillcolor=\"" + join(fills, ":") + "\"";
    else if (i != 0) attrs += ", style=rounded";
    out << "  r" << i << " [label=" << dotString(label) << ", " << attrs << "];\n";
  }
  for (auto& e : refs.edges) {
    out << "  r" << e.from << " -> r" << e.to << " [label="
        << dotString(e.version ? e.label + " (v" + std::to_string(e.version) + ")" : e.label)
        << (e.version ? ", style=dashed" : "") << "];\n";
  }
  out << "  subgraph cluster_legend {\n"
      << "    label=\"legend\"; fontsize=9; style=dotted;\n"
      << "    legend_guarded [label=\"guarded\", shape=box, style=\"filled,rounded\", fillcolor=\"#cfe2ff\"];\n"
      << "    legend_written [label=\"written by the mock\", shape=box, style=\"filled,rounded\", fillcolor=\"#ffd8a8\"];\n"
      << "    legend_result [label=\"result\", shape=box, style=\"filled,rounded\", fillcolor=\"#d1e7dd\"];\n"
      << "  }\n}\n";
  return out.str();
}

void renderPng(const std::string& dot, const std::string& pngPath) {
  std::filesystem::path target(pngPath);
  std::filesystem::path source = target, image = target;
  source += ".tmp.dot";
  image += ".tmp";
  writeFileAtomically(source.string(), dot);
  std::string sourceArg = source.string(), imageArg = "-o" + image.string();
  char* argv[] = {const_cast<char*>("dot"), const_cast<char*>("-Tpng"), imageArg.data(), sourceArg.data(), nullptr};
  pid_t pid = 0;
  int spawned = posix_spawnp(&pid, "dot", nullptr, nullptr, argv, environ);
  int status = 0;
  if (spawned == 0) waitpid(pid, &status, 0);
  std::error_code ignored;
  std::filesystem::remove(source, ignored);
  if (spawned != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::filesystem::remove(image, ignored);
    if (spawned == ENOENT)
      throw Error("Graphviz's dot program is not installed (apt-get install graphviz); --dot writes the Graphviz text without it");
    throw Error("Graphviz's dot program failed writing " + pngPath);
  }
  std::filesystem::rename(image, target);
}

}  // namespace magpy::record

#include "magpy/record/graph_utils.h"

#include <algorithm>
#include <cctype>

#include "magpy/support/error.h"

namespace magpy::record {

std::vector<int64_t> regionScopes(const Graph& graph) {
  std::vector<int64_t> scope(graph.nodes.size(), -1), open;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& n = graph.nodes[i];
    bool closes = n.target == kLoopEnd || n.target == kIfElse || n.target == kIfEnd;
    if (closes && !open.empty()) open.pop_back();
    scope[i] = open.empty() ? -1 : open.back();
    if (n.target == kLoop || n.target == kIf || n.target == kIfElse) open.push_back(int64_t(i));
  }
  return scope;
}

bool hasLoops(const Graph& graph) {
  return std::any_of(graph.nodes.begin(), graph.nodes.end(), [](const Node& n) { return n.target == kLoop; });
}

bool hasBranches(const Graph& graph) {
  return std::any_of(graph.nodes.begin(), graph.nodes.end(), [](const Node& n) { return n.target == kIf; });
}

std::vector<size_t> useCounts(const Graph& graph) {
  std::vector<size_t> uses(graph.nodes.size(), 0);
  for (auto& n : graph.nodes) forEachNodeArg(n, [&](int64_t i) { ++uses[size_t(i)]; });
  return uses;
}

std::string nameAndSource(const Node& node) {
  return "%" + node.name + (node.where.empty() ? "" : " (" + node.where + ")");
}

Replacements::Replacements(size_t numNodes) : by_(numNodes) {
  for (size_t i = 0; i < numNodes; ++i) by_[i] = int64_t(i);
}

int64_t Replacements::resolve(int64_t node) const {
  while (by_[size_t(node)] != node) node = by_[size_t(node)];
  return node;
}

Graph removeNodes(const Graph& graph, const std::vector<bool>& keep, const Replacements& replacements) {
  std::vector<int64_t> position(graph.nodes.size(), -1);  // in the new graph; -1: removed
  Graph out;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (!keep[i]) continue;
    Node n = graph.nodes[i];
    forEachNodeArg(n, [&](int64_t& j) {
      j = position[size_t(replacements.resolve(j))];
      if (j < 0) throw Error("internal: an optimization left a use of a removed node");
    });
    position[i] = int64_t(out.nodes.size());
    out.nodes.push_back(std::move(n));
  }
  return out;
}

Graph removeNodes(const Graph& graph, const std::vector<bool>& keep) {
  return removeNodes(graph, keep, Replacements(graph.nodes.size()));
}

std::vector<bool> liveNodes(const Graph& graph, const std::function<bool(const Node&)>& hasSideEffects) {
  std::vector<bool> live(graph.nodes.size(), false);
  // Uses come after what they use: one backward sweep sees every user of a
  // node before the node itself.
  for (size_t i = graph.nodes.size(); i-- > 0;) {
    const Node& n = graph.nodes[i];
    if (n.kind == NodeKind::Output || hasSideEffects(n)) live[i] = true;
    if (live[i]) forEachNodeArg(n, [&](int64_t j) { live[size_t(j)] = true; });
  }
  return live;
}

std::string typeText(const TensorMeta& m, const Graph& g) {
  bool named = std::any_of(m.sym.begin(), m.sym.end(), [&](const SymDim& d) { return d.node >= 0 && size_t(d.node) < g.nodes.size(); });
  if (!named) return typeText(m);
  std::string dims;
  for (auto& d : m.sym)
    dims += (dims.empty() ? "" : ", ") + (d.node >= 0 && size_t(d.node) < g.nodes.size() ? "%" + g.nodes[size_t(d.node)].name : toString(d));
  return m.dtype + "[" + dims + "]";
}

bool decidesOnSizesOnly(const Graph& g, const Node& check) {
  if (check.target != kExpectTrue || check.args.size() != 1 || check.args[0].kind != Arg::Kind::Node) return false;
  std::vector<int64_t> stack{check.args[0].i};
  std::vector<bool> seen(g.nodes.size(), false);  // a value used twice is walked once
  while (!stack.empty()) {
    size_t i = size_t(stack.back());
    stack.pop_back();
    if (seen[i]) continue;
    seen[i] = true;
    const Node& n = g.nodes[i];
    if (n.target == "aten::size" && n.overload == "int") continue;
    if (n.isInput() || !isNumberOp(n.target)) return false;
    for (auto& a : n.args)
      if (a.kind == Arg::Kind::Node) stack.push_back(a.i);
  }
  return true;
}

namespace {

bool isKeyword(const std::string& s) {
  static const std::set<std::string> kKeywords = {
      "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del",
      "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal",
      "not", "or", "pass", "raise", "return", "try", "while", "with", "yield"};
  return kKeywords.count(s) > 0;
}

bool isNameCharacter(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string toIdentifier(const std::string& candidate) {
  std::string s;
  for (char c : candidate) s += isNameCharacter(c) ? c : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "_" + s;
  return s;
}

}  // namespace

bool isIdentifier(const std::string& s) {
  return !s.empty() && !std::isdigit(static_cast<unsigned char>(s[0])) &&
         std::all_of(s.begin(), s.end(), isNameCharacter) && !isKeyword(s);
}

std::string Namespace::create(const std::string& candidate) {
  std::string base = toIdentifier(candidate);
  int& suffix = nextSuffix_[base];
  std::string name = suffix == 0 ? base : base + "_" + std::to_string(suffix);
  while (taken_.count(name) || isKeyword(name)) name = base + "_" + std::to_string(++suffix);
  ++suffix;
  taken_.insert(name);
  return name;
}

}  // namespace magpy::record

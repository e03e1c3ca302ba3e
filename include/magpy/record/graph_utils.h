// Utilities over the operator graph, shared by capture, replay's passes and
// the exports: the values a node uses, rewrites that remove nodes, dead
// code, and torch.fx-style names.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "magpy/record/graph.h"

namespace magpy::record {

// Calls f(index) for each value one argument names: a Node argument, the
// entries of a NodeList or NumberList (skipping -1: None, a constant),
// the node entries of a SizeList. On a mutable argument f may take
// `int64_t&` and point a use elsewhere.
template <class ArgT, class F>
void forEachArgNode(ArgT& a, F&& f) {
  static_assert(std::is_same_v<std::remove_const_t<ArgT>, Arg>, "forEachArgNode walks a record::Arg");
  if (a.kind == Arg::Kind::Node) {
    f(a.i);
  } else if (a.kind == Arg::Kind::NodeList || a.kind == Arg::Kind::NumberList) {
    for (auto& i : a.ints)
      if (i != -1) f(i);
  } else if (a.kind == Arg::Kind::SizeList) {
    for (size_t k = 0; k + 1 < a.ints.size(); k += 2)
      if (a.ints[k] == 1) f(a.ints[k + 1]);
  }
}

// Calls f(index) for each value `node` uses, in argument order
// (forEachArgNode); then the nodes whose values its results' sizes are
// (SymDim::node). On a mutable node f may take `int64_t&` and point a use
// elsewhere.
template <class NodeT, class F>
void forEachNodeArg(NodeT& node, F&& f) {
  static_assert(std::is_same_v<std::remove_const_t<NodeT>, Node>, "forEachNodeArg walks a record::Node");
  for (auto& a : node.args) forEachArgNode(a, f);
  for (auto& m : node.outputs)
    for (auto& d : m.sym)
      if (d.node >= 0) {
        int64_t i = d.node;
        f(i);
        if constexpr (!std::is_const_v<NodeT>) d.node = int32_t(i);
      }
}

// Per node: the innermost region it is in, -1 outside every region: a
// loop's body by its magpy.loop node, a branch's then side by its magpy.if
// node, its else side by its magpy.if_else node. Markers that open or
// close a region (loop, loop_end, if, if_else, if_end) are in the region
// around theirs; carried nodes in their loop's. For a validated graph.
std::vector<int64_t> regionScopes(const Graph& graph);
bool hasLoops(const Graph& graph);
bool hasBranches(const Graph& graph);

// Per node: how many times later nodes use its value (a node that passes
// the same value twice uses it twice).
std::vector<size_t> useCounts(const Graph& graph);

// "%conv2d (model.py:41)": a node as messages name it, with the source line
// that issued it when capture knew it.
std::string nameAndSource(const Node& node);

// Which node stands for each node while a rewrite merges or bypasses some:
// the uses of a replaced node go to its replacement, or to the replacement's
// replacement when that was replaced in turn.
class Replacements {
 public:
  explicit Replacements(size_t numNodes);  // every node stands for itself

  void replace(size_t node, int64_t by) { by_[node] = by; }
  int64_t resolve(int64_t node) const;

 private:
  std::vector<int64_t> by_;
};

// The graph without the nodes `keep` marks false, its uses renumbered to
// the kept nodes' new positions after `replacements` are applied. Throws
// Error when a kept node would still use a removed one.
Graph removeNodes(const Graph& graph, const std::vector<bool>& keep, const Replacements& replacements);
Graph removeNodes(const Graph& graph, const std::vector<bool>& keep);

// Per node: whether the graph needs it. Needed are the Output node, the
// nodes `hasSideEffects` names (what has them depends on the operators, so
// the caller decides), and every node these use, directly or not.
std::vector<bool> liveNodes(const Graph& graph, const std::function<bool(const Node&)>& hasSideEffects);

// A value's type as the graph's views show it: typeText(), with a size
// that is a node's value named as the node ("float32[s0, %floordiv, 32]").
std::string typeText(const TensorMeta& meta, const Graph& graph);

// Whether `check` is a predicate (magpy.expect_true) computed from sizes
// read from tensors and constants only: no lifted number, no contents.
// Every call with the record's sizes decides it as the capture did.
bool decidesOnSizesOnly(const Graph& graph, const Node& check);

// A Python identifier that is no Python keyword: a name generated code can
// bind.
bool isIdentifier(const std::string& s);

// Hands out unique names as torch.fx names its nodes. A candidate becomes
// an identifier (each character other than a letter, digit or '_' becomes
// '_'; a leading digit, or nothing, gets a '_' before it); when that name
// is taken or a Python keyword, the first free one of name_1, name_2, ...
class Namespace {
 public:
  Namespace() = default;
  explicit Namespace(std::set<std::string> reserved) : taken_(std::move(reserved)) {}

  std::string create(const std::string& candidate);
  // Takes `name` as it is (a name given elsewhere that created names must avoid).
  void reserve(const std::string& name) { taken_.insert(name); }

 private:
  std::set<std::string> taken_;
  // Per base name: the suffix to try next (those below it are all taken),
  // so that naming n nodes alike stays linear.
  std::map<std::string, int> nextSuffix_;
};

}  // namespace magpy::record

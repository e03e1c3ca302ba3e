// RefGraph (MagPy paper, section 4): one ShadowNode per runtime value the
// interpreter touched, versions for in-place updates, and reference edges
// (container -> element, object -> attribute) per version. Node 0 is the
// external state: its edges are the call's arguments, `self`, and the
// globals of every module the run read.
//
// Identity: mutable objects (lists, dicts, tensors, modules, ...) are keyed
// by object identity, so aliasing is visible. Immutable scalars (ints,
// floats, bools, None, strings) are NOT: CPython shares them, so a node for
// one is created per production (an edge read, a constant, a result), which
// keeps their provenance exact.
#pragma once

#include <Python.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "magpy/record/path.h"
#include "magpy/record/value.h"

namespace magpy::capture {

using NodeId = int32_t;
constexpr NodeId kExternal = 0;
constexpr NodeId kNoNode = -1;

// What an edge means: how the target is reached from the source.
struct Relation {
  enum class Kind : uint8_t {
    Self, Arg, Kwarg, Module,  // from node 0: the roots of access paths
    Attr, Index, Key,          // attribute, sequence position, dict key
    KeyOf,                     // dict key that is an object (identityKey): node `index`
  };
  Kind kind = Kind::Attr;
  std::string name;   // Kwarg, Module (module name), Attr
  int64_t index = 0;  // Arg, Index
  record::Atom key;   // Key: str, int, or a tuple of keys

  static Relation self() { return {Kind::Self, {}, 0, {}}; }
  static Relation arg(int64_t i) { return {Kind::Arg, {}, i, {}}; }
  static Relation kwarg(std::string n) { return {Kind::Kwarg, std::move(n), 0, {}}; }
  static Relation module(std::string n) { return {Kind::Module, std::move(n), 0, {}}; }
  static Relation attr(std::string n) { return {Kind::Attr, std::move(n), 0, {}}; }
  static Relation at(int64_t i) { return {Kind::Index, {}, i, {}}; }
  static Relation keyed(record::Atom k) { return {Kind::Key, {}, 0, std::move(k)}; }
  static Relation keyed(std::string k) { return keyed(record::Atom::string(std::move(k))); }
  static Relation keyOf(int32_t keyNode) { return {Kind::KeyOf, {}, keyNode, {}}; }
  bool operator==(const Relation& o) const {
    return kind == o.kind && name == o.name && index == o.index && key == o.key;
  }
};

// "self", "args[0]", "G(__main__)", ".weight", "[2]", "['k']".
std::string toString(const Relation& r);

// Extends an access path by one relation (roots for edges out of node 0).
// A KeyOf relation needs the path of its key's node (keyPath); without
// one it throws Error.
record::AccessPath extend(const record::AccessPath& base, const Relation& r, const std::string& homeModule,
                          const record::AccessPath* keyPath = nullptr);

struct Edge {
  Relation rel;
  NodeId target;
};

enum class NodeKind : uint8_t {
  Atom,      // immutable scalar: value in `atom`
  Tensor,
  Tuple, List, Dict,
  Module,    // a Python module: its attributes are the module's globals
  Function,  // Python function, builtin, method descriptor, class: guarded by identity
  Object,    // anything else: guarded by type, attributes read lazily
};

struct ShadowVersion {
  std::vector<Edge> refs;
  int graphValue = -1;  // Tensor: the operator-graph value holding this version
};

struct ShadowNode {
  NodeId id = kNoNode;
  NodeKind kind = NodeKind::Object;
  PyObject* obj = nullptr;   // strong reference, kept for the whole run (releaseUnreached aside)
  record::Atom atom;          // Atom nodes: the value
  std::vector<ShadowVersion> versions{ShadowVersion{}};
  bool dataDependent = false; // derived from tensor contents (e.g. .item()): not a constant
  bool external = false;      // part of the state the call began with (reached from node 0)
  bool contentsRead = false;  // a list whose length or elements the run read (not only appended to)
  std::string unsupported;    // why no record can hold it (a dict key that is an object); empty: one can

  const ShadowVersion& last() const { return versions.back(); }
  NodeId refOf(const Relation& r, size_t version) const;  // kNoNode if absent
};

class RefGraph {
 public:
  RefGraph();
  ~RefGraph();
  RefGraph(const RefGraph&) = delete;
  RefGraph& operator=(const RefGraph&) = delete;

  ShadowNode& node(NodeId id) { return nodes_[size_t(id)]; }
  const ShadowNode& node(NodeId id) const { return nodes_[size_t(id)]; }
  size_t size() const { return nodes_.size(); }

  // The node of an identity-keyed object, if it has one.
  NodeId find(PyObject* obj) const;
  // A new node for obj (an Atom node for scalars; the existing node for an
  // identity-keyed object that already has one). Containers get edges to
  // their elements right away: their elements can be read implicitly
  // (iteration, len, unpacking) so they are part of what is read.
  NodeId nodeFor(PyObject* obj);

  // Reading `target` through `rel` of `source`: reuses the edge's node when
  // the edge exists and still leads to this value; otherwise records the
  // edge on every version of source (the reference existed from the start).
  NodeId read(NodeId source, const Relation& rel, PyObject* target);

  // A write: a new version of source whose edge `rel` leads to target.
  void write(NodeId source, const Relation& rel, NodeId target);
  void remove(NodeId source, const Relation& rel);

  // The object changed in a way we saw only from outside (an annotated
  // in-place call): a new version, with container elements observed anew.
  void changedInPlace(NodeId id);

  // An entry edge of node 0 (an argument, self) that counts only once the
  // run uses the value: an argument the function never touches is not
  // read, so it is not guarded (the paper's lazy ShadowNode creation).
  void addLazyRoot(NodeId id, const Relation& rel);
  // The run used `id`: its pending entry edges become real.
  void use(NodeId id) {
    if (!lazyRoots_.empty()) activate(id);
  }

  // list.append(value) changed the list (after changedInPlace): its new
  // last element is the argument itself, so a number keeps the node that
  // says where it came from (a lifted number stays lifted).
  void appended(NodeId list, NodeId value, PyObject* valueObj);

  // The run reads what a container holds (len, iteration, a native
  // callee's value read): marks the lists within (through tuples, lists
  // and dicts) as read.
  void readContents(NodeId id);
  // A list of the entry state the run only appended to (log.append(v),
  // log.extend(xs)): its elements at entry are still its first ones, and
  // neither they nor its length were read. Its record extends it, and
  // guards nothing of what it held (a log may grow between calls).
  bool onlyExtended(NodeId id) const;

  // Algorithm 1 of the paper: a breadth-first walk from node 0 through the
  // edges of each node's first version (the state the call began with),
  // but for the elements of lists only extended.
  // visit(from, edge, firstVisit) is called for every edge reached;
  // firstVisit is true the first time its target is reached (that path
  // names it in guards), false for the other paths to it (aliases). An
  // edge keyed by an object waits until its key has been reached (its path
  // names the key); one whose key never is, is not visited.
  void search(const std::function<void(NodeId from, const Edge& edge, bool firstVisit)>& visit) const;

  // Called for every tensor node made, including container elements.
  void onTensor(std::function<void(NodeId)> f) { onTensor_ = std::move(f); }
  // Called for every node written (write, remove, changedInPlace).
  void onWrite(std::function<void(NodeId)> f) { onWrite_ = std::move(f); }

  // The references to obj the program can no longer use: the graph's own
  // and those of containers only the graph holds (a call's *args tuple
  // outlives the call here); 0 for an object the graph does not hold.
  // settle() first brings the containers up to date.
  Py_ssize_t unusableRefs(PyObject* obj) const;
  // Finds the containers the program dropped since the last settle(), and
  // hides them from gc.get_objects(), as their freeing would have.
  void settle();

  // After a graph break nothing more is recorded: lets go of the objects
  // the state never reached (at entry, or stored into it later), so that
  // what the program drops is freed as in eager, and forgets them (their
  // nodes keep no object). The break record reads only the others.
  void releaseUnreached();

  // Whether a dict node has, or had, a key that is an object (KeyOf).
  bool keyedByObjects(NodeId id) const;
  // The relation of key `key` in a dict node (Key or KeyOf); nothing for
  // keys no path can name.
  std::optional<Relation> dictRelation(PyObject* key);

  static NodeKind classify(PyObject* obj);
  // A module sys.modules holds under its name: reached as G(name), its
  // attributes are its globals (one made by types.ModuleType, or
  // torch.ops.profiler, is an object like any other).
  static bool registeredModule(PyObject* m);
  static bool isAtom(PyObject* obj);

 private:
  void observeElements(NodeId id);
  void markExternal(NodeId id);
  void activate(NodeId id);
  NodeId add(NodeKind kind, PyObject* obj);

  std::vector<ShadowNode> nodes_;
  std::unordered_map<PyObject*, NodeId> byObject_;
  std::vector<NodeId> usableContainers_;  // tuples, lists and dicts the run made that the program may use
  std::unordered_map<PyObject*, Py_ssize_t> heldByDropped_;  // references from those it dropped
  std::unordered_map<NodeId, std::vector<Relation>> lazyRoots_;
  std::function<void(NodeId)> onTensor_;
  std::function<void(NodeId)> onWrite_;
};

}  // namespace magpy::capture

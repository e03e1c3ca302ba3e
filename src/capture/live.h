// Records applied to live Python objects: the live store that access
// paths, guards and mocks (replay/state_access.h, shared with native
// replay) work on, and snapshots of live values into record value trees.
#pragma once

#include <ATen/core/ivalue.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "capture/pyobjects.h"
#include "magpy/record/record.h"
#include "magpy/replay/state_access.h"

namespace magpy::capture {

struct LiveRoots {
  PyObject* self = nullptr;
  PyObject* args = nullptr;    // tuple
  PyObject* kwargs = nullptr;  // dict or null
  std::string homeModule;
};

// Live Python objects as a store for replay/state_access.h: paths are
// resolved with getattr/getitem (nn.Module attributes in the module's dicts
// directly, not through Module.__getattr__ in Python), types and
// identities compare by pointer with what the monitored run saw.
class LiveStore {
 public:
  using Handle = PyRef;
  using Expected = PyRef;  // the type or object a guard's value had when captured; may be null

  // `keys`: per node of the tree resolved, its step's name or key as a
  // Python object (LiveRecord makes them once); without, made per step.
  explicit LiveStore(const LiveRoots& roots, const std::vector<PyRef>* keys = nullptr) : roots_(roots), keys_(keys) {}

  PyRef root(const record::AccessPath& root) const;
  PyRef step(const PyRef& parent, const replay::PathTree& tree, int node) const;
  PyRef itemOf(const PyRef& parent, const PyRef& key) const;
  std::string rootMissing(const record::AccessPath&) const { return "it is not in the call's state"; }
  std::string lacks(const PyRef& parent, const replay::PathTree& tree, int node) const;
  size_t argCount() const { return roots_.args ? size_t(PyTuple_GET_SIZE(roots_.args)) : 0; }

  bool typeIs(const PyRef& v, const record::Check& c, const PyRef& expected) const;
  bool identityIs(const PyRef& v, const record::Check& c, const PyRef& expected) const;
  std::optional<record::Atom> atom(const PyRef& v) const;
  bool exactAtom(const PyRef& v) const { return isAtom(v.get()); }
  std::optional<int64_t> length(const PyRef& v) const;
  bool keysAre(const PyRef& v, const std::vector<record::Atom>& keys) const;
  std::optional<std::vector<record::Atom>> keys(const PyRef& v) const;
  const at::Tensor* tensor(const PyRef& v) const { return isTensor(v.get()) ? &tensorOf(v.get()) : nullptr; }
  bool plainTensor(const PyRef& v) const { return plainTensorType(Py_TYPE(v.get())); }
  bool same(const PyRef& a, const PyRef& b) const { return a.get() == b.get(); }
  std::string typeName(const PyRef& v) const { return capture::typeName(Py_TYPE(v.get())); }
  std::string describe(const PyRef& v) const;

  PyRef constant(const record::Atom& a) const { return atomObject(a); }
  PyRef output(const c10::IValue& v) const;
  PyRef sequence(bool tuple, std::vector<PyRef> items) const;
  PyRef dict(const std::vector<record::Atom>& keys, std::vector<PyRef> items, const std::string& type) const;
  bool setAttr(const PyRef& target, const std::string& name, PyRef value) const;
  void delAttr(const PyRef& target, const std::string& name) const;
  void setItem(const PyRef& target, const record::Atom& key, PyRef value) const;
  void setItemOf(const PyRef& target, const PyRef& key, PyRef value) const;
  void delItem(const PyRef& target, const record::Atom& key) const;
  void assignContents(const PyRef& target, const PyRef& value) const;
  void extendContents(const PyRef& target, const PyRef& value) const;

  // A step's name or key as a Python object.
  static PyRef keyOf(const replay::PathTree::Node& n);

 private:
  const LiveRoots& roots_;
  const std::vector<PyRef>* keys_;
};

// Instantiated once, in live.cpp, where the store's steps inline.
}  // namespace magpy::capture
namespace magpy::replay {
extern template class Resolution<capture::LiveStore>;
}  // namespace magpy::replay
namespace magpy::capture {

// A defaultdict's default_factory as state values name it (record::Value's
// atom of a Dict); None for other dicts.
record::Atom defaultFactoryName(PyObject* dict);

// Whether reading obj.name would run Python code: a property's getter, a
// descriptor's __get__, a __getattribute__ or __getattr__ (a module's
// too) written in Python. Looks names up on classes only.
bool attributeRunsPython(PyObject* obj, PyObject* name);

// The element one step names below `container`, read as the live store
// reads it, or null (no Python error pending).
PyRef liveElement(PyObject* container, const record::PathStep& step);

// The object at path, or null (with no Python error pending) when some
// step does not exist.
PyRef resolveLive(const record::AccessPath& path, const LiveRoots& roots);

// A record prepared for running on live objects: its guards, graph inputs
// and mock over one PathTree (replay::RecordAccess), with what the
// monitored run saw for its type and identity guards.
class LiveRecord {
 public:
  using Values = replay::Resolution<LiveStore>;

  LiveRecord(const record::Record& record, std::vector<PyRef> expected, const std::vector<record::AccessPath>& inputs);

  // The store for one call; Values over it resolve each path at most once.
  LiveStore store(const LiveRoots& roots) const { return LiveStore(roots, &keys_); }
  const replay::PathTree& tree() const { return access_.tree(); }

  // What the interpreter found for the run beyond its paths: the classes
  // it looked names up on and the code of the functions it ran. Live
  // objects only (a record file's state holds no classes or code to
  // change), checked before the guards.
  void dependOn(const std::vector<PyRef>& classes, const std::vector<PyRef>& functions);

  std::optional<replay::GuardMiss> check(Values& v) const;
  // A class or function code the record depends on that is not as the
  // run found it; nothing when all are.
  std::optional<replay::GuardMiss> definitionsChanged() const;
  std::vector<size_t> misses(Values& v) const;  // every guard that does not hold
  std::vector<c10::IValue> inputs(Values& v) const;  // throws Error
  // Throws Error. Classes the record's own writes change (a class
  // attribute it counts in) are read again: those changes are its own.
  PyRef mock(const std::vector<c10::IValue>& outputs, Values& v) const;

 private:
  struct ClassRead {
    PyRef type;
    // What the run found, or the record's own writes left (mock()).
    mutable unsigned version;
    mutable std::shared_ptr<const std::vector<PyRef>> contents;  // classContents
  };
  void remember(const ClassRead& c) const;
  bool classHolds(const ClassRead& c) const;
  struct CodeRun {
    PyRef function, code;
  };
  replay::RecordAccess access_;
  std::vector<ClassRead> classes_;
  std::vector<CodeRun> codes_;
  std::vector<PyRef> expected_;
  std::vector<PyRef> keys_;
};

// Deduplicated tensor contents for a record file.
class BlobPool {
 public:
  uint32_t add(const at::Tensor& t);
  std::vector<record::TensorBlob>& blobs() { return blobs_; }
  uint64_t bytes() const { return bytes_; }  // of all blobs held
  // Forgets the blobs added since there were `count` (nothing refers to them).
  void truncate(size_t count);

 private:
  std::vector<record::TensorBlob> blobs_;
  std::map<uint64_t, uint32_t> byHash_;
  uint64_t bytes_ = 0;
};

// The steps below an object that a snapshot must include (attributes of
// objects are taken only when asked for; containers are taken whole).
struct PathTrie {
  std::map<record::PathStep, PathTrie> children;
  void insert(const std::vector<record::PathStep>& steps, size_t from = 0);
  void insertTree(const record::Value& snapshot);  // every path a snapshot holds
  void insertTrie(const PathTrie& other);           // every path of another
};

// The kind and type name of a value for an object that is no atom, tensor,
// or container: a module, function, class or enum member (opaque, named as
// its identity guard names it) or an object of its class. Its attributes
// are the caller's to add.
void objectShell(PyObject* o, record::Value& v);

// A value tree for o. `content` may supply a tensor's contents from before
// the run changed them.
using ContentLookup = std::function<const at::Tensor*(const at::Tensor&)>;
record::Value snapshot(PyObject* o, const PathTrie& wanted, BlobPool& blobs, const ContentLookup& content = {});

// Merges `add` into `into`, keeping what `into` already has (first read
// wins): objects gain the attributes `into` lacks; containers, taken whole
// when first read, gain nothing. Objects `add` holds twice stay one object
// (its ids join into's).
void mergeSnapshot(record::Value& into, const record::Value& add);
// The same for a module's globals, where `add` may bring globals `into` lacks.
void mergeGlobals(record::Value& into, const record::Value& add);
// Removes the value at `steps` below root, if the snapshot holds it.
void removeFromSnapshot(record::Value& root, const std::vector<record::PathStep>& steps);

}  // namespace magpy::capture

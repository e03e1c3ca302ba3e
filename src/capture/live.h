// Records applied to live Python objects: access paths resolved with
// getattr/getitem, guards checked, mocks applied, values snapshotted into
// the record's value trees. This is the JIT's side of what
// replay/{state,guards,mock} do for native state.
#pragma once

#include <ATen/core/ivalue.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "capture/pyobjects.h"
#include "magpy/record/record.h"

namespace magpy::capture {

struct LiveRoots {
  PyObject* self = nullptr;
  PyObject* args = nullptr;    // tuple
  PyObject* kwargs = nullptr;  // dict or null
  std::string homeModule;
};

// The object at path, or null (with no Python error pending) when some
// step does not exist.
PyRef resolveLive(const record::AccessPath& path, const LiveRoots& roots);

struct LiveMiss {
  std::string path, expected, actual;
};

// A set of access paths compiled into a prefix tree: a call resolves each
// shared prefix once (self.layer1 for all of layer1's parameters), and
// nn.Module attributes are looked up in the module's dicts directly rather
// than through Module.__getattr__ in Python.
class LivePaths {
 public:
  int add(const record::AccessPath& path);  // the node naming path

  // The objects resolved for one call.
  class Values {
   public:
    Values(const LivePaths& paths, const LiveRoots& roots);
    PyObject* get(int node);  // borrowed; null when the path leads nowhere
    const LiveRoots& roots() const { return roots_; }

   private:
    const LivePaths& paths_;
    const LiveRoots& roots_;
    std::vector<PyRef> values_;
    std::vector<uint8_t> state_;  // 0 unresolved, 1 resolved, 2 missing
  };

 private:
  struct Node {
    int parent = -1;       // -1: a root
    record::AccessPath root;
    record::PathStep step;
    PyRef key;             // step's name or key as a Python object
  };
  std::vector<Node> nodes_;
  std::map<std::pair<int, record::PathStep>, int> children_;
  std::map<record::AccessPath, int> roots_;
};

// A record prepared for running on live objects: its guards (types and
// identities compare by pointer with what the monitored run saw), its graph
// inputs and its mock, all over one LivePaths.
class LiveRecord {
 public:
  LiveRecord(const record::Record& record, std::vector<PyRef> expected, const std::vector<record::AccessPath>& inputs);

  std::optional<LiveMiss> check(LivePaths::Values& v) const;
  std::vector<c10::IValue> inputs(LivePaths::Values& v) const;  // throws Error
  PyRef mock(const std::vector<c10::IValue>& outputs, LivePaths::Values& v) const;  // throws Error
  const LivePaths& paths() const { return paths_; }

 private:
  struct GuardStep {
    const record::Guard* guard;
    int node;
    int other = -1;  // Alias: the other path's node
    PyRef expected;
    c10::ScalarType dtype = c10::ScalarType::Undefined;
    bool subclassTyped = false;  // Tensor: a Type guard on the same path admits a tensor subclass
  };
  record::Record record_;
  LivePaths paths_;
  std::vector<GuardStep> guards_;
  std::vector<int> inputs_;
  std::map<record::AccessPath, int> mockPaths_;
};

// Deduplicated tensor contents for a record file.
class BlobPool {
 public:
  uint32_t add(const at::Tensor& t);
  std::vector<record::TensorBlob>& blobs() { return blobs_; }

 private:
  std::vector<record::TensorBlob> blobs_;
  std::map<uint64_t, uint32_t> byHash_;
};

// The steps below an object that a snapshot must include (attributes of
// objects are taken only when asked for; containers are taken whole).
struct PathTrie {
  std::map<record::PathStep, PathTrie> children;
  void insert(const std::vector<record::PathStep>& steps, size_t from = 0);
};

// A value tree for o. `content` may supply a tensor's contents from before
// the run changed them.
using ContentLookup = std::function<const at::Tensor*(const at::Tensor&)>;
record::Value snapshot(PyObject* o, const PathTrie& wanted, BlobPool& blobs, const ContentLookup& content = {});

// Merges `add` into `into`, keeping what `into` already has (first read
// wins): objects gain the attributes `into` lacks; containers, taken whole
// when first read, gain nothing.
void mergeSnapshot(record::Value& into, const record::Value& add);
// The same for a module's globals, where `add` may bring globals `into` lacks.
void mergeGlobals(record::Value& into, const record::Value& add);

}  // namespace magpy::capture

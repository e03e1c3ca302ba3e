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

// A record's guards, prepared for checking against live objects: types and
// identities compare by pointer with the objects the monitored run saw.
class LiveGuards {
 public:
  LiveGuards(const std::vector<record::Guard>& guards, std::vector<PyRef> expected);
  std::optional<LiveMiss> check(const LiveRoots& roots) const;

 private:
  std::vector<record::Guard> guards_;
  std::vector<PyRef> expected_;  // per guard: the type or object an identity/type check wants
};

// Runs a record's mock on live objects; returns the call's result.
PyRef applyLiveMock(const record::MockSpec& mock, const std::vector<c10::IValue>& outputs, const LiveRoots& roots);

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

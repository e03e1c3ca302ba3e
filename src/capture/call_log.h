// The call log: what native replay needs to repeat the script's calls of
// compiled functions: each logged call's arguments, the random generator's
// state, its result, and the state changes the script made since the
// previous logged call (so that replay sees them before the call).
#pragma once

#include <Python.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "capture/units.h"
#include "magpy/record/record.h"

namespace magpy::capture {

class CallLog {
 public:
  using StateKey = std::pair<int, record::AccessPath>;  // (unit, path); -1 for module-rooted paths
  // Which tree a state path of unit u is in, and the path with its module
  // named: (u, path) for `self`, (-1, G(module)...) for globals.
  static StateKey stateKey(const Units& units, size_t u, record::AccessPath p);

  explicit CallLog(BlobPool& blobs);
  ~CallLog();

  std::vector<record::LoggedCall> calls;

  // What changed since the calls logged so far: unit u's own state, and
  // every module global any compiled unit reads (replay shares them all),
  // and interpreter state replay can set.
  std::vector<record::StateUpdate> changesBefore(const Units& units, size_t compiled, size_t u);
  // Remembers the state as a logged call of unit u leaves it: u's own and
  // the module globals. Another unit's `self` changed since its last call
  // is the script's change, logged before that unit's next call.
  void noteExit(const Units& units, size_t compiled, size_t u);
  // A call's arguments along the paths the unit's records read; keyword
  // arguments go to *kwOut. An argument that shares memory with the state
  // (stateMemory: f(model.weight)) becomes a placeholder no guard accepts:
  // a record file would hold two tensors where the script has one.
  // The state's tensors by their memory: the tensor (its TensorImpl) at
  // each path compiled units read.
  struct StateTensor {
    const void* tensor;
    record::AccessPath path;
  };
  using StateMemory = std::multimap<const void*, StateTensor>;
  StateMemory stateMemory(const Units& units, size_t compiled);
  // The lists and dicts at the paths compiled units read, by identity.
  std::multimap<PyObject*, record::AccessPath> stateObjects(const Units& units, size_t compiled);
  // What unit u's state paths hold now, in Unit::statePaths' order (null
  // where one leads nowhere), each shared prefix resolved once; with
  // globalsOnly, only the module-rooted ones (the others null).
  std::vector<PyRef> stateValues(const Units& units, size_t u, bool globalsOnly = false);
  record::Value snapshotArgs(const Unit& fn, PyObject* args, PyObject* kwargs, record::Value* kwOut,
                             const StateMemory& stateMemory);

  // Distinct argument tensors that share memory (f(t, t.view(4))): a record
  // file keeps each tensor's contents apart. Found by snapshotArgs for the
  // call being logged; where the record that served it writes an input in
  // place, keepsApart replaces them in the logged arguments with
  // placeholders no guard accepts, so native replay refuses that call
  // rather than run it on independent copies.
  struct SharedTensor {
    bool keyword = false;
    std::vector<record::PathStep> steps;  // below args or kwargs
    std::string with;                     // the argument it shares memory with
  };
  const std::vector<SharedTensor>& sharedTensors() const { return shared_; }
  static void keepsApart(record::LoggedCall& call, const std::vector<SharedTensor>& shared);
  // An argument the record that served the call found to be the state's
  // own object (an Alias guard between an argument's path and the
  // state's: f(model.weight)) becomes such a placeholder too: the logged
  // copy would be another object, which other records could take.
  static void keepsStateIdentity(record::LoggedCall& call, const std::vector<record::Guard>& guards);

 private:
  std::vector<SharedTensor> shared_;
  // What a state path held when the last logged call returned; a
  // difference at the next call's entry is a change the script made.
  struct Seen {
    bool exists = false;
    PyObject* object = nullptr;  // identity
    int64_t version = -1;        // tensors: the in-place version counter
    uint64_t contents = 0;       // containers: their elements, shallowly; bound methods: what they are bound to;
                                 // tensors: memory, layout and contents
    record::Atom atom;
    // The objects whose addresses object and contents hold, kept until
    // the next observation: a new object at a freed one's address would
    // otherwise look unchanged. Not compared. Objects that take weak
    // references are held by one, in weaklyHeld (keeping them alive would
    // change what the script's ref() returns); one that died makes the
    // observation differ.
    std::vector<PyRef> held, weaklyHeld;
    bool alive() const;
    bool operator==(const Seen& o) const {
      return exists == o.exists && object == o.object && version == o.version && contents == o.contents &&
             atom == o.atom && alive() && o.alive();
    }
  };
  // What state path `path` (among `tracked`, the unit's) holds: v.
  static Seen observe(const PyRef& v, const record::AccessPath& path, const std::set<record::AccessPath>& tracked);
  // Per unit, its state paths over one PathTree (remade when they change).
  struct StateTree;
  std::vector<std::unique_ptr<StateTree>> trees_;


  BlobPool& blobs_;
  std::map<StateKey, Seen> lastExit_;
  // Interpreter state replay can set, as replay would have it after the
  // calls logged so far (it starts from a fresh process's).
  std::map<std::string, record::Atom> runtimeLogged_;
};

}  // namespace magpy::capture

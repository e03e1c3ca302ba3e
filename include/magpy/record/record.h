// The record model: what magpy-capture writes and magpy-run replays.
//
// A RecordFile holds, per compiled function, its records (guard + graph +
// mock), the initial external state those records read, a log of the calls
// made while capturing (with their inputs and results), and the tensor
// blobs all of these refer to. See format.h for the byte layout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "magpy/record/graph.h"
#include "magpy/record/guard.h"
#include "magpy/record/mock.h"
#include "magpy/record/value.h"

namespace magpy::record {

// Where and why a monitored run could not stay in the graph.
struct GraphBreak {
  std::string where;     // "model.py:42"
  std::string function;  // qualified name of the Python function: "Net.forward"
  std::string opcode;    // "CALL", "FOR_ITER", ...
  std::string reason;    // "print is not annotated and is native code"
  std::string callee;    // the native function an annotation would make capturable, if any: "zlib.crc32"
  bool operator==(const GraphBreak& o) const {
    return where == o.where && function == o.function && opcode == o.opcode && reason == o.reason && callee == o.callee;
  }
};

std::string toString(const GraphBreak& b);

// The part of the RefGraph (MagPy paper, section 4) a record was built
// from, kept so people can see it (`magpy-inspect --dot refgraph` draws it
// as the paper's Figures 7 and 11 do). Replay never reads it.
struct RefGraphView {
  enum Role : uint8_t {
    kGuarded = 1,  // reached from the entry state through first versions: guards check it
    kWritten = 2,  // changed by the run, or stored into state: the mock writes it
    kResult = 4,   // part of what the call returns
  };
  struct Node {
    std::string label;      // "Tensor float32[1, 10]", "MLP", "3", "external state"
    uint32_t versions = 1;  // more than one: changed in place during the run
    uint8_t roles = 0;      // Role bits
  };
  struct Edge {
    uint32_t from = 0, to = 0;
    uint32_t version = 0;   // the version of `from` the reference belongs to
    std::string label;      // "self", "args[0]", ".weight", "[2]", "['k']", "G(__main__)"
  };
  std::vector<Node> nodes;  // nodes[0] is the external state
  std::vector<Edge> edges;  // of each node's first version, then those later versions changed
};

struct Record {
  std::vector<Guard> guards;       // ordered cheapest first
  Graph graph;
  MockSpec mock;
  std::vector<GraphBreak> breaks;  // empty: the whole call is this record
  // Why autograd could not differentiate the graph's results as it would
  // the program's ("custom autograd Function Mish: its backward needs
  // Python"), or empty. The JIT runs the calls it matches as Python;
  // replay without autograd serves them.
  std::string forwardOnly;
  std::string origin;              // why it exists: "first call", or the call and the guards that missed
  RefGraphView refs;
};

struct CompiledFunction {
  std::string name;    // "__main__.MLP" for a module, "__main__.step" for a function
  std::string module;  // the module whose globals G[...] names
  Value self;          // the state reachable from `self` that records read, at first read
  std::vector<Record> records;
};

// The globals of one module that records read, at first read.
struct ModuleState {
  std::string module;
  Value globals;  // a Dict
};

// A change the script made to state between two calls (not a mock's
// write): replay applies it before the call, so it sees what Python saw.
struct StateUpdate {
  // How what the path names changed: replaced by value; deleted (del
  // obj.x, del G[x]; value is None); or a list, dict or tensor changed in
  // place, which keeps its identity (other paths may name it too) and now
  // holds value's elements or contents.
  enum class How : uint8_t { Replace, Remove, Refill };
  int32_t function = -1;  // the function whose `self` the path starts at; -1 for globals
  AccessPath path;
  How how = How::Replace;
  Value value;
};

// One call made while capturing, kept so replay can repeat the session.
struct LoggedCall {
  uint32_t function = 0;
  int32_t record = -1;      // the record that ran (or was created) for it; -1 = eager
  bool monitored = false;   // true when this call created its record
  Value args;               // Tuple
  Value kwargs;             // Dict
  Value result;
  std::vector<StateUpdate> updates;  // applied before the call
  Value rng;                         // the CPU random generator's state before the call (a uint8 tensor)
};

struct Fingerprint {
  std::string magpy_version;
  std::string python_version;
  std::string torch_version;
  uint64_t annotations_hash = 0;
  bool operator==(const Fingerprint& o) const {
    return magpy_version == o.magpy_version && python_version == o.python_version &&
           torch_version == o.torch_version && annotations_hash == o.annotations_hash;
  }
};

inline constexpr const char* kStateFirstRead = "first read";
inline constexpr const char* kStateAtExit = "exit";

struct RecordFile {
  Fingerprint env;
  std::string script;                 // the captured script, as given on the command line
  // When the compiled functions' `self` state was taken: kStateFirstRead
  // (as each record first read it; the logged calls start from it) or
  // kStateAtExit (as the script left it: trained weights; no call log).
  std::string stateAt = kStateFirstRead;
  std::vector<CompiledFunction> functions;
  std::vector<ModuleState> globals;
  std::vector<LoggedCall> calls;
  std::vector<TensorBlob> blobs;
};

// Drops the blobs nothing in the file refers to any more (a call log left
// out, state taken anew) and renumbers the references to those kept,
// which keep their order.
void dropUnusedBlobs(RecordFile& f);

}  // namespace magpy::record

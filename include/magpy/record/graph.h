// The operator graph: torch.fx's node kinds over ATen operators.
//
// A graph is a list of nodes in execution order. Every node produces one
// value, named by its index. Placeholder and GetAttr nodes read a value from
// the state through an AccessPath; CallFunction nodes run an ATen operator
// ("aten::add" with overload "Tensor") or, for ATen operators that return
// several values, "getitem" picks one of them (as torch.fx does with
// operator.getitem). The Output node lists the values the mock uses.
//
// Dynamic records (MagPy 6.2) also compute Python numbers: aten::size.int
// reads a size from a tensor, an input may read an int or float the
// program keeps in its state, and "operator.add" and its kin
// (isNumberOp) do Python's arithmetic on them, as torch.fx's symbolic
// integers do. "aten::item"(t) (kItem) is the number t.item() read from a
// one-element tensor the graph holds: the optimizer's step count, read
// after the graph incremented it. Operators take such values where the
// program passed them.
//
// Checks (isCheck) hold what the program read of tensors the graph
// computes from the call's data: "magpy.expect_equal"(t, c) where Python
// read t's contents (t.item(), int(t)) and c is a constant with the
// contents it saw, "magpy.expect_sizes"(t, [sizes]) where Python read the
// sizes of a result whose shape depends on tensor contents (nonzero),
// "magpy.expect_true"(b) where Python decided on a comparison of numbers
// the graph computes (b is that comparison, as it held). A
// call where a check fails is not the captured one: replay stops there
// and the call misses the record. Capture keeps a check only where it
// runs before the graph's first in-place write of its inputs or random
// draw (replay::planOrder), so stopping there changes nothing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "magpy/record/path.h"
#include "magpy/record/value.h"

namespace magpy::record {

enum class NodeKind : uint8_t {
  Placeholder,   // a tensor (or lifted number) read from the call's arguments
  GetAttr,       // a tensor (or lifted number) read from state (parameters, buffers, globals)
  CallFunction,  // an ATen operator, "getitem", number arithmetic or a check
  CallMethod,    // kept for torch.fx compatibility; capture does not emit it
  CallModule,    // kept for torch.fx compatibility; capture does not emit it
  Output,
};

const char* toString(NodeKind k);

// The grad mode an operator runs in. Most run in the caller's (Ambient);
// operators inside a region the function switched (`with torch.no_grad():`,
// torch.set_grad_enabled(False), torch.enable_grad()) carry that region's
// mode, as Dynamo's graphs carry _set_grad_enabled calls: autograd replay
// switches to it around the operator. A record with such operators guards
// the grad mode at entry. Replay without autograd ignores it.
enum class GradMode : uint8_t { Ambient, Off, On };
const char* toString(GradMode m);  // "", "no_grad", "enable_grad"

// One argument of a CallFunction node, typed as the operator schema types it.
// A size the program read from a tensor (x.shape[1]) and passed on is a
// Node argument naming an aten::size.int node, or an entry of a SizeList,
// so replay reads it from the call's tensors (dynamic records).
struct Arg {
  enum class Kind : uint8_t {
    None, Bool, Int, Float, Str,
    Node,          // i = node index
    IntList, FloatList, BoolList,
    NodeList,      // ints = node indices; -1 marks a None entry (Tensor?[])
    DType, Device, Layout, MemoryFormat,  // s = name
    WrappedScalar,  // a Python number passed where a Tensor is expected (x + 2.0):
                    // s = "float64"/"int64"/"bool", value in f or i
    SizeList,       // an int[] some of whose entries are sizes the graph reads
                    // (aten::size.int nodes): ints = pairs (0, value) or (1, node)
    NumberList,     // a float[] or Scalar[] of floats some of whose entries are float
                    // numbers the graph computes (the foreach optimizers' step sizes):
                    // ints = a node per entry, -1 where the entry is the constant floats[k]
    Group,          // a collective's process group: the one replay runs in (isCollective)
  };
  Kind kind = Kind::None;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;

  static Arg none() { return {}; }
  static Arg node(int64_t index) { Arg a; a.kind = Kind::Node; a.i = index; return a; }
  static Arg integer(int64_t v) { Arg a; a.kind = Kind::Int; a.i = v; return a; }
  static Arg floating(double v) { Arg a; a.kind = Kind::Float; a.f = v; return a; }
  static Arg boolean(bool v) { Arg a; a.kind = Kind::Bool; a.i = v; return a; }
  bool operator==(const Arg& o) const;
};

struct Node {
  NodeKind kind = NodeKind::CallFunction;
  std::string name;      // unique, torch.fx style: "x", "fc1_weight", "linear_1"
  std::string target;    // CallFunction: "aten::linear" or "getitem"; GetAttr: "fc1.weight"
  std::string overload;  // ATen overload name, "" for the default overload
  std::vector<Arg> args; // CallFunction: one per schema argument; getitem: (node, index)
  AccessPath source;     // Placeholder/GetAttr: where replay reads the value
  int64_t blob = -1;     // GetAttr of a constant tensor made during the run: its blob
  std::vector<TensorMeta> outputs;  // metadata of each tensor result seen at capture
  std::string where;     // user source location that issued the op: "mlp.py:14"
  // A Python number (MagPy 6.2.1): "int" or "float" for an input that
  // reads one from the state and for number arithmetic (isNumberOp),
  // "bool" for a comparison; empty for tensors and ATen operators.
  std::string number;
  Atom seen;  // a number input or arithmetic: its value at capture (as `outputs` keep a tensor's sizes)
  GradMode grad = GradMode::Ambient;  // an ATen operator's region

  bool isOp() const;
  bool isInput() const { return kind == NodeKind::Placeholder || kind == NodeKind::GetAttr; }
  std::string opName() const { return overload.empty() ? target : target + "." + overload; }
};

// Python's arithmetic on the numbers a graph computes (sizes it reads,
// lifted numbers), with torch.fx's names where it has them:
//   two operands: operator.add, sub, mul, truediv, floordiv, mod, pow; builtins.min, max
//   one operand:  operator.neg, builtins.abs, int, float; math.sqrt, ceil, floor
//   comparisons:  operator.lt, le, gt, ge, eq, ne (a "bool": only checks take it)
bool isNumberOp(const std::string& target);
enum class NumberOp : uint8_t {
  None, Add, Sub, Mul, TrueDiv, FloorDiv, Mod, Pow, Min, Max,  // two operands
  Neg, Abs, Int, Float, Sqrt, Ceil, Floor,                // one
  Lt, Le, Gt, Ge, Eq, Ne,                                 // comparisons: a bool
};
// The operator a target names (NumberOp::None for other targets), and its
// target back (a string that lives as long as the program).
NumberOp numberOpOf(const std::string& target);
const char* numberOpTarget(NumberOp op);
// How many operands a number operator takes (1 or 2); 0 for other targets.
int numberOpArity(const std::string& target);
// The type ("int", "float" or "bool") of a number operator's result for
// its operands' types ("int" or "float"; `right` empty for one operand),
// or "" where the operator does not take them. min and max take two of a
// type: which one they return would decide the type.
std::string numberOpResult(const std::string& target, const std::string& left, const std::string& right = "");

// "aten::item"(%t): the Python number in the one-element tensor %t, typed
// "int" or "float" by t's dtype; an ATen operator (isOp) that computes a number.
constexpr const char* kItem = "aten::item";
bool readsItem(const Node& n);

constexpr const char* kExpectEqual = "magpy.expect_equal";
constexpr const char* kExpectSizes = "magpy.expect_sizes";
// magpy.expect_true(%b): a decision the program made on numbers the graph
// computes (`if t > 8`, `assert d % heads == 0`), written as the
// comparison that held at capture (a predicate, MagPy's constraint guard).
constexpr const char* kExpectTrue = "magpy.expect_true";
bool isCheck(const std::string& target);

// Loops (MagPy 6.2.2): a Python loop whose iterations run the same
// operators is a region of the node list, as a body that runs `trip` times:
//
//   %i = magpy.loop(trip, [%init_0, ..., %init_C-1])  : int  the iteration's index
//   %h = magpy.carried(%i, j)           carried value j in this iteration, j = 0..C-1,
//                                       right after the loop node (init_j in the first)
//   ...                                 the body: uses values defined before it, outside
//                                       or in the region
//   %e = magpy.loop_end(%i, [%next_0, ..., %next_C-1], [%scan_0, ...])
//   getitem(%e, j)                      carried value j after the last iteration (j < C)
//   getitem(%e, C + s)                  the list of scan_s over the iterations (what the
//                                       program appended), for an operator's Tensor[]
//
// trip is an Int or an int node (a size the program ranged over); a call
// whose trip count is below 1 misses the record (capture saw at least two
// iterations: with none the program's Python would differ). Nothing after
// the loop uses the body's values but through its end. Regions nest at
// most kMaxLoopNesting deep; body nodes never read inputs (those come
// before the loop).
constexpr const char* kLoop = "magpy.loop";
constexpr const char* kCarried = "magpy.carried";
constexpr const char* kLoopEnd = "magpy.loop_end";
constexpr int kMaxLoopNesting = 4;
// Iterations of one loop, and of all loops together in one call: replay
// stops a call past it (time beyond memory: a body may allocate nothing).
constexpr int64_t kMaxTripCount = int64_t(1) << 22;
bool isLoopMarker(const std::string& target);

// Branches (MagPy 6.2.2): a Python `if` on a tensor's truth (`if keep[i]:`)
// whose sides leave the program's Python state as they found it, but for
// the tensors its variables hold, is a region of two sides:
//
//   %b = magpy.if(%cond, then_seen, else_seen, [places])
//                                                %cond: a one-element tensor,
//                                                taken as Python's bool(t)
//   ...                                          the then side (empty if unseen)
//   %t = magpy.if_else(%b, [%then_0, ..., %then_K-1])    its values ([] if unseen)
//   ...                                          the else side (empty if unseen)
//   %e = magpy.if_end(%b, [%else_0, ..., %else_K-1])     its values ([] if unseen)
//   getitem(%e, j)                               value j of the side that ran
//
// then_seen and else_seen are Bools: a side capture never ran is unseen,
// and a call whose condition picks it misses the record (as a check
// would). At least one side is seen; seen sides give one tensor per
// place: the program's variables (its frame's slots, locals then stack,
// numbered in increasing order) that hold a tensor where the sides meet. Side nodes use values from before the branch and their own
// side's; nothing after the branch uses them but through its end; sides
// read no inputs. Branches and loops nest at most kMaxLoopNesting deep
// together.
constexpr const char* kIf = "magpy.if";
constexpr const char* kIfElse = "magpy.if_else";
constexpr const char* kIfEnd = "magpy.if_end";
bool isIfMarker(const std::string& target);
// A magpy.if with a side capture never saw: a call may stop there, as at a check.
bool hasUnseenSide(const Node& branch);
// A loop's or a branch's marker: the bounds of a region.
bool isRegionMarker(const std::string& target);

// Autograd (training steps): the program's `loss.backward()` inside the
// call is one node, run by libtorch's autograd engine over the autograd
// graph the call's own operators built (replay runs them with autograd):
//
//   %g = magpy.backward(%root, %grad_or_None, [%leaf_0, ..., %leaf_L-1], retain_graph)
//   getitem(%g, k)          the gradient of leaf k, laid out as autograd
//                           stores a first gradient (a tensor of its own)
//
// %root is the tensor differentiated; %grad its gradient (None: ones, for
// a one-element root, as torch.autograd.backward makes). The leaves are
// graph inputs that require grad: every tensor whose .grad the engine
// accumulates into (capture saw it reach exactly these, with no hooks).
// The node stores nothing: where a leaf's .grad was None the mock sets it
// to getitem(%g, k); where it held a tensor, aten::add_ adds getitem(%g, k)
// into it, as autograd's accumulation does. retain_graph is a Bool.
// Outside loops and branches only.
constexpr const char* kBackward = "magpy.backward";

// Collectives (torch.distributed; c10d's operators in libtorch's
// dispatcher) reduce or broadcast tensors in place across the ranks of a
// process group:
//
//   %c = c10d::allreduce_([%t], group, op, timeout)
//   %c = c10d::broadcast_([%t], group, root_rank, 0, timeout)
//   getitem(%c, 0)          the tensor once the collective completed
//
// (one tensor each, as torch.distributed passes them: c10d's lists are one
// tensor per device)
// group is an Arg::Kind::Group: the group the process replays in
// (torch.distributed's default group in the JIT, the one magpy-run forms
// from torchrun's environment), never an object the record holds. op is
// the code of c10d's ReduceOp (kReduceOps: SUM 0, PRODUCT 2, MIN 3, MAX 4,
// BAND 5, BOR 6, BXOR 7), timeout -1 (the group's own). Their schemas mark
// no write: replay counts the tensors as written, keeps every collective
// and its order, and waits for each before the next node. A record with
// collectives guards the group's size and backend (runtime.dist_world_size,
// runtime.dist_backend).
bool isCollective(const std::string& target);
// Whether a ReduceOp code is one a record may hold.
bool isRecordedReduceOp(int64_t code);

struct Graph {
  std::vector<Node> nodes;

  const Node* output() const;
  size_t numOps() const;  // CallFunction nodes that run ATen operators
};

// Whether the graph differentiates (holds a magpy.backward): replay then
// runs it with autograd, and no pass may change what autograd records.
bool hasBackward(const Graph& g);
// Whether the graph runs a collective.
bool hasCollectives(const Graph& g);

}  // namespace magpy::record

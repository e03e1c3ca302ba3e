// Loops over a size (MagPy 6.2.2). The graph can hold `for i in range(n)`
// as one body run n times when every iteration does the same: the record
// builder compares the operators each iteration recorded (loop_rolling.h);
// the monitor vouches for what operators do not show.
//   - The iterations begin in equivalent states: the loop's frame holds,
//     slot by slot, the same object, a tensor, an equal atom, or a number
//     the graph computes in the loop (from the index: the graph compares
//     its uses). A body that reads its own Python state otherwise would
//     not repeat.
//   - The body writes no object that outlives an iteration, but tensors
//     (operators record those writes), lists and dicts whose contents are
//     equivalent at each iteration start, and lists it appends to.
//   - Those lists are read, from the loop on, only whole by operators
//     (torch.stack(outputs)): len(outputs), outputs[k] or `if outputs`
//     would decide on how many iterations ran.
//   - The index is used only where the graph computes with it.
//   - The body advances no iterator or generator made before its
//     iteration (its position is state no shadow node shows).
//   - The loop runs to the end of its range (no break or return) and
//     does not yield (its caller's code would run in the iterations).
#include "capture/monitor/monitor.h"
#include "capture/monitor/state.h"

#include "magpy/record/graph_utils.h"

namespace magpy::capture {
namespace {

constexpr int kMaxStateDepth = 2;  // tuples of tuples in a frame's locals

}  // namespace

bool movesOnly(Op op) {
  switch (op) {
    case Op::LOAD_FAST: case Op::STORE_FAST: case Op::LOAD_DEREF: case Op::STORE_DEREF: case Op::LOAD_CLOSURE:
    case Op::COPY: case Op::SWAP: case Op::POP_TOP: case Op::RETURN_VALUE: case Op::PRECALL:
      return true;
    default:
      return false;
  }
}

// An iterator or generator keeps its position where no shadow node
// shows it: each iteration that advances one made before it reads
// another state.
bool Monitor::advancesIterator(NodeId n) const {
  PyObject* obj = refs_.node(n).obj;
  return obj && refs_.node(n).kind == NodeKind::Object && (PyIter_Check(obj) || PyGen_Check(obj));
}

// range(n) with n a number the graph computes from sizes alone: its node.
int Monitor::loopTrip(const Pending& p) {
  if (p.calleeName != "builtins.range" || p.positional.size() != 1 || !p.keywords.empty() || !sizes_.active()) return -1;
  NodeId n = p.positional[0];
  if (!numbers_.liftable(n)) return -1;
  int node = numbers_.graphNode(n);
  if (node < 0) return -1;
  // From sizes alone: a number of the state or an index has a value the
  // monitor fixes by other rules.
  const record::Graph& g = ops_->graph();
  std::vector<int> stack{node};
  while (!stack.empty()) {
    int i = stack.back();
    stack.pop_back();
    const record::Node& at = g.nodes[size_t(i)];
    bool size = at.target == "aten::size";
    if (at.isInput() || loopOfIndex_.count(i) || (!size && at.number.empty())) return -1;
    if (size) continue;
    for (const record::Arg& a : at.args)
      if (a.kind == record::Arg::Kind::Node) stack.push_back(int(a.i));
  }
  return g.nodes[size_t(node)].number == "float" ? -1 : node;
}

void Monitor::rangeMade(NodeId range, int trip) {
  if (loopRuns_.empty()) {
    numbers_.onIndexFixed([this](int index, const std::string& how) {
      failLoop(loopOfIndex_.at(index), "its index is used where the graph cannot compute with it: " + how);
    });
    numbers_.onIndexUntaken([this](int node, int index) { loopRuns_[loopOfIndex_.at(index)].span.untaken.push_back(node); });
  }
  loopOf_[range] = loopRuns_.size();
  LoopRun run;
  run.span.trip = trip;
  run.where = currentLocation();
  loopRuns_.push_back(std::move(run));
  loopWatches_.push_back({});
  loopWatches_.back().range = range;
}

void Monitor::failLoop(size_t loop, const std::string& why) {
  if (loopRuns_[loop].why.empty()) loopRuns_[loop].why = why;
}

// At each instruction's start, once a loop over a size was made: what it
// does with their ranges, iterators and lists.
void Monitor::watchLoops(ShadowFrame& sf, const Pending& p) {
  ++step_;
  if (p.ins.op == Op::YIELD_VALUE)  // the caller's code would run in each iteration, with its own state
    for (size_t k = 0; k < loopWatches_.size(); ++k)
      if (loopWatches_[k].open && loopWatches_[k].frame == &sf) failLoop(k, "it yields");
  bool appends = p.calleeName == "builtins.list.append" || p.ins.op == Op::LIST_APPEND;
  bool operatorCall = p.annotation && p.annotation->op;
  for (NodeId in : p.inputs) {
    if (in < 0) continue;
    if (auto it = loopOf_.find(in); it != loopOf_.end()) {
      LoopWatch& w = loopWatches_[it->second];
      bool moves = p.ins.op == Op::LOAD_FAST || p.ins.op == Op::STORE_FAST || p.ins.op == Op::PRECALL;
      if (p.ins.op == Op::FOR_ITER && in == w.iterator) loopIterates(sf, it->second);
      else if (!(p.ins.op == Op::GET_ITER && in == w.range) && !moves && !comprehensionOf(p, in, w))
        failLoop(it->second, in == w.iterator ? "it ends before its range does (break, return or next())"
                                              : "its range object is used otherwise than iterated");
      continue;
    }
    if (!movesOnly(p.ins.op) && advancesIterator(in))
      for (size_t k = 0; k < loopWatches_.size(); ++k)
        if (loopWatches_[k].open && size_t(in) < loopWatches_[k].refsAtIteration)
          failLoop(k, "it advances an iterator or generator made before its iteration");
    if (refs_.node(in).kind == NodeKind::List && !movesOnly(p.ins.op) && !appends && !operatorCall &&
        !(p.ins.op == Op::LOAD_METHOD && utf8(instructionName(sf.view.code(), p.ins)) == "append"))
      listRead_[in] = step_;
  }
}

// [f(x[t]) for t in range(n)] passes the range's iterator to the
// comprehension's function, whose frame runs the loop.
bool Monitor::comprehensionOf(const Pending& p, NodeId in, const LoopWatch& w) const {
  if (p.ins.op != Op::CALL) return false;
  if (in != w.iterator || !p.inlined || p.calleeFunction < 0 || w.frame) return false;
  PyObject* f = refs_.node(p.calleeFunction).obj;
  if (!f || !PyFunction_Check(f)) return false;
  std::string name = utf8(reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(f))->co_name);
  return name == "<listcomp>" || name == "<dictcomp>" || name == "<setcomp>";
}

void Monitor::loopIterates(ShadowFrame& sf, size_t loop) {
  LoopWatch& w = loopWatches_[loop];
  LoopRun& run = loopRuns_[loop];
  if (!w.frame) w.frame = &sf;  // the frame that iterates (a comprehension's, or the one that made the range)
  if (&sf != w.frame) failLoop(loop, "it continues in another frame");
  std::vector<NodeId> places = sf.locals;
  places.insert(places.end(), sf.stack.begin(), sf.stack.end());
  int first = run.span.starts.empty() ? int(ops_->graph().nodes.size()) : run.span.starts.front();
  int previous = run.span.starts.empty() ? -1 : run.span.starts.back();
  StateParts state = describeAll(places, first, previous);
  bool firstTwo = run.span.starts.size() == 1;  // comparing the first iteration's start with the second's
  if (!w.open) {
    w.open = true;
    w.stepAtStart = step_;
    for (size_t k = 0; k < loopWatches_.size(); ++k)
      if (k != loop && loopWatches_[k].open) failLoop(k, "it holds another loop over a size");
  } else if (std::string why = stateDiffers(sf, w.lastState, state, firstTwo); !why.empty()) {
    failLoop(loop, "iteration " + std::to_string(run.span.starts.size()) + " begins with " + why);
  } else if (std::string why = containersDiffer(w, first, previous, firstTwo); !why.empty()) {
    failLoop(loop, "iteration " + std::to_string(run.span.starts.size()) + " begins with " + why);
  }
  w.lastState = std::move(state);
  w.refsAtIteration = refs_.size();
  run.span.starts.push_back(int(ops_->graph().nodes.size()));
}

// FOR_ITER finished: the next index (its graph node begins the
// iteration), or the end of the range.
void Monitor::loopAdvanced(Step& s, size_t loop) {
  LoopWatch& w = loopWatches_[loop];
  LoopRun& run = loopRuns_[loop];
  if (s.out.empty()) {
    run.span.starts.pop_back();  // FOR_ITER began as if for another iteration, and compared its state
    w.open = false;
    run.span.end = int(ops_->graph().nodes.size());
    return;
  }
  int64_t k = int64_t(run.span.starts.size()) - 1;
  if (int(ops_->graph().nodes.size()) != run.span.starts.back()) failLoop(loop, "its iterator ran operators");
  int index = ops_->addNumberOp("builtins.int", {record::Arg::integer(k)}, "int", record::Atom::integer(k));
  loopOfIndex_[index] = loop;
  numbers_.bindIndex(s.out[1], index);
}

// A write the run made while loops run: tensors (their operators are
// recorded), objects the current iteration made, and lists and dicts
// (whose contents each iteration begins with are compared) are the only
// ones a body may make.
void Monitor::loopWrites(NodeId written) {
  const ShadowNode& n = refs_.node(written);
  for (size_t k = 0; k < loopWatches_.size(); ++k) {
    LoopWatch& w = loopWatches_[k];
    if (!w.open || n.kind == NodeKind::Tensor || size_t(written) >= w.refsAtIteration) continue;
    if (n.kind != NodeKind::List && n.kind != NodeKind::Dict) {
      failLoop(k, "it writes a " + typeName(Py_TYPE(n.obj)) + " object that outlives an iteration");
    } else if (!w.containers.count(written)) {
      // as the current iteration began (the one before it began where it ended)
      const std::vector<int>& starts = loopRuns_[k].span.starts;
      int previous = starts.size() > 1 ? starts[starts.size() - 2] : -1;
      w.containers.emplace(written, contentsOf(written, starts.front(), previous));
    }
  }
}

// The run ended: loops that never reached their end, and lists read after
// a loop appended to them.
void Monitor::finishLoops() {
  for (size_t k = 0; k < loopWatches_.size(); ++k) {
    const LoopWatch& w = loopWatches_[k];
    if (w.open || loopRuns_[k].span.end < 0) failLoop(k, "it ends before its range does (break, return or next())");
    for (NodeId list : w.grown)
      if (auto it = listRead_.find(list); it != listRead_.end() && it->second > w.stepAtStart)
        failLoop(k, "a list it appends to is read (len, an index, a truth test, a Python call)");
  }
}

void Monitor::keepsUnrolled(const LoopRun& loop, const std::string& why) {
  sizes_.use("the loop over range() of a size at " + loop.where + " stays unrolled: " + why);
}

// Where two iteration-begin states differ, in words; "" where they are
// equivalent. first: the states the first two iterations begin with.
std::string Monitor::stateDiffers(const ShadowFrame& sf, const StateParts& before, const StateParts& now,
                                  bool first) const {
  if (before.size() != now.size()) return "another stack";
  for (size_t i = 0; i < now.size(); ++i)
    if (!samePlace(before[i], now[i], first)) {
      int locals = sf.view.numLocals();
      return int(i) < locals ? "another kind of value in `" + utf8(codeLocalName(sf.view.code(), int(i))) + "`"
                             : "another value on the stack";
    }
  return "";
}

// The lists and dicts the loop wrote hold equivalent values, as the
// frame's locals do; a list that grew is one the loop appends to, which
// nothing may read (finishLoops).
std::string Monitor::containersDiffer(LoopWatch& w, int first, int previous, bool firstTwo) {
  for (auto& [node, before] : w.containers) {
    LoopWatch::Contents now = contentsOf(node, first, previous);
    bool same = now.keys == before.keys;
    for (size_t k = 0; same && k < now.items.size(); ++k) same = samePlace(before.items[k], now.items[k], firstTwo);
    if (!same && refs_.node(node).kind == NodeKind::List && now.keys.size() > before.keys.size()) w.grown.insert(node);
    else if (!same) return "another value in a " + typeName(Py_TYPE(refs_.node(node).obj)) + " it writes";
    before = std::move(now);
  }
  return "";
}

Monitor::LoopWatch::Contents Monitor::contentsOf(NodeId container, int first, int previous) const {
  LoopWatch::Contents c;
  std::vector<NodeId> items;
  for (const Edge& e : refs_.node(container).last().refs) {
    c.keys.push_back(e.rel);
    items.push_back(e.target);
  }
  c.items = describeAll(items, first, previous);
  return c;
}

Monitor::StateParts Monitor::describeAll(const std::vector<NodeId>& places, int first, int previous) const {
  StateParts parts(places.size());
  for (size_t i = 0; i < places.size(); ++i) describeState(places[i], first, previous, parts[i], 0);
  return parts;
}

// What an iteration finds at n as it begins; first: where the loop's
// first iteration began (or begins).
void Monitor::describeState(NodeId n, int first, int previous, std::vector<StatePart>& out, int depth) const {
  using K = StatePart::Kind;
  if (n < 0) {
    out.push_back({K::Unbound, 0, {}});
    return;
  }
  const ShadowNode& node = refs_.node(n);
  switch (node.kind) {
    case NodeKind::Tensor: {
      int value = ops_->valueOf(tensorOf(node.obj));
      if (value < 0 || ops_->graph().nodes[size_t(value)].isInput()) {
        out.push_back({K::Entry, n, {}});  // the object, whether the graph read it yet or not
      } else if (value < first) {
        out.push_back({K::Outer, value, {}});
      } else {
        // the iteration that computed it: the one before, or an earlier one
        out.push_back({previous >= 0 && value >= previous ? K::Previous : K::Older, 0, {}});
      }
      return;
    }
    case NodeKind::Atom:
      if (node.dataDependent) out.push_back({K::Older, 0, {}});
      else if (numbers_.knownNode(n) >= first) out.push_back({K::Number, 0, {}});
      else out.push_back({K::Atom, 0, node.atom});
      return;
    case NodeKind::Tuple:
      if (depth < kMaxStateDepth) {
        out.push_back({K::Tuple, int64_t(node.last().refs.size()), {}});
        for (const Edge& e : node.last().refs) describeState(e.target, first, previous, out, depth + 1);
        return;
      }
      break;
    default:
      break;
  }
  out.push_back({K::Same, n, {}});  // another object, list or dict: its contents may differ
}

// A place as one iteration began (before) and the next (now).
bool Monitor::samePlace(const std::vector<StatePart>& before, const std::vector<StatePart>& now, bool first) {
  using K = StatePart::Kind;
  // A local the loop binds first (its target, a value it computes) has
  // no value before it: the body binds it before reading it.
  if (before.size() == 1 && before[0].kind == K::Unbound) return true;
  if (before.size() != now.size()) return false;
  for (size_t k = 0; k < now.size(); ++k) {
    const StatePart& a = before[k];
    const StatePart& b = now[k];
    bool same = false;
    switch (b.kind) {
      case K::Number:  // where the body reads it, the graph compares what it computes
        same = a.kind == K::Number || a.kind == K::Atom;
        break;
      case K::Previous:  // carried from the value before the loop, then from the iteration before
        same = a.kind == K::Previous || (first && (a.kind == K::Outer || a.kind == K::Entry));
        break;
      case K::Atom:
        same = a.kind == K::Atom && a.atom == b.atom;
        break;
      case K::Older:
      case K::Unbound:
        same = false;
        break;
      default:  // Same, Outer, Tuple
        same = a.kind == b.kind && a.id == b.id;
        break;
    }
    if (!same) return false;
  }
  return true;
}

}  // namespace magpy::capture

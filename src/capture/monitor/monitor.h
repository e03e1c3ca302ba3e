// The monitored run (MagPy paper, section 5): runs a call under a C-level
// trace function with per-opcode events, mirrors every instruction of the
// traced frames onto shadow frames (a ShadowNode per local and stack slot),
// updates the RefGraph by the instruction's semantics and the callees'
// annotations, and lets the OpRecorder build the operator graph from the
// ATen operators the run dispatches.
//
// Anything the graph cannot hold (a dynamic call, an unsupported opcode, an
// exception) is a graph break: the run goes on eagerly and the break is
// reported with its reason and source line.
#pragma once

#include <Python.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "capture/branches.h"
#include "capture/loop_rolling.h"
#include "capture/monitor/numbers.h"
#include "capture/monitor/sizes.h"
#include "capture/op_recorder.h"
#include "capture/pyobjects.h"
#include "capture/python_frame.h"
#include "capture/refgraph.h"
#include "magpy/record/annotations.h"
#include "magpy/record/record.h"

namespace torch::autograd { struct Node; }

namespace magpy::capture {

// What is being called: `function(*args, **kwargs)`, where the function
// reads `self` (the object given to magpy.compile) as node 0's Self edge.
// A function's records with checks (CallSpec::contentChecks) the JIT makes.
constexpr size_t kMaxCheckedRecords = 4;

struct CallSpec {
  PyObject* self = nullptr;       // the compiled object (module, function, bound method's object)
  PyObject* function = nullptr;   // the Python function whose frame is the root
  bool selfIsFirstArg = false;    // modules and bound methods: function(self, *args)
  PyObject* args = nullptr;       // tuple
  PyObject* kwargs = nullptr;     // dict or null
  std::string homeModule;         // the module G[...] refers to
  // Numbers the JIT saw change between calls (MagPy 6.1): the run lifts
  // the ints and floats it reads from its state into the graph, and the
  // record builder lets these paths vary where the run allows it.
  std::set<record::AccessPath> varyingNumbers;
  // Whether the run may check what it reads of tensors computed from the
  // call's data (Monitor::checksContents) instead of breaking: the JIT
  // stops allowing it once the function has kMaxCheckedRecords records
  // with checks, since a value that differs at every call would otherwise
  // make a record per call.
  bool contentChecks = true;
  // Whether the record builder rolls loops over a size (Monitor::loops):
  // only for functions whose records may become dynamic; a static record
  // keeps them unrolled, for backends that lower no loops.
  bool rollLoops = true;
  // Whether the record builder makes branches of checked truth tests
  // (Monitor::branches), which the JIT joins across calls: as rollLoops, a
  // static record keeps its checks instead.
  bool makeBranches = true;
  // Runs the call (its first Python frame is the root of the run); by
  // default, self(*args, **kwargs).
  std::function<PyObject*()> invoke;
};

class Monitor : public OpRecorder::Delegate {
 public:
  explicit Monitor(const record::AnnotationSet& annotations);
  ~Monitor() override;

  // Runs the call, monitored. Returns its result (new reference) or null
  // with the Python exception set, exactly as the plain call would.
  PyObject* run(const CallSpec& call);

  RefGraph& refs() { return refs_; }
  OpRecorder& ops() { return *ops_; }
  const std::vector<record::GraphBreak>& breaks() const { return breaks_; }
  // Why autograd could not differentiate the graph's results as it does
  // the program's (record::Record::forwardOnly), or empty.
  const std::string& forwardOnly() const { return forwardOnly_; }
  // Whether the program's Python code read a tensor's sizes (len, numel,
  // iteration) or used sizes it read (shape, size()) other than by passing
  // them to operators: it may then decide on them, so its record's sizes
  // must not become dynamic.
  bool readSizes() const { return sizes_.used(); }
  const std::string& sizeUse() const { return sizes_.firstUse(); }  // the first such use, and where
  // Whether the run computed with the number at node id only in ways the
  // graph repeats (arithmetic, operator arguments, stores): then its record
  // holds for any value of it. False unless the call lifts numbers.
  bool numberFree(NodeId id) const { return numbers_.free(id); }
  // The graph node of a number the run lifted (an input is added for one
  // read from the state and not used yet), or -1.
  int liftedNumber(NodeId id) { return numbers_.active() && numbers_.liftable(id) ? numbers_.graphNode(id) : -1; }
  // the first use that fixes a number, and where
  const std::string& numberUse() const { return numbers_.firstUse(); }
  std::string numberUse(NodeId id) const { return numbers_.useOf(id); }  // what fixed this number
  NodeId resultNode() const { return result_; }
  // A copy of a tensor's contents from before the run first wrote it.
  const at::Tensor* entryContent(const at::Tensor& t) const;
  // The graph input nodes and the ShadowNodes they were made for.
  const std::vector<std::pair<int, NodeId>>& graphInputs() const { return inputs_; }
  // Tensors the run made from Python data (torch.tensor): graph constants.
  const std::vector<std::pair<int, at::Tensor>>& constants() const { return constants_; }
  // The entry metadata of a tensor node.
  const record::TensorMeta* entryMeta(NodeId id) const;
  // Names whose absence from a node's attributes or keys the run relied on
  // (a global that fell back to a builtin, getattr with a default).
  const std::vector<std::pair<NodeId, Relation>>& absences() const { return absent_; }
  // Methods the run found on an object's class: the instance's __dict__
  // must not shadow them (a monkey-patched `model.forward`).
  const std::set<std::pair<NodeId, std::string>>& classMethods() const { return classMethods_; }
  // Classes the interpreter looked names up on for the run (special
  // methods, methods, properties, descriptors, super()): the JIT serves
  // the record only while none of them, nor a class on their MROs, has
  // changed. Held, so that their addresses are not reused.
  const std::vector<PyRef>& classesRead() const { return classesRead_; }
  // The Python functions whose code the run traced: the JIT serves the
  // record only while each still has that code (__code__ can be replaced).
  const std::vector<PyRef>& functionsRun() const { return functionsRun_; }
  // Interpreter state the run depends on (record::isRuntimeState), with
  // its value when first read: guarded. Every run reads the default dtype
  // (factories, Python floats and constants take it).
  const std::map<std::string, record::Atom>& runtimeReads() const { return runtimeReads_; }

  // Loops over a size (loops.cpp, MagPy 6.2.2): `for i in range(n)`, n a
  // size the graph reads, is recorded iteration by iteration, each
  // beginning with its index node; the record builder rolls it
  // (loop_rolling.h) where the monitor saw nothing against it (`why`
  // empty). A loop that stays unrolled makes its trip count a size the
  // run used (keepsUnrolled): its record keeps its sizes.
  struct LoopRun {
    LoopSpan span;
    std::string why;    // why it cannot roll, as far as the monitor saw
    std::string where;  // the `for` statement
  };
  const std::vector<LoopRun>& loops() const { return loopRuns_; }
  void keepsUnrolled(const LoopRun& loop, const std::string& why);

  // Branches on a tensor's truth (branches.cpp, MagPy 6.2.2): the side
  // of `if t:` the run took, after the recorder's check of t; the record
  // builder makes it a branch (capture/branches.h) where the monitor saw
  // nothing against it (`why` empty).
  struct BranchRun {
    BranchSpan span;
    std::string why;
    std::string where;  // the `if` statement
  };
  const std::vector<BranchRun>& branches() const { return branchRuns_; }
  // Why the run's records join no other's: its Python told tensors apart
  // by identity after a branch (branches.h); "" when it did not.
  const std::string& pathDependent() const { return pathDependent_; }

  // The trace function's entry point (a static trampoline forwards here).
  int onEvent(PyFrameObject* frame, int what, PyObject* arg);
  // Each builtin function Python code calls during the run, traced or not
  // (BuiltinCallWatch).
  void onBuiltinCall(PyObject* callable);
  // Each warning C code gives Python during the run (NativeWarningWatch).
  void onNativeWarning(const char* text);

 private:
  struct ShadowFrame;
  struct Pending;
  // The name of the call the innermost traced frame is making, or "".
  std::string pendingCallee() const;
  struct Step;
  // What an iteration of a loop over a size begins with in one place (a
  // local, a stack slot, an element of a container it writes), as far as
  // rolling the loop depends on it.
  struct StatePart {
    enum class Kind : uint8_t {
      Unbound,
      Same,      // an object by identity (id: its node)
      Atom,      // a number, string, None
      Number,    // a number the graph computes in the loop (the index, arithmetic on it)
      Entry,     // a tensor the graph reads as an input, or has not read yet (id: its node)
      Outer,     // a tensor whose graph value (id) the graph computed before the loop
      Previous,  // a tensor the iteration before computed
      Older,     // a tensor an earlier iteration computed, or a number from tensor contents
      Tuple,     // id: its length; its items follow
    };
    Kind kind = Kind::Unbound;
    int64_t id = 0;
    record::Atom atom;
  };
  using StateParts = std::vector<std::vector<StatePart>>;  // per place
  // What the monitor follows of a loop over a size while it runs.
  struct LoopWatch {
    NodeId range = kNoNode, iterator = kNoNode;
    const ShadowFrame* frame = nullptr;
    bool open = false;
    size_t refsAtIteration = 0;     // refs_.size() when its current iteration began
    uint64_t stepAtStart = 0;       // instructions begun before its first iteration
    StateParts lastState;  // the frame's locals and stack when an iteration last began
    std::set<NodeId> grown;  // lists from before an iteration that it appended to
    // Lists and dicts from before an iteration that it wrote: their keys
    // and contents when the current iteration began (or before the first write).
    struct Contents {
      std::vector<Relation> keys;
      StateParts items;
    };
    std::map<NodeId, Contents> containers;
  };

  // OpRecorder::Delegate
  int externalTensor(const at::Tensor& t) override;
  int pythonDataTensor(const at::Tensor& t) override;
  bool checksContents(const at::Tensor& t) override;
  void beforeWrite(const at::Tensor& t) override;
  void breakGraph(const std::string& reason) override;
  std::string sourceLocation() const override;
  void readRuntimeState(const std::string& name) override;
  void readAutogradMode();
  void settleReachability() override { refs_.settle(); }
  int unreachableHolds(const at::Tensor& t) override;
  void freed(const at::Tensor& t) override;
  void releaseAfterBreak();
  bool droppedByProgram(PyObject* obj);
  void settleWeakReference(PyObject* ref);

  // Frames: entering, binding, leaving (frames.cpp).
  void enterFrame(PyFrameObject* frame);
  void leaveFrame(ShadowFrame& sf, PyObject* result);
  bool bindRootFrame(ShadowFrame& sf);
  bool bindFrame(ShadowFrame& sf, Pending& caller);
  NodeId constructorOf(const Pending& caller, PyObject* function);
  bool closureGuarded(PyObject* function);
  bool defaultOf(const ShadowFrame& sf, bool rooted, PyObject* v, NodeId& node);
  bool descriptorStateGuarded(ShadowFrame& sf, PyObject* function, const Pending& caller);
  bool consumedNatively(const Pending& caller, ShadowFrame& callee);
  void bindParameters(ShadowFrame& sf, NodeId function, const std::vector<NodeId>& positional,
                      const std::vector<std::pair<std::string, NodeId>>& keywords);
  void bindCells(ShadowFrame& sf);
  bool verifyLocals(ShadowFrame& sf);
  NodeId moduleNode(PyObject* module, const char* name = nullptr);
  NodeId globalsModuleNode(PyObject* globals);
  void breakOnImplicitContentRead(Frame& callee, const record::FunctionAnnotation& a, const std::string& by);
  void guardUntracedCallee(const Frame& callee, const Frame& caller);
  void guardBuiltinsNamedBy(const Frame& untraced);
  bool fixedByCaller(const Frame& caller, PyObject* f, PyCodeObject* code);
  bool readClassPathTo(PyObject* f, NodeId object);
  bool readQualifiedPathTo(PyObject* f);
  bool readCallerGlobalTo(PyObject* f, PyObject* callerGlobals);

  // Instructions: inputs taken at the opcode event, outputs at the next
  // one, by a handler per instruction (monitor.cpp dispatches).
  void begin(ShadowFrame& sf, const Instruction& ins);
  bool takeInputs(ShadowFrame& sf, const Instruction& ins);
  void breakOnUnsupported(Op op);
  void finish(ShadowFrame& sf);
  void pushOutputs(ShadowFrame& sf, Pending& p);
  bool finishInstruction(Step& s);
  NodeId slotNode(ShadowFrame& sf, int index);  // stack slot shadow, from the bottom

  // Locals, globals, cells, attributes, imports (loads.cpp).
  bool finishNewValue(Step& s);
  bool finishLoadFast(Step& s);
  bool finishStoreFast(Step& s);
  bool finishDeleteFast(Step& s);
  bool finishCopy(Step& s);
  bool finishSwap(Step& s);
  bool finishLoadGlobal(Step& s);
  bool finishStoreGlobal(Step& s);
  bool finishDeleteGlobal(Step& s);
  bool finishLoadDeref(Step& s);
  bool finishStoreDeref(Step& s);
  bool finishDeleteDeref(Step& s);
  bool finishLoadAttr(Step& s);
  bool finishLoadMethod(Step& s);
  bool finishStoreAttr(Step& s);
  bool finishDeleteAttr(Step& s);
  bool finishImportName(Step& s);
  bool finishImportFrom(Step& s);
  bool finishMakeFunction(Step& s);
  NodeId loadAttr(NodeId owner, PyObject* ownerObj, PyObject* name, PyObject* value, Pending& p);
  NodeId boundMethod(NodeId owner, PyObject* ownerObj, PyObject* name, PyObject* method);
  void readAutogradState(NodeId tensor, const std::string& attr);

  // Containers: subscripts, unpacking, displays (containers.cpp).
  bool finishBinarySubscr(Step& s);
  bool missingKeyInserted(Step& s, NodeId made);
  bool containsFollowed(Step& s);
  bool finishStoreSubscr(Step& s);
  bool finishDeleteSubscr(Step& s);
  bool finishUnpackSequence(Step& s);
  bool finishUnpackEx(Step& s);
  bool finishBuildSequence(Step& s);
  bool finishListToTuple(Step& s);
  bool finishBuildMap(Step& s);
  bool finishListAppend(Step& s);
  bool finishListExtend(Step& s);
  bool finishDictUpdate(Step& s);
  bool finishMapAdd(Step& s);
  bool breaksOnOpaqueContents(NodeId id, PyObject* obj, const char* doing);

  // Operators, iteration and control flow (control.cpp).
  bool finishBinaryOp(Step& s);
  bool finishOperator(Step& s);
  bool finishIsOp(Step& s);
  bool finishFormatValue(Step& s);
  bool finishBuildValue(Step& s);
  bool finishGetLen(Step& s);
  bool finishGetIter(Step& s);
  bool finishForIter(Step& s);
  bool finishJumpOrPop(Step& s);
  bool finishBeforeWith(Step& s);
  bool finishYieldValue(Step& s);
  NodeId derived(const Pending& p, PyObject* value);
  NodeId operatorResult(const Pending& p, PyObject* value);
  bool iteratesOutsideIterator(NodeId iterator);
  NodeId iterationValue(Pending& p, NodeId iterator, PyObject* value);
  void checkTruthTest(const Pending& p);
  bool breaksOnContentLength(PyObject* iterated, const char* doing);
  bool breaksOnDistinctIdentity(NodeId a, NodeId b, PyObject* result);

  // Calls and annotations (calls.cpp).
  void beginCall(ShadowFrame& sf, Pending& p);
  bool takeCallArguments(ShadowFrame& sf, Pending& p);
  PyObject* resolveCallee(Pending& p);
  PyObject* unwrapPartial(Pending& p, PyObject* partial);
  void beginAnnotatedCall(Pending& p, PyObject* callable);
  static bool appendsArgument(const Pending& p);
  bool convertsTensor(const Pending& p) const;
  void beginAutogradFunction(Pending& p, PyObject* function);
  bool breaksOnAnnotatedArgument(const Pending& p, size_t i);
  bool passesNativeCallback(const Pending& p);
  enum class Callback { Traced, ReadsItsObject, Unseen };
  Callback callbackKind(PyObject* callback) const;
  // loss.backward(), torch.autograd.backward(...) (autograd.cpp).
  static bool isBackwardCall(const std::string& callee);
  void beginBackward(Pending& p);
  bool backwardLeaves(const at::Tensor& root);
  bool collectiveArgumentsGuarded(const Pending& p);
  bool isDataParallelForward(PyObject* function) const;
  void beginDataParallel(Pending& p);
  bool dataParallelSupported(Pending& p, PyObject* ddp, NodeId node);
  Pending* dataParallelBinding(Frame& view);
  bool finishDataParallel(Step& s);
  bool reducedByDataParallel(const torch::autograd::Node& accumulator, const at::Tensor& leaf) const;
  void reduceDataParallelGradients();
  bool finishBackward(Step& s);
  bool keepsRequiresGrad(const Pending& p);
  bool finishPrecall(Step& s);
  bool finishCall(Step& s);
  NodeId applyAnnotation(Pending& p, PyObject* result);
  void readLayer(NodeId layer);

  // Sizes and lifted numbers (sizes_, numbers_), where instructions take
  // them (analyses.cpp).
  void followAnalyses(Pending& p);
  void followListReads(const Pending& p);
  void hintOperators(const std::vector<NodeId>& values, bool sizesAsValues = false);
  void numberHints(NodeId n, std::vector<OpRecorder::NumberHint>& out, int depth, bool sizesAsValues);
  bool isSizeCall(const Pending& p) const;
  // The graph value a size was read from, if the tensor still is it; -1 otherwise.
  int sizeSource(const SizeTracker::Size& size);
  int sizeNodeOf(NodeId n);  // its aten::size.int node (NumberLifter's sizeNode)
  // min(a, b), math.sqrt(a) and kin on numbers the graph computes: the
  // number operator it is (record::isNumberOp), or null.
  const char* numberCall(const Pending& p) const;
  // A comparison the graph computed held: the graph checks it (a predicate).
  void checksDecision(int comparison);

  // Loops over a size (loops.cpp).
  int loopTrip(const Pending& p);
  void rangeMade(NodeId range, int trip);
  void watchLoops(ShadowFrame& sf, const Pending& p);
  void loopIterates(ShadowFrame& sf, size_t loop);
  void loopAdvanced(Step& s, size_t loop);
  void loopWrites(NodeId written);
  bool advancesIterator(NodeId n) const;
  bool comprehensionOf(const Pending& p, NodeId in, const LoopWatch& w) const;
  void finishLoops();
  void failLoop(size_t loop, const std::string& why);
  // previous: where the iteration before the one beginning began (-1: none)
  void describeState(NodeId n, int first, int previous, std::vector<StatePart>& out, int depth) const;
  StateParts describeAll(const std::vector<NodeId>& places, int first, int previous) const;
  LoopWatch::Contents contentsOf(NodeId container, int first, int previous) const;
  std::string stateDiffers(const ShadowFrame& sf, const StateParts& before, const StateParts& now, bool first) const;
  std::string containersDiffer(LoopWatch& w, int first, int previous, bool firstTwo);
  static bool samePlace(const std::vector<StatePart>& before, const std::vector<StatePart>& now, bool first);

  // Branches on a tensor's truth (branches.cpp).
  void branchJump(ShadowFrame& sf, const Pending& p);
  void watchBranch(ShadowFrame& sf, const Pending& p);
  void closeBranch(ShadowFrame& sf);
  void failBranch(const std::string& why);
  void branchWrites(NodeId written);
  void branchMade(const Step& s);
  void watchIdentity(ShadowFrame& sf, const Pending& p);
  void finishBranches();

  // Nodes, tensors, breaks (monitor.cpp).
  bool externalOpaque(NodeId id) const;
  // callee: the native function the break is about, when an annotation would remove it.
  void graphBreak(const std::string& reason, const std::string& callee = "");
  void graphBreakAt(record::GraphBreak at, const std::string& reason, const std::string& callee = "");
  // Where the program is now: the innermost frame outside torch's own code
  // (a break's where, function and opcode).
  record::GraphBreak programLocation() const;
  // Python reads what the graph computed from the call's data: the
  // contents of t (t.item()), or its sizes where they depend on tensor
  // contents. Where the run allows checks (CallSpec::contentChecks), the
  // graph checks them there (OpRecorder::add*Check) and goes on; false
  // when it cannot (the caller breaks). checksContents is also the
  // recorder's, for reads Python makes natively (if t: runs is_nonzero).
  bool checksSizes(const at::Tensor& t);
  // t.item() as a number the graph computes (aten::item of t's value):
  // the graph value it reads, or -1 where the run reads contents instead.
  int itemSource(const at::Tensor& t);
  void liftItem(const Pending& p, NodeId result);
  // A use that depends on an item's value: the graph checks it equals
  // what the run read (or the run breaks where it cannot check).
  void checkItem(int node, const std::string& how);
  void breakUnlessChecksStopCleanly();
  std::string where(const ShadowFrame& sf) const;
  std::string currentLocation() const;  // where(the innermost frame), or "" outside any
  void registerTensor(NodeId id);
  void keepEntryContents(const at::Tensor& written);
  bool writeRuntimeState(const Pending& p, const std::string& name);
  bool storesItsOwnRequiresGrad(const Step& s);
  bool makesLeafRequiringGrad(PyObject* result);
  void readClassOf(PyObject* obj);
  NodeId newNode(PyObject* obj);

  const record::AnnotationSet& annotations_;
  RefGraph refs_;
  std::unique_ptr<OpRecorder> ops_;
  std::vector<std::unique_ptr<ShadowFrame>> frames_;
  std::unordered_map<PyObject*, std::unique_ptr<ShadowFrame>> suspended_;  // generator -> its frame
  std::unordered_map<PyObject*, std::unique_ptr<Pending>> unstarted_;      // generator -> its call
  // Where the operators dispatched now come from: the line of the
  // instruction that began last, in this code object (held, so that its
  // address is not reused). Formatted only for operators that are recorded.
  PyRef locationCode_;
  int locationLine_ = 0;
  std::set<std::pair<NodeId, std::string>> classMethods_;
  // (caller's globals, function) pairs of untraced calls already read from
  // globals; the function is held, so its address is not reused in the run.
  std::map<std::pair<PyObject*, PyObject*>, PyRef> guardedCallees_;
  std::map<PyCodeObject*, PyRef> builtinsGuardedFor_;  // the codes guardBuiltinsNamedBy did, held
  std::unordered_map<c10::TensorImpl*, NodeId> tensorNodes_;
  // Iterators over tuples and lists: the sequence and the next position,
  // so `for s in scales` reads scales[k] (keeping a scalar's provenance).
  std::unordered_map<NodeId, std::pair<NodeId, Py_ssize_t>> sequenceIterators_;
  std::unordered_map<c10::TensorImpl*, at::Tensor> entryContent_;
  std::unordered_map<const c10::StorageImpl*, std::vector<NodeId>> nodesByStorage_;  // tensors by their memory
  std::unordered_map<NodeId, record::TensorMeta> entryMeta_;
  std::vector<std::pair<int, NodeId>> inputs_;
  std::vector<std::pair<int, at::Tensor>> constants_;
  std::vector<std::pair<NodeId, Relation>> absent_;
  std::vector<record::GraphBreak> breaks_;
  const CallSpec* call_ = nullptr;
  NodeId rootSelf_ = kNoNode;
  std::vector<NodeId> rootArgs_;
  std::vector<std::pair<std::string, NodeId>> rootKwargs_;
  PyFrameObject* callerFrame_ = nullptr;
  NodeId result_ = kNoNode;
  bool broken_ = false;
  bool released_ = false;  // releaseAfterBreak ran
  SliceParts slices_;  // the slices the run built, while it follows sizes or numbers
  bool done_ = false;
  std::map<std::string, record::Atom> runtimeReads_;
  std::string forwardOnly_;
  // Autograd nodes made before the run have smaller sequence numbers.
  uint64_t autogradStart_ = 0;
  // The backward() call under way: its root, gradient and leaves as they were.
  struct BackwardCall {
    struct Leaf {
      at::Tensor variable;
      NodeId node = kNoNode;
      int value = -1;
      at::Tensor gradBefore;  // undefined: .grad was None
    };
    int root = -1, grad = -1;
    bool retainGraph = false;
    std::vector<Leaf> leaves;
  };
  BackwardCall backward_;
  // DistributedDataParallel (data_parallel.cpp): its forward is the call of
  // its module, traced as one, and its gradient reduction follows the
  // step's backward as collectives.
  struct DataParallel {
    PyObject* ddp = nullptr;
    NodeId node = kNoNode;
    PyObject* module = nullptr;  // ddp.module
    NodeId moduleNode = kNoNode;
    std::vector<at::Tensor> buffers;  // broadcast from rank 0 before the module's forward
    bool moduleEntered = false;
  };
  std::optional<DataParallel> dataParallel_;              // the forward under way
  std::unique_ptr<Pending> dataParallelCall_;             // its module's call, as bound
  std::unordered_set<const c10::TensorImpl*> reducedByDataParallel_;  // parameters its backward reduces
  std::set<std::string> runtimeWrites_;  // interpreter state the program set (grad mode regions)
  record::GraphBreak gradSwitch_;        // where it last switched grad mode (where, function, opcode)
  std::set<int> itemsChecked_;  // aten::item nodes whose value a check holds
  std::map<std::string, record::GraphBreak> checkLocations_;  // check node's name -> where Python read the value
  std::vector<PyRef> classesRead_;
  std::unordered_set<PyTypeObject*> classSeen_;
  PyTypeObject* lastClassRead_ = nullptr;
  std::vector<PyRef> functionsRun_;
  std::unordered_set<PyObject*> functionSeen_;
  std::vector<LoopRun> loopRuns_;
  std::vector<LoopWatch> loopWatches_;             // one per loop run
  std::unordered_map<NodeId, size_t> loopOf_;      // range objects and their iterators -> their loop
  std::unordered_map<int, size_t> loopOfIndex_;    // index graph nodes -> their loop
  std::unordered_map<NodeId, uint64_t> listRead_;  // a list's last read other than a move, an append or an operator's
  uint64_t step_ = 0;                              // instructions begun since the first loop over a size
  // The branch whose side runs now: what the frame held at the jump.
  struct BranchWatch {
    const ShadowFrame* frame = nullptr;
    int rejoin = -1;          // the code offset where the jump's two ways meet
    PyRef cond;
    std::vector<PyRef> places;  // locals (cells' contents) and stack, without the condition
    size_t graphAtJump = 0;
    int run = -1;             // its BranchRun, once the jump ran
    std::string where;
    // Containers and iterators the side made (BUILD_LIST, BUILD_MAP, GET_ITER,
    // ...): it may write and advance them.
    std::unordered_set<NodeId> made;
  };
  std::optional<BranchWatch> branchOpen_;
  std::vector<BranchRun> branchRuns_;
  std::string pathDependent_;
  // The analyses, last: they hold references to the members above.
  SizeTracker sizes_;
  NumberLifter numbers_;
};

}  // namespace magpy::capture

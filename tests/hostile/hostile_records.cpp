#include "hostile_records.h"

#include <cstring>
#include <stdexcept>

#include "magpy/record/format.h"
#include "magpy/support/hash.h"
#include "../unit/sample.h"

namespace magpy::hostile {
namespace {

using namespace record;

// Grammar pieces by hand (format.h), for bodies the writer refuses to write.
struct Bytes {
  std::string out;
  Bytes& u8(uint8_t v) { out.push_back(char(v)); return *this; }
  Bytes& varint(uint64_t v) {
    while (v >= 0x80) { out.push_back(char((v & 0x7f) | 0x80)); v >>= 7; }
    out.push_back(char(v));
    return *this;
  }
  Bytes& zigzag(int64_t v) { return varint((uint64_t(v) << 1) ^ uint64_t(v >> 63)); }
  Bytes& f64zero() { out.append(8, '\0'); return *this; }
  Bytes& str(const std::string& s) { varint(s.size()); out += s; return *this; }
  Bytes& atom(uint8_t kind, const std::string& s = "") { return u8(kind).zigzag(0).f64zero().str(s).varint(0); }
  Bytes& emptyMeta() { return str("float32").varint(0).varint(0).str("cpu").u8(0).varint(0); }  // TensorMeta{}
  Bytes& emptyPath() { return u8(0).zigzag(0).str("").varint(0); }
};

constexpr uint8_t kAtomNone = 0, kAtomStr = 4, kAtomTuple = 10;
constexpr uint8_t kValueAtom = 0, kValueList = 3;
constexpr uint8_t kExprConst = 0, kExprTuple = 3;

// A value holding the string atom `s`, as the writer encodes it.
std::string stringValue(const std::string& s) {
  return Bytes().u8(kValueAtom).atom(kAtomStr, s).varint(0).emptyMeta().str("").varint(0).varint(0).varint(0).varint(0).out;
}
std::string stringExpr(const std::string& s) {
  return Bytes().u8(kExprConst).atom(kAtomStr, s).zigzag(0).emptyPath().varint(0).varint(0).out;
}

std::string nestedLists(size_t depth) {
  std::string open = Bytes().u8(kValueList).atom(kAtomNone).varint(0).emptyMeta().str("").varint(1).out;
  std::string close = Bytes().varint(0).varint(0).varint(0).out;
  std::string leaf = Bytes().u8(kValueAtom).atom(kAtomNone).varint(0).emptyMeta().str("").varint(0).varint(0).varint(0).varint(0).out;
  std::string s;
  s.reserve(depth * (open.size() + close.size()) + leaf.size());
  for (size_t i = 0; i < depth; ++i) s += open;
  s += leaf;
  for (size_t i = 0; i < depth; ++i) s += close;
  return s;
}

std::string nestedTupleAtomValue(size_t depth) {
  Bytes b;
  b.u8(kValueAtom);
  for (size_t i = 0; i < depth; ++i) b.u8(kAtomTuple).zigzag(0).f64zero().str("").varint(1);
  b.u8(kAtomNone).zigzag(0).f64zero().str("").varint(0);
  return b.varint(0).emptyMeta().str("").varint(0).varint(0).varint(0).varint(0).out;
}

std::string nestedTupleExprs(size_t depth) {
  std::string open = Bytes().u8(kExprTuple).atom(kAtomNone).zigzag(0).emptyPath().varint(1).out;
  std::string close = Bytes().varint(0).out;
  std::string s;
  for (size_t i = 0; i < depth; ++i) s += open;
  s += stringExpr("leaf");
  for (size_t i = 0; i < depth; ++i) s += close;
  return s;
}

// Encodes `file`, then replaces the one encoding of `marker` with `with`.
std::string splice(const std::string& body, const std::string& marker, const std::string& with) {
  size_t at = body.find(marker);
  if (at == std::string::npos || body.find(marker, at + 1) != std::string::npos)
    throw std::logic_error("hostile: the marker is not in the body exactly once");
  return body.substr(0, at) + with + body.substr(at + marker.size());
}

TensorMeta meta(std::vector<int64_t> shape) {
  TensorMeta m;
  m.shape = shape;
  int64_t stride = 1;
  m.strides.assign(shape.size(), 0);
  for (size_t i = shape.size(); i-- > 0;) {
    m.strides[i] = stride;
    stride *= shape[i];
  }
  return m;
}

TensorBlob floatBlob(std::vector<int64_t> shape, size_t count) {
  TensorBlob b;
  b.dtype = "float32";
  b.shape = std::move(shape);
  b.bytes.assign(count * 4, '\0');
  b.hash = hashBytes(b.bytes.data(), b.bytes.size());
  return b;
}

Value tensorValue(uint32_t blob, const TensorMeta& m) {
  Value v;
  v.kind = Value::Kind::Tensor;
  v.blob = blob;
  v.meta = m;
  return v;
}

Value container(Value::Kind kind, std::vector<Value> items = {}) {
  Value v;
  v.kind = kind;
  v.items = std::move(items);
  return v;
}

// One function, `f`, whose self is an object with the given attributes, one
// record running `nodes`, and one logged call with the given arguments.
RecordFile oneCall(std::vector<Node> nodes, Value args = container(Value::Kind::Tuple)) {
  RecordFile f;
  f.env = {"0.1.0", "3.11.2", "1.13.0", 0};
  f.script = "hostile.py";
  CompiledFunction fn;
  fn.name = "__main__.f";
  fn.module = "__main__";
  fn.self = container(Value::Kind::Object);
  fn.self.type = "__main__.M";
  Record r;
  r.origin = "first call";
  Node out;
  out.kind = NodeKind::Output;
  out.name = "output";
  if (!nodes.empty()) out.args = {Arg::node(int64_t(nodes.size()) - 1)};
  r.graph.nodes = std::move(nodes);
  r.graph.nodes.push_back(out);
  r.mock.result = r.graph.nodes.size() > 1 ? ValueExpr::output(0) : ValueExpr::constant(Atom::none());
  fn.records.push_back(r);
  f.functions.push_back(fn);
  LoggedCall c;
  c.record = 0;
  c.args = std::move(args);
  c.kwargs = container(Value::Kind::Dict);
  f.calls.push_back(c);
  return f;
}

Node op(const std::string& name, const std::string& target, const std::string& overload, std::vector<Arg> args) {
  Node n = sample::opNode(name, target, overload, std::move(args));
  n.where = "hostile.py:1";
  return n;
}

Arg ints(std::vector<int64_t> v) {
  Arg a;
  a.kind = Arg::Kind::IntList;
  a.ints = std::move(v);
  return a;
}
Arg text(std::string s) {
  Arg a;
  a.kind = Arg::Kind::Str;
  a.s = std::move(s);
  return a;
}

Node placeholder(int64_t index, const TensorMeta& m) {
  Node n;
  n.kind = NodeKind::Placeholder;
  n.name = "arg" + std::to_string(index);
  n.target = n.name;
  n.source = AccessPath::arg(index);
  n.outputs = {m};
  return n;
}

// One call whose argument, a float32 tensor of 2 elements, `node` reads.
RecordFile withTensorArg(Node node) {
  TensorMeta m = meta({2});
  RecordFile f = oneCall({placeholder(0, m), std::move(node)}, container(Value::Kind::Tuple, {tensorValue(0, m)}));
  f.blobs.push_back(floatBlob({2}, 2));
  return f;
}

// A self-referencing structure (refused at load: replay's shared values
// could never free it), or one whose parts are shared (2^64 paths): replay
// must compare it in time linear in its size.
RecordFile sharedResult(bool cyclic) {
  RecordFile f = oneCall({});
  Value shared;
  if (cyclic) {
    shared = container(Value::Kind::List);
    shared.id = 1;
    Value ref;
    ref.kind = Value::Kind::Ref;
    ref.id = 1;
    shared.items = {ref, Value::ofAtom(Atom::integer(7))};
  } else {
    // 64 levels, each holding the level below twice: 2^64 paths.
    shared = Value::ofAtom(Atom::integer(7));
    for (uint32_t level = 1; level <= 64; ++level) {
      shared.id = level;
      Value ref;
      ref.kind = Value::Kind::Ref;
      ref.id = level;
      Value next = container(Value::Kind::List, {shared, ref});
      shared = next;
    }
  }
  f.functions[0].self.names = {"x"};
  f.functions[0].self.items = {shared};
  f.functions[0].records[0].mock.result = ValueExpr::read(AccessPath::self().attr("x"));
  f.calls[0].result = shared;
  return f;
}

std::string withHeaderBodySize(std::string file, uint64_t size) {
  for (int i = 0; i < 8; ++i) file[size_t(24 + i)] = char((size >> (8 * i)) & 0xff);
  return file;
}

std::string bodyWithSelf(const std::string& selfBytes) {
  RecordFile f = oneCall({});
  f.functions[0].self = Value::ofAtom(Atom::string("@@SELF@@"));
  return wrapBody(splice(encodeBody(f), stringValue("@@SELF@@"), selfBytes));
}

void loadCases(std::vector<Case>& out) {
  // A mock naming an object it has not built, or a container inside itself.
  {
    RecordFile f = oneCall({});
    ValueExpr ref;
    ref.kind = ValueExpr::Kind::Ref;
    ref.index = 5;
    f.functions[0].records[0].mock.result = ref;
    out.push_back({"mock_ref_unbuilt", encode(f), 2, "refers to object #5, which the mock has not built before it"});
    ValueExpr list;
    list.kind = ValueExpr::Kind::List;
    list.index = 5;
    list.items = {ref};
    f.functions[0].records[0].mock.result = list;
    out.push_back({"mock_ref_cycle", encode(f), 2, "refers to object #5, which the mock has not built before it"});
  }
  // A node name that would rewrite the terminal (the writer escapes such
  // names; a file that holds one raw is not from it).
  {
    RecordFile f = oneCall({op("@@NAME@@", "aten::ones", "", {ints({2})})});
    std::string raw = Bytes().str("@@NAME@@").out;
    out.push_back({"name_control_chars", wrapBody(splice(encodeBody(f), raw, Bytes().str("x\r\x1b[2Jy").out)), 2,
                   "holds control characters"});
  }
  out.push_back({"deep_value", bodyWithSelf(nestedLists(100000)), 2, "nest more than 256 levels deep"});
  out.push_back({"deep_constant", bodyWithSelf(nestedTupleAtomValue(50000)), 2, "nest more than 256 levels deep"});
  {
    RecordFile f = oneCall({});
    f.functions[0].records[0].mock.result = ValueExpr::constant(Atom::string("@@MOCK@@"));
    out.push_back({"deep_mock", wrapBody(splice(encodeBody(f), stringExpr("@@MOCK@@"), nestedTupleExprs(50000))), 2,
                   "nest more than 256 levels deep"});
  }
  {
    RecordFile f = oneCall({});
    Value opaque = container(Value::Kind::Opaque, {Value::ofAtom(Atom::integer(1)), Value::ofAtom(Atom::integer(2))});
    opaque.type = "builtins.function";
    opaque.names = {"a"};
    f.functions[0].self = opaque;
    out.push_back({"opaque_names", encode(f), 2, "has 1 attribute names for 2 values"});
  }
  {
    RecordFile f = oneCall({});
    ValueExpr dict;
    dict.kind = ValueExpr::Kind::Dict;
    dict.items = {ValueExpr::constant(Atom::integer(1)), ValueExpr::constant(Atom::integer(2))};
    dict.keys = {Atom::string("a")};
    f.functions[0].records[0].mock.result = dict;
    out.push_back({"mock_dict_keys", encode(f), 2, "builds a dict with 1 keys for 2 values"});
  }
  {
    RecordFile f = oneCall({});
    f.calls[0].args = container(Value::Kind::List);
    out.push_back({"args_not_tuple", encode(f), 2, "positional arguments are not a tuple"});
  }
  {
    RecordFile f = oneCall({});
    f.calls[0].kwargs = container(Value::Kind::List);
    out.push_back({"kwargs_not_dict", encode(f), 2, "keyword arguments are not a dict"});
  }
  {
    RecordFile f = oneCall({});
    Check c;
    c.kind = Check::Kind::Tensor;
    c.meta = meta({2, 3});
    c.meta.strides = {1};
    f.functions[0].records[0].guards.push_back({AccessPath::arg(0), c});
    out.push_back({"guard_strides", encode(f), 2, "has 1 strides for 2 dimensions"});
  }
  {
    RecordFile f = oneCall({});
    f.calls[0].record = -5;
    out.push_back({"call_record_minus5", encode(f), 2, "names missing record -5"});
  }
  {
    RecordFile f = oneCall({});
    TensorBlob b = floatBlob({int64_t(1) << 32, int64_t(1) << 32, 4}, 0);
    f.blobs.push_back(b);
    out.push_back({"blob_overflow", encode(f), 2, "more elements than fit in 64 bits"});
  }
  {
    RecordFile f = oneCall({});
    Value ref;
    ref.kind = Value::Kind::Ref;
    ref.id = 9;
    f.functions[0].self = container(Value::Kind::List, {ref});
    out.push_back({"dangling_ref", encode(f), 2, "refers to object #9, defined nowhere before"});
  }
  {
    // Four million logged calls declared, zeros behind them: each parses
    // as a call of a few dozen bytes, each taking far more in memory.
    RecordFile f = oneCall({});
    f.calls.clear();
    std::string body = encodeBody(f);
    std::string calls = Bytes().varint(4000000).out + std::string(size_t(50) << 20, '\0');
    body = body.substr(0, body.size() - 2) + calls;  // in place of "calls: 0, blobs: 0"
    out.push_back({"four_million_calls", wrapBody(body), 2, "MiB of memory"});
  }
  {
    RecordFile f = oneCall({op("add", "operator.add", "", {Arg::integer(1), Arg::integer(2)})});
    out.push_back({"number_op_untyped", encode(f), 2, "does number arithmetic but has no number type"});
    f.functions[0].records[0].graph.nodes[0].number = "complex";
    out.push_back({"number_type_complex", encode(f), 2, "has number type 'complex'"});
  }
  {
    std::string file = encode(oneCall({}));
    out.push_back({"body_size_2p40", withHeaderBodySize(file, uint64_t(1) << 40), 2, "more than the 8 GiB a record may hold"});
    out.push_back({"body_size_5e9", withHeaderBodySize(file, 5000000000ull), 2, "disagree on the body's size"});
  }
  {
    RecordFile f = withTensorArg(op("relu", "aten::relu", "", {Arg::node(0)}));
    f.calls[0].args.items[0].meta.device = "";
    out.push_back({"arg_device_empty", encode(f), 2, "is on device '', which names no device"});
  }
  {
    RecordFile f = oneCall({});
    f.functions[0].self.atom = Atom::named(Atom::Kind::DType, "float32");  // only int, float and str subclasses
    out.push_back({"object_value_dtype", encode(f), 2, "has a value that is not an int, float or str"});
  }
}

void replayCases(std::vector<Case>& out) {
  {
    RecordFile f = oneCall({});
    f.functions[0].records.clear();
    f.calls[0].record = -1;
    out.push_back({"no_records", encode(f), 1, "the function has no records", true});
  }
  {
    RecordFile f = oneCall({});
    StateUpdate grad;
    grad.path = AccessPath::runtime("grad_enabled");
    grad.value = Value::ofAtom(Atom::string("yes"));
    f.calls[0].updates.push_back(grad);
    out.push_back({"grad_mode_not_bool", encode(f), 2, "sets runtime.grad_enabled to something not a bool", true});
  }
  {
    // Logged updates native state cannot apply: each ends the replay with
    // the update named (capture logs none of these).
    auto withUpdate = [](const std::string& path, StateUpdate::How how, Value value) {
      RecordFile f = oneCall({});
      f.functions[0].self.names = {"items", "n"};
      f.functions[0].self.items = {container(Value::Kind::List, {Value::ofAtom(Atom::integer(1))}),
                                   Value::ofAtom(Atom::integer(3))};
      StateUpdate u;
      u.function = 0;
      u.path = parsePath(path);
      u.how = how;
      u.value = std::move(value);
      f.calls[0].updates.push_back(u);
      return encode(f);
    };
    using How = StateUpdate::How;
    Value list = container(Value::Kind::List, {Value::ofAtom(Atom::integer(2))});
    out.push_back({"update_removes_list_item", withUpdate("self.items[0]", How::Remove, Value()), 2,
                   "cannot remove self.items[0]", true});
    out.push_back({"update_removes_object_key", withUpdate("self.items[@self.n]", How::Remove, Value()), 2,
                   "a dict key that is an object is not removed natively", true});
    out.push_back({"update_refills_list_attribute", withUpdate("self.items.gone", How::Refill, list), 2,
                   "cannot store self.items.gone: the target is list of 1, not an object", true});
  }
  {
    // A logged in-place update of a state tensor the graph reads: another
    // dtype and size take libtorch's set_data, and the graph then runs on
    // the new tensor (its result is not the logged None), which requires
    // grad where the update says so.
    auto refillW = [](const std::string& dtype, std::vector<int64_t> shape, bool requiresGrad) {
      Node w = placeholder(0, meta({2}));
      w.source = AccessPath::self().attr("w");
      RecordFile f = oneCall({w, op("relu", "aten::relu", "", {Arg::node(0)})});
      f.blobs.push_back(floatBlob({2}, 2));
      f.functions[0].self.names = {"w"};
      f.functions[0].self.items = {tensorValue(0, meta({2}))};
      size_t words = dtype == "int64" ? 2 : 1;  // floatBlob counts 4-byte elements
      TensorBlob b = floatBlob(shape, words * size_t(shape.at(0)));
      b.dtype = dtype;
      f.blobs.push_back(b);
      StateUpdate u;
      u.function = 0;
      u.path = AccessPath::self().attr("w");
      u.how = StateUpdate::How::Refill;
      u.value = tensorValue(1, meta(shape));
      u.value.meta.dtype = dtype;
      u.value.meta.requires_grad = requiresGrad;
      f.calls[0].updates.push_back(u);
      return encode(f);
    };
    out.push_back({"update_refills_tensor_other_dtype", refillW("int64", {3}, false), 1,
                   "expected None, got tensor int64[3]", true});
    out.push_back({"update_refills_tensor_requiring_grad", refillW("float32", {4}, true), 1,
                   "expected None, got tensor float32[4]", true});
  }
  {
    // A grad mode region and a forward-only mark change nothing natively:
    // the graph runs (its result is not the logged None).
    Node relu = op("relu", "aten::relu", "", {Arg::node(0)});
    relu.grad = GradMode::On;
    RecordFile f = withTensorArg(relu);
    f.functions[0].records[0].forwardOnly = "a custom autograd Function's backward needs Python";
    out.push_back({"grad_region_forward_only", encode(f), 1, "expected None, got tensor float32[2]", true});
  }
  {
    // A check the logged call fails: a miss where nothing happened before
    // it, a clear error after an in-place write of the argument.
    auto returningArg = [](std::vector<Node> nodes) {
      RecordFile f = withTensorArg(nodes[0]);
      auto& graph = f.functions[0].records[0].graph.nodes;  // x, nodes[0], output
      graph.insert(graph.end() - 1, nodes.begin() + 1, nodes.end());
      graph.back().args = {Arg::node(0)};
      return f;
    };
    Node check = op("expect_sizes", record::kExpectSizes, "", {Arg::node(0), ints({3})});
    out.push_back({"check_fails", encode(returningArg({check})), 1,
                   "the program read sizes [3] of a result whose shape depends on tensor contents, and this call's are [2]",
                   true});
    Node write = op("add_", "aten::add_", "Scalar", {Arg::node(0), Arg::integer(1), Arg::integer(1)});
    out.push_back({"check_fails_after_write", encode(returningArg({write, check})), 2, "this call's are [2]", true});
  }
  {
    // _pad_packed_sequence walks its batch sizes with raw pointers: replay checks them first.
    Node pad = op("pad", "aten::_pad_packed_sequence", "",
                  {Arg::node(0), Arg::node(0), Arg::boolean(false), Arg::floating(0), Arg::integer(-1)});
    RecordFile f = withTensorArg(pad);
    auto& nodes = f.functions[0].records[0].graph.nodes;  // x, pad, output
    Node padded = op("padded", "getitem", "", {Arg::node(1), Arg::integer(0)});
    nodes.insert(nodes.end() - 1, padded);
    nodes.back().args = {Arg::node(2)};
    out.push_back({"packed_batch_sizes_float", encode(f), 2,
                   "batch sizes are not a non-empty 1-D CPU int64 tensor", true});
  }
  out.push_back({"cyclic_result", encode(sharedResult(true)), 2, "contains itself, which records cannot hold"});
  out.push_back({"shared_result", encode(sharedResult(false)), 0, "matches the captured result", true});
  {
    Arg shared = Arg::boolean(true);
    RecordFile f = oneCall({op("from_file", "aten::from_file", "", {text("/etc/hostname"), shared, Arg::integer(4)})});
    out.push_back({"from_file", encode(f), 2, "aten::from_file reads and writes files", true});
  }
  out.push_back({"sparse_unsafe",
                 encode(withTensorArg(op("sparse", "aten::_sparse_coo_tensor_unsafe", "", {Arg::node(0), Arg::node(0), ints({4})}))),
                 2, "builds a tensor without checking its arguments", true});
  out.push_back({"set_storage", encode(withTensorArg(op("set", "aten::set_", "source_Storage", {Arg::node(0), Arg::node(0)}))), 2,
                 "rebinds a tensor to another storage", true});
  {
    RecordFile f = oneCall({op("ones", "aten::ones", "", {ints({int64_t(1) << 30})})});
    f.functions[0].records[0].graph.nodes[0].outputs = {meta({int64_t(1) << 30})};
    out.push_back({"ones_4gb", encode(f), 2, "more than its memory budget", true});
  }
  {
    Node add = op("add", "operator.add", "", {Arg::node(0), Arg::integer(1)});
    add.number = "int";
    out.push_back({"number_op_of_tensor", encode(withTensorArg(add)), 2, "operator.add takes a value that is not a number",
                   true});
  }
  {
    Node mul = op("mul", "operator.mul", "", {Arg::integer(int64_t(1) << 62), Arg::integer(4)});
    mul.number = "int";
    out.push_back({"number_overflow", encode(withTensorArg(mul)), 1, "grows beyond 64 bits", true});
  }
  {
    // if x.size(0) > 5 on a call with 2 rows: the record does not serve it;
    // a predicate of an int, and a comparison passed to an operator, are
    // refused; a result size naming a later node is corruption.
    auto decided = [&](Arg checked, bool intoOperator, int32_t sizeNode) {
      TensorMeta m = meta({2});
      Node size = op("size", "aten::size", "int", {Arg::node(0), Arg::integer(0)});
      Node gt = op("gt", "operator.gt", "", {Arg::node(1), Arg::integer(5)});
      gt.number = "bool";
      Node check = op("expect_true", record::kExpectTrue, "", {std::move(checked)});
      Node mul = op("mul", "aten::mul", "Tensor", {Arg::node(0), Arg::node(intoOperator ? 2 : 0)});
      mul.outputs = {m};
      if (sizeNode >= 0) {
        mul.outputs[0].sym = {record::SymDim{}};
        mul.outputs[0].sym[0].node = sizeNode;
      }
      RecordFile f = oneCall({placeholder(0, m), size, gt, check, mul}, container(Value::Kind::Tuple, {tensorValue(0, m)}));
      f.blobs.push_back(floatBlob({2}, 2));
      return encode(f);
    };
    out.push_back({"predicate_fails", decided(Arg::node(2), false, -1), 1, "does not hold for this call", true});
    out.push_back({"predicate_of_int", decided(Arg::node(1), false, -1), 2, "checks something other than a comparison", true});
    out.push_back({"comparison_into_operator", decided(Arg::node(2), true, -1), 2,
                   "a comparison's result goes to magpy.expect_true only", true});
    out.push_back({"size_of_later_node", decided(Arg::node(2), false, 4), 2,
                   "which names no int the graph computes before it"});
  }
  {
    Node div = op("div", "operator.truediv", "", {Arg::integer(1), Arg::integer(2)});
    div.number = "int";  // Python's / gives a float
    out.push_back({"number_op_type", encode(withTensorArg(div)), 2, "operator.truediv of int and int does not give int", true});
  }
  {
    Node half = op("half", "operator.truediv", "", {Arg::integer(7), Arg::integer(2)});
    half.number = "float";
    Node view = op("view", "aten::view", "", {Arg::node(0), Arg::none()});
    view.args[1].kind = Arg::Kind::SizeList;
    view.args[1].ints = {1, 1};
    RecordFile f = withTensorArg(half);
    auto& nodes = f.functions[0].records[0].graph.nodes;
    nodes.insert(nodes.end() - 1, view);
    nodes.back().args = {Arg::node(2)};
    out.push_back({"float_size", encode(f), 2, "a size list entry is not an integer", true});
  }
  {
    // A float list whose entries the graph computes: only floats, and only
    // where the operator takes floats or Scalars.
    auto numberList = [](const std::string& type, int64_t entry, const std::string& overload) {
      Node half = op("half", "operator.truediv", "", {Arg::integer(7), Arg::integer(2)});
      half.number = type;
      if (type == "int") half.target = "operator.floordiv";
      Arg list;
      list.kind = Arg::Kind::NumberList;
      list.ints = {entry, -1};
      list.floats = {0, 2.0};
      Node div = op("div", "aten::_foreach_div_", overload, {Arg{Arg::Kind::NodeList, 0, 0, "", {0, 0}, {}}, list});
      RecordFile f = withTensorArg(half);
      auto& nodes = f.functions[0].records[0].graph.nodes;
      nodes.insert(nodes.end() - 1, div);
      return encode(f);
    };
    out.push_back({"number_list_of_int", numberList("int", 1, "ScalarList"), 2, "a number list entry is not a float", true});
    out.push_back({"number_list_of_tensor", numberList("float", 0, "ScalarList"), 2, "a number list entry is not a float", true});
    out.push_back({"number_list_for_tensors", numberList("float", 1, "List"), 2, "the record passes a list of floats", true});
  }
  {
    // Collectives (record/graph.h): one tensor, the group replay runs in, a
    // ReduceOp records may hold, the group's own timeout. A well-formed one
    // needs the ranks of a job; the others are refused at load.
    auto collective = [](std::vector<Arg> args, size_t tensors = 1, const std::string& target = "c10d::allreduce_") {
      Node c = op("allreduce_", target, "", std::move(args));
      c.outputs.assign(tensors, meta({2}));
      return encode(withTensorArg(c));
    };
    Arg group{Arg::Kind::Group};
    Arg one{Arg::Kind::NodeList, 0, 0, "", {0}, {}};
    Arg two{Arg::Kind::NodeList, 0, 0, "", {0, 0}, {}};
    out.push_back({"collective_without_ranks", collective({one, group, Arg::integer(0), Arg::integer(-1)}), 2,
                   "start magpy-run once per rank with torchrun's environment", true});
    out.push_back({"collective_reduce_op_premul", collective({one, group, Arg::integer(8), Arg::integer(-1)}), 2,
                   "c10d::allreduce_ but does not take ([tensor], process group, reduce op, -1)"});
    out.push_back({"collective_own_timeout", collective({one, group, Arg::integer(0), Arg::integer(int64_t(1) << 40)}), 2,
                   "c10d::allreduce_ but does not take ([tensor], process group, reduce op, -1)"});
    out.push_back({"collective_of_two", collective({two, group, Arg::integer(0), Arg::integer(-1)}, 2), 2,
                   "c10d::allreduce_ but does not take ([tensor], process group, reduce op, -1)"});
    out.push_back({"collective_negative_root",
                   collective({one, group, Arg::integer(-1), Arg::integer(0), Arg::integer(-1)}, 1, "c10d::broadcast_"), 2,
                   "c10d::broadcast_ but does not take ([tensor], process group, root rank, 0, -1)"});
    out.push_back({"group_outside_collective", encode(withTensorArg(op("relu", "aten::relu", "", {Arg::node(0), group}))),
                   2, "takes a process group but is no collective"});
    out.push_back({"c10d_barrier", encode(withTensorArg(op("barrier", "c10d::barrier", "", {Arg::integer(0), ints({}),
                                                                                             Arg::integer(-1)}))),
                   2, "is a torch.distributed operator magpy does not replay", true});
  }
  // Operators whose kernels trust their arguments, each found writing or
  // reading out of bounds from a record's arguments: refused by family.
  out.push_back({"max_pool_backward_far_indices",
                 encode(withTensorArg(op("mpb", "aten::max_pool2d_with_indices_backward", "",
                                         {Arg::node(0), Arg::node(0), ints({1}), ints({1}), ints({0}), ints({1}),
                                          Arg::boolean(false), Arg::node(0)}))),
                 2, "is a backward kernel, which trusts that its inputs came from its forward", true});
  out.push_back({"cummax_helper", encode(withTensorArg(op("cm", "aten::_cummax_helper", "",
                                                           {Arg::node(0), Arg::node(0), Arg::node(0), Arg::integer(0)}))),
                 2, "is a private helper not on the reviewed list", true});
  out.push_back({"segment_reduce_unsafe",
                 encode(withTensorArg(op("sr", "aten::segment_reduce", "", {Arg::node(0), text("sum")}))), 2,
                 "may read past its input when told its lengths are safe", true});
  out.push_back({"ctc_loss_far_label",
                 encode(withTensorArg(op("ctc", "aten::ctc_loss", "IntList",
                                         {Arg::node(0), Arg::node(0), ints({5}), ints({2}), Arg::integer(0),
                                          Arg::integer(1), Arg::boolean(false)}))),
                 2, "indexes its log-probabilities with target labels it does not check", true});
  out.push_back({"native_batch_norm_short_weight",
                 encode(withTensorArg(op("nbn", "aten::native_batch_norm", "",
                                         {Arg::node(0), Arg::node(0), Arg::none(), Arg::none(), Arg::none(),
                                          Arg::boolean(true), Arg::floating(0.1), Arg::floating(1e-5)}))),
                 2, "trusts that its weight and bias match the input's channels", true});
  out.push_back({"searchsorted_far_sorter",
                 encode(withTensorArg(op("ss", "aten::searchsorted", "Tensor",
                                         {Arg::node(0), Arg::node(0), Arg::boolean(false), Arg::boolean(false),
                                          Arg::none(), Arg::node(0)}))),
                 2, "is given its 'sorter' argument, which the kernel does not check", true});
  out.push_back({"unreviewed_backend_kernel",
                 encode(withTensorArg(op("mk", "aten::mkldnn_reorder_conv2d_weight", "", {Arg::node(0)}))), 2,
                 "is not on the reviewed operator list", true});
  out.push_back({"quantized_namespace",
                 encode(withTensorArg(op("q", "quantized::relu6", "", {Arg::node(0)}))), 2,
                 "is outside the ATen operator set", true});
  // Found by plan_fuzzer: libtorch reads a Scalar with IValue::toScalar,
  // which throws a bare std::runtime_error for a tensor.
  out.push_back({"tensor_as_scalar",
                 encode(withTensorArg(op("add", "aten::add", "Tensor", {Arg::node(0), Arg::node(0), Arg::node(0)}))), 2,
                 "argument 'alpha' takes a number, the record passes something else", true});
  // Found by plan_fuzzer: view rejects a shape with a bare
  // std::runtime_error, not c10::Error.
  out.push_back({"view_bad_shape", encode(withTensorArg(op("view", "aten::view", "", {Arg::node(0), ints({0})}))), 2,
                 "while running %view (hostile.py:1): shape '[0]' is invalid for input of size", true});
  {
    // One 32 MiB blob named by 128 tensors of a call's arguments: 4 GiB
    // of tensors from a file of a few kilobytes.
    TensorMeta big = meta({int64_t(8) << 20});
    RecordFile f = oneCall({}, container(Value::Kind::Tuple, std::vector<Value>(128, tensorValue(0, big))));
    f.blobs.push_back(floatBlob({int64_t(8) << 20}, size_t(8) << 20));
    out.push_back({"one_blob_many_tensors", encode(f), 2,
                   "building its arguments: replay would hold more than its memory budget", true});
  }
  out.push_back({"to_sparse_then_indices", encode(withTensorArg(op("sp", "aten::to_sparse", "", {Arg::node(0)}))), 2,
                 "makes or changes sparse tensors", true});
  out.push_back({"reshape_alias_oob",
                 encode(withTensorArg(op("alias", "aten::_reshape_alias", "", {Arg::node(0), ints({1 << 20}), ints({1})}))), 2,
                 "views 4194304 bytes of a 8-byte storage", true});
  {
    // A chain of additions, each of one more parameter: per-node sets of
    // the parameters a value comes from grew quadratically (gigabytes from
    // a small file) while the plan was built.
    std::vector<Node> nodes;
    for (int k = 0; k < 8000; ++k) {
      Node p;
      p.kind = NodeKind::GetAttr;
      p.name = p.target = "p" + std::to_string(k);
      p.source = AccessPath::self().attr(p.name);
      p.outputs = {meta({2})};
      nodes.push_back(p);
      if (k == 0) continue;
      int64_t prev = k == 1 ? 0 : int64_t(nodes.size()) - 2;  // p0, or the last addition
      Node add = op("add" + std::to_string(k), "aten::add", "Tensor", {Arg::node(prev), Arg::node(int64_t(nodes.size()) - 1)});
      add.outputs = {meta({2})};
      nodes.push_back(add);
    }
    out.push_back({"fold_chain", encode(oneCall(std::move(nodes))), 2, "does not exist: self has no attribute", true});
  }
  // Values libtorch would take apart with its own words, or not at all.
  {
    Arg device;
    device.kind = Arg::Kind::Device;
    out.push_back({"device_empty", encode(oneCall({op("ones", "aten::ones", "", {ints({2}), Arg::none(), Arg::none(), device})})),
                   2, "%ones (hostile.py:1) (aten::ones): argument 'device' is device '', which names no device", true});
    out.push_back({"dtype_99", encode(oneCall({op("ones", "aten::ones", "", {ints({2}), Arg::integer(99)})})), 2,
                   "%ones (hostile.py:1) (aten::ones): argument 'dtype' is dtype number 99, which names no dtype", true});
  }
}

// A loop over a 2-element argument: loop(trip, inits), its carried
// values, the body, loop_end(nexts, scans); the output is `output` (a node
// index), by default the last node.
Node loopStart(Arg trip, std::vector<int64_t> inits) {
  Node loop = op("loop", record::kLoop, "", {std::move(trip), Arg::none()});
  loop.args[1].kind = Arg::Kind::NodeList;
  loop.args[1].ints = std::move(inits);
  loop.number = "int";
  return loop;
}

Node loopEnd(int64_t loop, std::vector<int64_t> nexts, std::vector<int64_t> scans) {
  Node end = op("loop_end", record::kLoopEnd, "", {Arg::node(loop), Arg::none(), Arg::none()});
  end.args[1].kind = end.args[2].kind = Arg::Kind::NodeList;
  end.args[1].ints = std::move(nexts);
  end.args[2].ints = std::move(scans);
  return end;
}

std::string loopRecord(std::vector<Node> nodes, int64_t output = -1) {
  TensorMeta m = meta({2});
  nodes.insert(nodes.begin(), placeholder(0, m));
  RecordFile f = oneCall(std::move(nodes), container(Value::Kind::Tuple, {tensorValue(0, m)}));
  f.blobs.push_back(floatBlob({2}, 2));
  if (output >= 0) f.functions[0].records[0].graph.nodes.back().args = {Arg::node(output)};
  return encode(f);
}

// Loops (MagPy 6.2.2) from others: runaway trip counts and nesting are
// bounded (a body that keeps memory per iteration meets the memory
// budget: Plan.LoopsThatKeepMemoryMeetTheBudget); a body's values stay in
// it.
void loopCases(std::vector<Case>& out) {
  Node carried = op("h", record::kCarried, "", {Arg::node(1), Arg::integer(0)});
  carried.outputs = {meta({2})};
  Node add = op("add", "aten::add", "Tensor", {Arg::node(2), Arg::node(2), Arg::integer(1)});
  add.outputs = {meta({2})};
  Node last = op("last", "getitem", "", {Arg::node(4), Arg::integer(0)});
  out.push_back({"loop_trip_unbounded", loopRecord({loopStart(Arg::integer(int64_t(1) << 40), {0}), carried, add,
                                                    loopEnd(1, {3}, {}), last}),
                 2, "runs 1099511627776 times (at most"});
  out.push_back({"loop_body_escapes",
                 loopRecord({loopStart(Arg::integer(2), {0}), carried, add, loopEnd(1, {3}, {}), last}, 3), 2,
                 "uses %add of a loop or branch side that has ended"});
  out.push_back({"loop_scan_as_output",
                 loopRecord({loopStart(Arg::integer(2), {0}), carried, add, loopEnd(1, {3}, {3}),
                             op("scans", "getitem", "", {Arg::node(4), Arg::integer(1)})}),
                 2, "a loop's scan list goes to an operator's Tensor[] only", true});
  {
    std::vector<Node> nested;
    for (int64_t k = 0; k <= record::kMaxLoopNesting; ++k) nested.push_back(loopStart(Arg::integer(2), {}));
    for (int64_t k = record::kMaxLoopNesting; k >= 0; --k) nested.push_back(loopEnd(k + 1, {}, {}));
    out.push_back({"loop_nesting_deep", loopRecord(std::move(nested), 0), 2, "nests loops deeper than"});
  }
  // Two loops at the limit, one in the other, with nothing in them: no
  // memory grows, and the call still stops.
  out.push_back({"loop_iterations_unbounded",
                 loopRecord({loopStart(Arg::integer(record::kMaxTripCount), {}), loopStart(Arg::integer(record::kMaxTripCount), {}),
                             loopEnd(2, {}, {}), loopEnd(1, {}, {})},
                            0),
                 2, "iterations, as many as a record's call may", true});
}

Node branchStart(int64_t cond, bool thenSeen, bool elseSeen, std::vector<int64_t> places = {}) {
  return op("if", record::kIf, "", {Arg::node(cond), Arg::boolean(thenSeen), Arg::boolean(elseSeen), ints(places)});
}

Node branchSide(const char* target, int64_t branch, std::vector<int64_t> values) {
  Node n = op(target == record::kIfEnd ? "if_end" : "if_else", target, "", {Arg::node(branch), Arg::none()});
  n.args[1].kind = Arg::Kind::NodeList;
  n.args[1].ints = std::move(values);
  return n;
}

// Branches (MagPy 6.2.2) from others: a side's values stay in it, regions
// nest as loops do, and a condition a call's tensors do not satisfy as
// capture saw (two elements, an unseen side) misses the record.
void branchCases(std::vector<Case>& out) {
  Node sum = op("sum", "aten::sum", "", {Arg::node(0), Arg::none()});
  sum.outputs = {meta({})};
  Node add = op("add", "aten::add", "Tensor", {Arg::node(0), Arg::node(0), Arg::integer(1)});
  add.outputs = {meta({2})};
  Node neg = op("neg", "aten::neg", "", {Arg::node(0)});
  neg.outputs = {meta({2})};
  auto picked = [](int64_t end) { return op("picked", "getitem", "", {Arg::node(end), Arg::integer(0)}); };
  out.push_back({"branch_condition_two_elements",
                 loopRecord({branchStart(0, true, true, {0}), add, branchSide(record::kIfElse, 1, {2}), neg,
                             branchSide(record::kIfEnd, 1, {4}), picked(5)}),
                 1, "decides on a tensor of 2 elements", true});
  Node one = op("one", "aten::ones", "", {ints({})});
  one.outputs = {meta({})};
  out.push_back({"branch_unseen_side",
                 loopRecord({one, branchStart(1, false, true, {0}), branchSide(record::kIfElse, 2, {}), neg,
                             branchSide(record::kIfEnd, 2, {4}), picked(5)}),
                 1, "takes its then side, which capture never saw", true});
  out.push_back({"branch_side_escapes",
                 loopRecord({sum, branchStart(1, true, true, {0}), add, branchSide(record::kIfElse, 2, {3}), neg,
                             branchSide(record::kIfEnd, 2, {5})}, 3),
                 2, "uses %add of a loop or branch side that has ended"});
  {
    std::vector<Node> nested = {sum};
    for (int64_t k = 0; k <= record::kMaxLoopNesting; ++k) nested.push_back(branchStart(1, true, true));
    for (int64_t k = record::kMaxLoopNesting; k >= 0; --k) {
      nested.push_back(branchSide(record::kIfElse, k + 2, {}));
      nested.push_back(branchSide(record::kIfEnd, k + 2, {}));
    }
    out.push_back({"branch_nesting_deep", loopRecord(std::move(nested), 0), 2, "nests loops and branches deeper than"});
  }
  out.push_back({"branch_crosses_loop",
                 loopRecord({sum, branchStart(1, true, true), loopStart(Arg::integer(2), {}),
                             branchSide(record::kIfElse, 2, {}), loopEnd(3, {}, {}), branchSide(record::kIfEnd, 2, {})},
                            0),
                 2, "is not the innermost region open"});
}

// Backward passes from others (magpy.backward): leaves are graph inputs
// that require grad; a call whose root does not require grad is refused
// with the node's name; a state tensor's .grad is a tensor like it.
void backwardCases(std::vector<Case>& out) {
  auto record = [](int64_t leaf, bool argRequiresGrad) {
    TensorMeta leafMeta = meta({2});
    leafMeta.requires_grad = true;
    Node neg = op("neg", "aten::neg", "", {Arg::node(0)});
    neg.outputs = {leafMeta};
    Node sum = op("sum", "aten::sum", "", {Arg::node(1), Arg::none()});
    sum.outputs = {meta({})};
    Arg leaves;
    leaves.kind = Arg::Kind::NodeList;
    leaves.ints = {leaf};
    Node backward = op("backward", record::kBackward, "", {Arg::node(2), Arg::none(), leaves, Arg::boolean(false)});
    backward.outputs = {meta({2})};
    TensorMeta given = meta({2});
    given.requires_grad = argRequiresGrad;
    RecordFile f = oneCall({placeholder(0, leafMeta), neg, sum, backward, op("grad", "getitem", "", {Arg::node(3), Arg::integer(0)})},
                           container(Value::Kind::Tuple, {tensorValue(0, given)}));
    f.blobs.push_back(floatBlob({2}, 2));
    return encode(f);
  };
  out.push_back({"backward_leaf_computed", record(1, true), 2, "names a leaf that is not a distinct graph input requiring grad"});
  out.push_back({"backward_without_autograd", record(0, false), 2, "does not require grad in this call", true});

  RecordFile f = oneCall({});
  f.blobs.push_back(floatBlob({2}, 2));
  Value w = tensorValue(0, meta({2}));
  w.names = {"grad"};
  w.items = {tensorValue(0, meta({1}))};
  f.functions[0].self.names = {"w"};
  f.functions[0].self.items = {w};
  out.push_back({"state_grad_other_shape", encode(f), 2, "a tensor only its .grad, a tensor like it"});
}

// Dicts keyed by objects (optimizer state): keys that name no tensor, a
// write under a key that is no tensor.
void objectKeyCases(std::vector<Case>& out) {
  RecordFile f = oneCall({});
  Value d = container(Value::Kind::Dict);
  d.keys = {Atom::none()};
  d.keyRefs = {1};
  d.items = {Value::ofAtom(Atom::integer(1))};
  Value l = container(Value::Kind::List);
  l.id = 1;
  f.functions[0].self.names = {"d", "l"};
  f.functions[0].self.items = {d, l};
  out.push_back({"object_key_not_tensor", encode(f), 2, "which is no tensor of its tree"});

  f.functions[0].self.items[0].keyRefs.clear();
  f.functions[0].self.items[0].keys = {Atom::string("k")};
  Effect put;
  put.kind = Effect::Kind::SetObjectItem;
  put.target = AccessPath::self().attr("d");
  put.keyPath = AccessPath::self().attr("l");
  put.value = ValueExpr::constant(Atom::integer(2));
  f.functions[0].records[0].mock.effects = {put};
  out.push_back({"object_key_write_under_list", encode(f), 2, "not a tensor", true});
}


// Extend on what is no list, or with what is no list display.
void extendCases(std::vector<Case>& out) {
  RecordFile f = oneCall({});
  Value d = container(Value::Kind::Dict);
  f.functions[0].self.names = {"d"};
  f.functions[0].self.items = {d};
  Effect grow;
  grow.kind = Effect::Kind::Extend;
  grow.target = AccessPath::self().attr("d");
  grow.value.kind = ValueExpr::Kind::List;
  grow.value.items = {ValueExpr::constant(Atom::integer(2))};
  f.functions[0].records[0].mock.effects = {grow};
  out.push_back({"extend_a_dict", encode(f), 2, "not a list", true});
  f.functions[0].records[0].mock.effects[0].value = ValueExpr::constant(Atom::integer(2));
  out.push_back({"extend_with_a_number", encode(f), 2, "the mock extends self.d with a 2, not a list"});
}

}  // namespace

std::vector<Case> cases() {
  std::vector<Case> out;
  loadCases(out);
  replayCases(out);
  loopCases(out);
  branchCases(out);
  backwardCases(out);
  objectKeyCases(out);
  extendCases(out);
  return out;
}

}  // namespace magpy::hostile

// A small but complete RecordFile, built by hand, for record-level tests.
#pragma once

#include "magpy/record/record.h"
#include "magpy/support/hash.h"

namespace magpy::sample {

inline record::TensorBlob floatBlob(std::vector<int64_t> shape, std::vector<float> values) {
  record::TensorBlob b;
  b.dtype = "float32";
  b.shape = std::move(shape);
  b.bytes.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  b.hash = hashBytes(b.bytes.data(), b.bytes.size());
  return b;
}

// An operator node: target "aten::view", overload "" for the default one.
inline record::Node opNode(const std::string& name, const std::string& target, const std::string& overload,
                           std::vector<record::Arg> args) {
  record::Node n;
  n.name = name;
  n.target = target;
  n.overload = overload;
  n.args = std::move(args);
  return n;
}

// The output node of a graph returning `args`.
inline record::Node output(std::vector<record::Arg> args) {
  record::Node out;
  out.kind = record::NodeKind::Output;
  out.args = std::move(args);
  return out;
}

inline record::TensorMeta meta(std::vector<int64_t> shape, std::vector<int64_t> strides) {
  record::TensorMeta m;
  m.shape = std::move(shape);
  m.strides = std::move(strides);
  return m;
}

inline record::Value tensorValue(uint32_t blob, record::TensorMeta m) {
  record::Value v;
  v.kind = record::Value::Kind::Tensor;
  v.blob = blob;
  v.meta = std::move(m);
  return v;
}

// A placeholder named `name` reading args[index].
inline record::Node argument(const std::string& name, int64_t index, record::TensorMeta m) {
  record::Node n;
  n.kind = record::NodeKind::Placeholder;
  n.name = n.target = name;
  n.source = record::AccessPath::arg(index);
  n.outputs = {std::move(m)};
  return n;
}

// A Python loop over the rows of x (args[0], 5x3) from h (args[1], 3):
//   for t in range(x.size(0)): h = h + x[t]; ys.append(h * 2)
//   return h, torch.stack(ys)
inline record::Graph loopGraph() {
  using namespace record;
  Node x = argument("x", 0, meta({5, 3}, {3, 1}));
  Node h0 = argument("h0", 1, meta({3}, {1}));
  Node loop = opNode("loop", kLoop, "", {Arg::node(2), Arg::none()});
  loop.args[1].kind = Arg::Kind::NodeList;
  loop.args[1].ints = {1};
  loop.number = "int";
  Node h = opNode("h", kCarried, "", {Arg::node(3), Arg::integer(0)});
  h.outputs = {meta({3}, {1})};
  Node row = opNode("select", "aten::select", "int", {Arg::node(0), Arg::integer(0), Arg::node(3)});
  row.outputs = {meta({3}, {1})};
  Node add = opNode("add", "aten::add", "Tensor", {Arg::node(4), Arg::node(5), Arg::integer(1)});
  add.outputs = {meta({3}, {1})};
  Node twice = opNode("mul", "aten::mul", "Scalar", {Arg::node(6), Arg::floating(2)});
  twice.outputs = {meta({3}, {1})};
  Node end = opNode("loop_end", kLoopEnd, "", {Arg::node(3), Arg::none(), Arg::none()});
  end.args[1].kind = end.args[2].kind = Arg::Kind::NodeList;
  end.args[1].ints = {6};
  end.args[2].ints = {7};
  Node last = opNode("getitem", "getitem", "", {Arg::node(8), Arg::integer(0)});
  last.outputs = {meta({3}, {1})};
  Node ys = opNode("getitem_1", "getitem", "", {Arg::node(8), Arg::integer(1)});
  Node stack = opNode("stack", "aten::stack", "", {Arg::node(10), Arg::integer(0)});
  stack.outputs = {meta({5, 3}, {3, 1})};
  Graph g;
  g.nodes = {x, h0, opNode("size", "aten::size", "int", {Arg::node(0), Arg::integer(0)}), loop, h, row, add, twice,
             end, last, ys, stack, output({Arg::node(9), Arg::node(11)})};
  return g;
}

// A Python `if` on a tensor's truth (keep: args[1], one element):
//   y = relu(x) * 2 if keep else -x
//   return y + x
inline record::Graph branchGraph() {
  using namespace record;
  Node x = argument("x", 0, meta({2, 3}, {3, 1}));
  Node keep = argument("keep", 1, meta({}, {}));
  Arg places;  // y: the frame's third slot
  places.kind = Arg::Kind::IntList;
  places.ints = {2};
  Node branch = opNode("if", kIf, "", {Arg::node(1), Arg::boolean(true), Arg::boolean(true), places});
  Node relu = opNode("relu", "aten::relu", "", {Arg::node(0)});
  relu.outputs = {meta({2, 3}, {3, 1})};
  Node twice = opNode("mul", "aten::mul", "Scalar", {Arg::node(3), Arg::floating(2)});
  twice.outputs = {meta({2, 3}, {3, 1})};
  auto side = [](const char* name, const char* target, int64_t value) {
    Node n = opNode(name, target, "", {Arg::node(2), Arg::none()});
    n.args[1].kind = Arg::Kind::NodeList;
    n.args[1].ints = {value};
    return n;
  };
  Node neg = opNode("neg", "aten::neg", "", {Arg::node(0)});
  neg.outputs = {meta({2, 3}, {3, 1})};
  Node y = opNode("getitem", "getitem", "", {Arg::node(7), Arg::integer(0)});
  y.outputs = {meta({2, 3}, {3, 1})};
  Node add = opNode("add", "aten::add", "Tensor", {Arg::node(8), Arg::node(0), Arg::integer(1)});
  add.outputs = {meta({2, 3}, {3, 1})};
  Graph g;
  g.nodes = {x, keep, branch, relu, twice, side("if_else", kIfElse, 4), neg, side("if_end", kIfEnd, 6), y, add,
             output({Arg::node(9)})};
  return g;
}

// A training step on a leaf w (args[0], 3, requires grad) and data x (args[1]):
//   loss = (w * x).sum(); loss.backward()   (w.grad was None: it becomes the gradient)
//   return loss, the gradient
inline record::Graph backwardGraph() {
  using namespace record;
  TensorMeta leaf = meta({3}, {1});
  leaf.requires_grad = true;
  Node w = argument("w", 0, leaf);
  Node x = argument("x", 1, meta({3}, {1}));
  Node product = opNode("mul", "aten::mul", "Tensor", {Arg::node(0), Arg::node(1)});
  product.outputs = {leaf};
  TensorMeta scalar = meta({}, {});
  scalar.requires_grad = true;
  Node loss = opNode("sum", "aten::sum", "", {Arg::node(2), Arg::none()});
  loss.outputs = {scalar};
  Arg leaves;
  leaves.kind = Arg::Kind::NodeList;
  leaves.ints = {0};
  Node backward = opNode("backward", kBackward, "", {Arg::node(3), Arg::none(), leaves, Arg::boolean(false)});
  backward.outputs = {meta({3}, {1})};
  Node grad = opNode("grad", "getitem", "", {Arg::node(4), Arg::integer(0)});
  grad.outputs = {meta({3}, {1})};
  Graph g;
  g.nodes = {w, x, product, loss, backward, grad, output({Arg::node(3), Arg::node(5)})};
  return g;
}

// y = relu(x * w) * scale, with `self.calls` counted up by the mock.
inline record::RecordFile sampleFile() {
  using namespace record;
  RecordFile f;
  f.env = {"0.1.0", "3.11.2", "1.13.0", 0x1234};
  f.script = "sample.py";
  f.blobs.push_back(floatBlob({2}, {1.5f, -2.0f}));      // w
  f.blobs.push_back(floatBlob({2}, {0.5f, 1.0f}));       // example x
  f.blobs.push_back(floatBlob({2}, {0.75f, 0.0f}));      // its result

  CompiledFunction fn;
  fn.name = "__main__.Net";
  fn.module = "__main__";
  fn.self.kind = Value::Kind::Object;
  fn.self.type = "__main__.Net";
  fn.self.names = {"w", "scale", "calls"};
  fn.self.items = {tensorValue(0, meta({2}, {1})), Value::ofAtom(Atom::floating(1.0)), Value::ofAtom(Atom::integer(0))};

  Record r;
  r.origin = "first call";
  Check t;
  t.kind = Check::Kind::Tensor;
  t.meta = meta({2}, {1});
  r.guards.push_back({AccessPath::arg(0), t});
  Check ty;
  ty.kind = Check::Kind::Type;
  ty.s = "__main__.Net";
  r.guards.push_back({AccessPath::self(), ty});
  Check sc;
  sc.kind = Check::Kind::Equals;
  sc.atom = Atom::floating(1.0);
  r.guards.push_back({AccessPath::self().attr("scale"), sc});

  Node x;
  x.kind = NodeKind::Placeholder;
  x.name = "arg0";
  x.target = "arg0";
  x.source = AccessPath::arg(0);
  x.outputs = {meta({2}, {1})};
  Node w = x;
  w.kind = NodeKind::GetAttr;
  w.name = "w";
  w.target = "w";
  w.source = AccessPath::self().attr("w");
  Node mul;
  mul.name = "mul";
  mul.target = "aten::mul";
  mul.overload = "Tensor";
  mul.args = {Arg::node(0), Arg::node(1)};
  mul.outputs = {meta({2}, {1})};
  mul.where = "sample.py:7";
  Node relu = mul;
  relu.name = "relu";
  relu.target = "aten::relu";
  relu.overload = "";
  relu.args = {Arg::node(2)};
  Node scale = mul;
  scale.name = "mul_1";
  Arg s;
  s.kind = Arg::Kind::WrappedScalar;
  s.s = "float64";
  s.f = 1.0;
  scale.args = {Arg::node(3), s};
  Node out;
  out.kind = NodeKind::Output;
  out.name = "output";
  out.args = {Arg::node(4)};
  r.graph.nodes = {x, w, mul, relu, scale, out};

  r.mock.result = ValueExpr::output(0);
  Effect e;
  e.kind = Effect::Kind::SetAttr;
  e.target = AccessPath::self();
  e.name = "calls";
  e.value = ValueExpr::constant(Atom::integer(1));
  r.mock.effects.push_back(e);
  // What the run touched: self (read and written), its w and scale, the argument, the result.
  using View = RefGraphView;
  r.refs.nodes = {{"external state", 1, 0},
                  {"Net", 2, View::kGuarded | View::kWritten},
                  {"Tensor float32[2]", 1, View::kGuarded},
                  {"1.0", 1, View::kGuarded},
                  {"0", 1, View::kGuarded},
                  {"1", 1, View::kWritten},
                  {"Tensor float32[2]", 1, View::kResult}};
  r.refs.edges = {{0, 1, 0, "self"}, {0, 2, 0, "args[0]"}, {1, 3, 0, ".scale"}, {1, 4, 0, ".calls"}, {1, 5, 1, ".calls"}};
  fn.records.push_back(r);
  f.functions.push_back(fn);

  LoggedCall c;
  c.function = 0;
  c.record = 0;
  c.monitored = true;
  c.args.kind = Value::Kind::Tuple;
  c.args.items = {tensorValue(1, meta({2}, {1}))};
  c.kwargs.kind = Value::Kind::Dict;
  c.result = tensorValue(2, meta({2}, {1}));
  f.calls.push_back(c);
  return f;
}

}  // namespace magpy::sample

#include "magpy/record/generalize.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "magpy/support/strings.h"

namespace magpy::record {
namespace {

// Thrown inside generalize() to say why two records stay apart.
struct Apart {
  std::string why;
};

// Strides of a row-major tensor of these sizes (size-1 dimensions may have
// any stride, as torch's is_contiguous() allows).
bool contiguous(const TensorMeta& m) {
  int64_t expected = 1;
  for (size_t d = m.shape.size(); d-- > 0;) {
    if (m.shape[d] != 1 && m.strides[d] != expected) return false;
    expected *= m.shape[d];
  }
  return true;
}

class Generalizer {
 public:
  Generalizer(const Record& earlier, const Record& later) : earlier_(earlier), later_(later) {
    // Symbols the earlier record already has, with their sizes in both captures.
    for (auto& g : earlier.guards)
      for (size_t d = 0; d < g.check.meta.sym.size(); ++d)
        if (int32_t k = g.check.meta.sym[d].symbol; k >= 0) {
          if (size_t(k) >= sizes_.size()) sizes_.resize(size_t(k) + 1, {-1, -1});
          sizes_[size_t(k)].first = g.check.meta.shape[d];
        }
  }

  Record run() {
    if (!earlier_.breaks.empty() || !later_.breaks.empty()) throw Apart{"a record with graph breaks runs as Python"};
    Record out = later_;
    guards_ = &out.guards;
    if (earlier_.guards.size() != later_.guards.size()) throw Apart{"the records have different guards"};
    for (size_t i = 0; i < out.guards.size(); ++i) guard(earlier_.guards[i], out.guards[i]);
    if (fresh_.empty()) throw Apart{"no argument size differs"};
    for (size_t k = 0; k < sizes_.size(); ++k)
      if (sizes_[k].second < 0) throw Apart{"size s" + std::to_string(k) + " is no longer read"};
    graph(earlier_.graph, out.graph);
    mock(earlier_.mock, later_.mock);
    return out;
  }

  // Whether the earlier capture's sizes are all sizes the record accepts.
  bool coversEarlier() const {
    for (auto& [v, w] : sizes_)
      if (v < kMinSymbolValue) return false;
    return true;
  }

 private:
  void guard(const Guard& a, Guard& b) {
    if (a.path != b.path || a.check.kind != b.check.kind) throw Apart{"the records have different guards"};
    bool sizes = a.check.kind == Check::Kind::Tensor &&
                 (a.check.meta.dynamic() || a.check.meta.shape != b.check.meta.shape);
    if (!sizes) {
      if (!(a.check == b.check)) throw Apart{"guard " + toString(a) + " differs from " + toString(b)};
      return;
    }
    bool argument = a.path.root == AccessPath::Root::Arg || a.path.root == AccessPath::Root::Kwarg;
    if (!argument) throw Apart{"the sizes of " + toString(a.path) + " differ, and only arguments' sizes may change"};
    TensorMeta& m = b.check.meta;
    const TensorMeta& e = a.check.meta;
    if (e.dtype != m.dtype || e.device != m.device || e.requires_grad != m.requires_grad || e.shape.size() != m.shape.size())
      throw Apart{toString(a.path) + " differs in more than its sizes"};
    if ((!e.dynamic() && !contiguous(e)) || !contiguous(m))
      throw Apart{toString(a.path) + " is not contiguous, so its strides would not follow from its sizes"};
    std::vector<SymDim> dims(m.shape.size());
    for (size_t d = 0; d < dims.size(); ++d) {
      const SymDim* known = e.dynamic() && e.sym[d].symbol >= 0 ? &e.sym[d] : nullptr;
      if (known) {
        dims[d] = *known;
        bind(known->symbol, m.shape[d], a.path);
      } else if (e.shape[d] == m.shape[d]) {
        dims[d].offset = m.shape[d];
      } else {
        dims[d].symbol = freshSymbol(e.shape[d], m.shape[d]);
      }
    }
    m.sym = std::move(dims);
  }

  void bind(int32_t symbol, int64_t size, const AccessPath& where) {
    auto& later = sizes_[size_t(symbol)].second;
    if (later >= 0 && later != size)
      throw Apart{"s" + std::to_string(symbol) + " has two sizes in " + toString(where) + "'s call"};
    later = size;
  }

  // Dimensions that changed from v to w share a symbol ("duck sizing").
  int32_t freshSymbol(int64_t v, int64_t w) {
    auto it = fresh_.find({v, w});
    if (it != fresh_.end()) return it->second;
    if (sizes_.size() >= size_t(kMaxSymbols))
      throw Apart{"more than " + std::to_string(kMaxSymbols) + " sizes change"};
    if (w < kMinSymbolValue) throw Apart{"a size changes to " + std::to_string(w) + " (sizes 0 and 1 stay specialized)"};
    int32_t k = int32_t(sizes_.size());
    sizes_.push_back({v, w});
    fresh_[{v, w}] = k;
    return k;
  }

  void graph(const Graph& a, Graph& b) {
    if (a.nodes.size() != b.nodes.size()) throw Apart{"the graphs have different operators"};
    for (size_t i = 0; i < a.nodes.size(); ++i) {
      const Node& x = a.nodes[i];
      Node& y = b.nodes[i];
      std::string node = "%" + y.name + (y.where.empty() ? "" : " (" + y.where + ")");
      if (x.kind != y.kind || x.target != y.target || x.overload != y.overload || x.source != y.source ||
          x.blob != y.blob || x.number != y.number || x.grad != y.grad || x.outputs.size() != y.outputs.size())
        throw Apart{"the graphs differ at " + node};
      if (!(x.args == y.args))
        throw Apart{node + " takes other arguments at the other size (computed where magpy did not follow the sizes)"};
      if (y.kind == NodeKind::Placeholder && y.outputs.size() == 1) {
        for (auto& g : generalizedGuards())
          if (g.path == y.source && g.check.kind == Check::Kind::Tensor && g.check.meta.shape == y.outputs[0].shape)
            y.outputs[0].sym = g.check.meta.sym;
        continue;
      }
      for (size_t r = 0; r < y.outputs.size(); ++r) result(x.outputs[r], y.outputs[r], node, i, a, b);
    }
  }

  // A tensor value's metadata: a node's one result, or the one getitem picks.
  static const TensorMeta* metaOf(const Graph& g, int64_t k) {
    const Node& n = g.nodes[size_t(k)];
    if (n.target == "getitem" && n.args.size() == 2 && n.args[0].kind == Arg::Kind::Node && n.args[0].i < k) {
      const Node& from = g.nodes[size_t(n.args[0].i)];
      return n.args[1].i >= 0 && size_t(n.args[1].i) < from.outputs.size() ? &from.outputs[size_t(n.args[1].i)] : nullptr;
    }
    return n.outputs.size() == 1 ? &n.outputs[0] : nullptr;
  }

  // What the operator's arguments say of result dimension d that changed
  // from y1 to y2: the d-th entry of a size list as long as the result's
  // rank (x.view(b, t // 2, -1)), else the same dimension of a tensor
  // argument that changed alike (propagated), else an int argument with
  // both values (x[:, :n - n // 2]), else any dimension of a tensor one.
  std::optional<SymDim> fromArguments(const Graph& a, const Graph& b, const Node& y, size_t d, size_t rank,
                                      int64_t y1, int64_t y2) const {
    for (auto& arg : y.args)
      if (arg.kind == Arg::Kind::SizeList && arg.ints.size() == 2 * rank && arg.ints[2 * d] == 1) {
        size_t k = size_t(arg.ints[2 * d + 1]);
        if (intValue(a, k) == y1 && intValue(b, k) == y2) {
          SymDim dim;
          dim.node = int32_t(k);
          return dim;
        }
      }
    auto tensorDim = [&](bool samePosition) -> std::optional<SymDim> {
      for (auto& arg : y.args) {
        if (arg.kind != Arg::Kind::Node) continue;
        const TensorMeta* e = metaOf(a, arg.i);
        const TensorMeta* m = metaOf(b, arg.i);
        if (!e || !m || !m->dynamic() || e->shape.size() != m->shape.size()) continue;
        for (size_t p = 0; p < m->shape.size(); ++p) {
          bool changed = m->sym[p].symbol >= 0 || m->sym[p].node >= 0;
          if ((!samePosition || p == d) && changed && e->shape[p] == y1 && m->shape[p] == y2) return m->sym[p];
        }
      }
      return std::nullopt;
    };
    if (auto same = tensorDim(true)) return same;
    for (auto& arg : y.args)  // an int the operator takes: x[:, :n - n // 2] slices up to it
      if (arg.kind == Arg::Kind::Node && intValue(a, size_t(arg.i)) == y1 && intValue(b, size_t(arg.i)) == y2) {
        SymDim dim;
        dim.node = int32_t(arg.i);
        return dim;
      }
    return tensorDim(false);
  }

  // The int node `k` computed at capture: number arithmetic keeps it, a
  // size read is its tensor's size.
  static std::optional<int64_t> intValue(const Graph& g, size_t k) {
    const Node& n = g.nodes[k];
    if (n.number == "int" && n.seen.kind == Atom::Kind::Int) return n.seen.i;
    bool size = n.target == "aten::size" && n.overload == "int" && n.args.size() == 2 &&
                n.args[0].kind == Arg::Kind::Node && n.args[1].kind == Arg::Kind::Int;
    if (!size || size_t(n.args[0].i) >= k) return std::nullopt;
    const Node& t = g.nodes[size_t(n.args[0].i)];
    if (t.outputs.size() != 1) return std::nullopt;
    int64_t rank = int64_t(t.outputs[0].shape.size()), dim = n.args[1].i < 0 ? n.args[1].i + rank : n.args[1].i;
    if (dim < 0 || dim >= rank) return std::nullopt;
    return t.outputs[0].shape[size_t(dim)];
  }

  // The first int node before `before` whose values were y1 and y2: the
  // program's arithmetic gave the size (x.view(b, t // 2, -1)).
  // arithmetic: only number operators' results, not sizes as read.
  std::optional<int32_t> computedBy(int64_t y1, int64_t y2, size_t before, bool arithmetic) const {
    for (size_t k = 0; k < before; ++k)
      if ((!arithmetic || earlier_.graph.nodes[k].number == "int") && intValue(earlier_.graph, k) == y1 &&
          intValue(later_.graph, k) == y2)
        return int32_t(k);
    return std::nullopt;
  }

  void result(const TensorMeta& e, TensorMeta& m, const std::string& node, size_t index, const Graph& a,
              const Graph& b) {
    if (e.dtype != m.dtype || e.device != m.device || e.shape.size() != m.shape.size())
      throw Apart{node + " gives a result of another type or rank"};
    std::vector<SymDim> dims(m.shape.size());
    bool dynamic = false;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (e.dynamic() && e.sym[d].node >= 0) {
        if (intValue(later_.graph, size_t(e.sym[d].node)) != m.shape[d])
          throw Apart{node + "'s size " + toString(e.sym[d]) + " does not hold at the other size"};
        dims[d] = e.sym[d];
      } else if (e.dynamic() && e.sym[d].symbol >= 0) {
        const SymDim& x = e.sym[d];
        if (x.scale * sizes_[size_t(x.symbol)].second + x.offset != m.shape[d])
          throw Apart{node + "'s size " + toString(x) + " does not hold at the other size"};
        dims[d] = x;
      } else if (e.shape[d] == m.shape[d]) {
        dims[d].offset = m.shape[d];
      } else if (auto known = fromArguments(a, b, b.nodes[index], d, dims.size(), e.shape[d], m.shape[d])) {
        dims[d] = *known;
      } else {
        dims[d] = fit(e.shape[d], m.shape[d], node, index);
      }
      dynamic = dynamic || dims[d].symbol >= 0 || dims[d].node >= 0;
    }
    if (dynamic) m.sym = std::move(dims);
  }

  // The program's arithmetic first: an int a number operator computed
  // before the node with both captures' values (computedBy). Else y = scale
  // * s + offset through both captures; where several symbols fit, the
  // simplest rule wins (the smallest offset, then scale). Else a size read
  // from a tensor with both values. The size checks of replay find a wrong
  // guess, and a call then misses.
  SymDim fit(int64_t y1, int64_t y2, const std::string& node, size_t index) const {
    SymDim computed;
    if (auto k = computedBy(y1, y2, index, true)) {
      computed.node = *k;
      return computed;
    }
    std::optional<SymDim> best;
    for (size_t k = 0; k < sizes_.size(); ++k) {
      auto [v, w] = sizes_[k];
      if (v == w || (y2 - y1) % (w - v) != 0) continue;
      int64_t scale = (y2 - y1) / (w - v);
      if (scale <= 0) continue;
      SymDim d{int32_t(k), scale, y2 - scale * w};
      if (!best || std::make_pair(std::abs(d.offset), d.scale) < std::make_pair(std::abs(best->offset), best->scale))
        best = d;
    }
    if (!best) {
      if (auto k = computedBy(y1, y2, index, false)) {
        computed.node = *k;
        return computed;
      }
      throw Apart{node + "'s size changes from " + std::to_string(y1) + " to " + std::to_string(y2) +
                  ", which no argument size or number the graph computes explains"};
    }
    return *best;
  }

  void mock(const MockSpec& a, const MockSpec& b) const {
    if (!sameMock(a, b)) throw Apart{"the records return or write different things"};
  }

  const std::vector<Guard>& generalizedGuards() const { return *guards_; }

  const Record& earlier_;
  const Record& later_;
  const std::vector<Guard>* guards_ = nullptr;  // the generalized record's
  std::vector<std::pair<int64_t, int64_t>> sizes_;  // per symbol: its size in earlier's and in later's capture
  std::map<std::pair<int64_t, int64_t>, int32_t> fresh_;
};

}  // namespace

Generalized generalize(const Record& earlier, const Record& later) {
  Generalized out;
  try {
    Generalizer g(earlier, later);
    out.record = g.run();
    out.coversEarlier = g.coversEarlier();
  } catch (const Apart& a) {
    out.why = a.why;
  }
  return out;
}

}  // namespace magpy::record

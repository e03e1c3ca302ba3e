#include "magpy/record/value.h"

#include <cstring>
#include <map>
#include <tuple>

#include "magpy/support/error.h"
#include "magpy/support/strings.h"

namespace magpy::record {

bool Atom::operator==(const Atom& o) const {
  if (kind != o.kind) return false;
  switch (kind) {
    case Kind::None:
    case Kind::Ellipsis: return true;
    case Kind::Bool:
    case Kind::Int: return i == o.i;
    case Kind::Float: return std::memcmp(&f, &o.f, sizeof f) == 0;
    case Kind::Tuple: return items == o.items;
    default: return s == o.s;
  }
}

// Three-way, field by field (kind, int, float bits, string, items): sets
// and sorts of paths compare long equal prefixes, and a tuple's `<` would
// compare each equal field twice.
int Atom::compare(const Atom& o) const {
  if (kind != o.kind) return kind < o.kind ? -1 : 1;
  if (i != o.i) return i < o.i ? -1 : 1;
  uint64_t a = 0, b = 0;
  std::memcpy(&a, &f, 8);
  std::memcpy(&b, &o.f, 8);
  if (a != b) return a < b ? -1 : 1;
  if (int c = s.compare(o.s)) return c;
  for (size_t k = 0; k < items.size() && k < o.items.size(); ++k)
    if (int c = items[k].compare(o.items[k])) return c;
  return items.size() == o.items.size() ? 0 : items.size() < o.items.size() ? -1 : 1;
}

std::string objectLabel(const std::string& type, const Atom& base) {
  return base.kind == Atom::Kind::None ? type : type + " " + toString(base);
}

std::string toString(const Atom& a) {
  switch (a.kind) {
    case Atom::Kind::None: return "None";
    case Atom::Kind::Ellipsis: return "Ellipsis";
    case Atom::Kind::Bool: return a.i ? "True" : "False";
    case Atom::Kind::Int: return std::to_string(a.i);
    case Atom::Kind::Float: return formatDouble(a.f);
    case Atom::Kind::Str: return quote(a.s);
    case Atom::Kind::DType:
    case Atom::Kind::Layout:
    case Atom::Kind::MemoryFormat: return hasControls(a.s) ? "torch.<" + quote(a.s) + ">" : "torch." + a.s;
    case Atom::Kind::Device: return "device(" + quote(a.s) + ")";
    case Atom::Kind::Tuple: {
      std::vector<std::string> parts;
      for (auto& x : a.items) parts.push_back(toString(x));
      return "(" + join(parts, ", ") + (parts.size() == 1 ? ",)" : ")");
    }
  }
  return "?";
}

bool TensorMeta::operator==(const TensorMeta& o) const {
  return dtype == o.dtype && shape == o.shape && strides == o.strides && device == o.device &&
         requires_grad == o.requires_grad && sym == o.sym;
}

std::string toString(const SymDim& d) {
  if (d.node >= 0) return "#" + std::to_string(d.node);
  if (d.symbol < 0) return std::to_string(d.offset);
  std::string s = (d.scale == 1 ? "" : std::to_string(d.scale) + "*") + "s" + std::to_string(d.symbol);
  if (d.offset > 0) s += "+";
  return d.offset ? s + std::to_string(d.offset) : s;
}

std::string typeText(const TensorMeta& m) {
  if (!m.dynamic()) return m.dtype + formatInts(m.shape);
  std::vector<std::string> dims;
  for (auto& d : m.sym) dims.push_back(toString(d));
  return m.dtype + "[" + join(dims, ", ") + "]";
}

int64_t TensorMeta::numel() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string toString(const TensorMeta& m) {
  std::string s = typeText(m) + (m.dynamic() ? " contiguous" : " strides=" + formatInts(m.strides)) + " " + m.device;
  if (m.requires_grad) s += " requires_grad";
  return s;
}

size_t dtypeSize(const std::string& dtype) {
  static const std::pair<const char*, size_t> kSizes[] = {
      {"float32", 4}, {"float64", 8}, {"float16", 2}, {"bfloat16", 2}, {"int64", 8},  {"int32", 4},
      {"int16", 2},   {"int8", 1},    {"uint8", 1},   {"bool", 1},     {"complex64", 8}, {"complex128", 16},
  };
  for (auto& [name, size] : kSizes)
    if (dtype == name) return size;
  throw Error("unknown tensor dtype '" + dtype + "'");
}

namespace {

void collectRefs(const Value& v, std::map<uint32_t, uint32_t>& used) {
  if (v.kind == Value::Kind::Ref) used.emplace(v.id, 0);
  for (uint32_t k : v.keyRefs)
    if (k) used.emplace(k, 0);
  for (auto& item : v.items) collectRefs(item, used);
}

// Ids are given in depth-first order of definitions; a key may name an
// object defined later, so keys are renamed once every id is known.
void renumber(Value& v, std::map<uint32_t, uint32_t>& used, uint32_t& next) {
  if (v.kind == Value::Kind::Ref) {
    v.id = used[v.id];
    return;
  }
  if (v.id) {
    auto it = used.find(v.id);
    v.id = it == used.end() ? 0 : (it->second = ++next);
  }
  for (auto& item : v.items) renumber(item, used, next);
}

void renumberKeys(Value& v, const std::map<uint32_t, uint32_t>& used) {
  for (uint32_t& k : v.keyRefs) {
    if (!k) continue;
    k = used.at(k);
    if (!k) throw Error("a dict's key names an object its tree does not hold");
  }
  for (auto& item : v.items) renumberKeys(item, used);
}

void expand(Value& v, std::map<uint32_t, Value>& seen) {
  if (v.kind == Value::Kind::Ref) {
    auto it = seen.find(v.id);
    if (it != seen.end()) {
      v = it->second;
      return;
    }
    // A weak reference's referent that holds it: no copy can hold that.
    Value opaque;
    opaque.kind = Value::Kind::Opaque;
    opaque.type = "an object holding a weak reference to it";
    v = std::move(opaque);
    return;
  }
  for (auto& item : v.items) expand(item, seen);  // ids inside it may be named later
  if (!v.keyRefs.empty()) {
    Value opaque;
    opaque.kind = Value::Kind::Opaque;
    opaque.type = "a dict keyed by objects of another tree";
    opaque.id = v.id;
    v = std::move(opaque);
  }
  if (v.id) {
    uint32_t id = v.id;
    v.id = 0;
    seen.emplace(id, v);
  }
}

}  // namespace

void compactIds(Value& root) {
  std::map<uint32_t, uint32_t> used;
  collectRefs(root, used);
  uint32_t next = 0;
  renumber(root, used, next);
  renumberKeys(root, used);
}

std::string keyText(const Value& dict, size_t i) {
  if (i < dict.keyRefs.size() && dict.keyRefs[i]) return "@" + std::to_string(dict.keyRefs[i]);
  return toString(dict.keys[i]);
}

void expandRefs(Value& root) {
  std::map<uint32_t, Value> seen;
  expand(root, seen);
}

}  // namespace magpy::record

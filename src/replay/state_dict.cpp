#include "magpy/replay/state_dict.h"

#include <ATen/ops/empty.h>
#include <c10/core/GradMode.h>
#include <caffe2/serialize/inline_container.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include "magpy/record/path.h"
#include "magpy/replay/tensors.h"
#include "magpy/support/error.h"
#include "magpy/support/strings.h"

namespace magpy::replay {
namespace {

// What the unpickler builds: the few Python values a state dict holds.
struct PyVal {
  enum class Kind : uint8_t { None, Bool, Int, Float, Str, Tuple, List, Dict, Global, Tensor, Storage };
  Kind kind = Kind::None;
  int64_t i = 0;
  double f = 0;
  std::string s;                                    // Str; Global "module.name"; Storage dtype
  std::vector<std::shared_ptr<PyVal>> items;        // Tuple, List, Dict values
  std::vector<std::string> keys;                    // Dict keys (str only)
  at::Tensor tensor;                                // Tensor; Storage (flat, its elements)
  int depth = 0;                                    // containers nest at most kMaxDepth
};
using Ref = std::shared_ptr<PyVal>;

constexpr int kMaxDepth = 64;

// A name from the file, for messages: quoted, with every byte outside
// ASCII escaped too (a hostile file's names need not be UTF-8).
std::string shown(const std::string& name) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : quote(name)) {
    if (c < 0x80) {
      out += char(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// `child` goes into `container`: nesting stays shallow (no walk or
// destructor over a hostile file's values can exhaust the stack).
void nest(PyVal& container, const PyVal& child) {
  container.depth = std::max(container.depth, child.depth + 1);
  if (container.depth > kMaxDepth) throw Error("values nested deeper than " + std::to_string(kMaxDepth));
}

std::string shapeOf(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t d = 0; d < t.dim(); ++d) s += (d ? ", " : "") + std::to_string(t.size(d));
  return s + "]";
}

Ref make(PyVal::Kind k) {
  auto v = std::make_shared<PyVal>();
  v->kind = k;
  return v;
}

// torch.save's storage classes, by the names the pickle uses.
c10::ScalarType storageDtype(const std::string& global) {
  static const std::map<std::string, c10::ScalarType> kTypes = {
      {"torch.FloatStorage", c10::kFloat},      {"torch.DoubleStorage", c10::kDouble},
      {"torch.HalfStorage", c10::kHalf},        {"torch.BFloat16Storage", c10::kBFloat16},
      {"torch.LongStorage", c10::kLong},        {"torch.IntStorage", c10::kInt},
      {"torch.ShortStorage", c10::kShort},      {"torch.CharStorage", c10::kChar},
      {"torch.ByteStorage", c10::kByte},        {"torch.BoolStorage", c10::kBool},
      {"torch.ComplexFloatStorage", c10::kComplexFloat}, {"torch.ComplexDoubleStorage", c10::kComplexDouble},
  };
  auto it = kTypes.find(global);
  if (it == kTypes.end()) throw Error("a storage of type " + shown(global) + ", which magpy does not read");
  return it->second;
}

// A pickle machine for the opcodes torch.save writes for a dict of tensors
// (protocols 2-5). Globals it may call are a fixed list; anything else is
// an Error, so a hostile file cannot run code or build other objects.
class Unpickler {
 public:
  Unpickler(const std::string& bytes, std::function<at::Tensor(const std::string&, c10::ScalarType, int64_t)> storage)
      : b_(bytes), storage_(std::move(storage)) {}

  Ref run() {
    while (true) {
      uint8_t op = byte();
      if (op == '.') break;
      step(op);
    }
    if (stack_.size() != 1) throw Error("the pickle ends with " + std::to_string(stack_.size()) + " values, not one");
    return stack_.back();
  }

 private:
  void step(uint8_t op) {
    switch (op) {
      case 0x80: byte(); return;                                          // PROTO
      case 0x95: take(8); return;                                         // FRAME
      case '}': push(make(PyVal::Kind::Dict)); return;                    // EMPTY_DICT
      case ']': push(make(PyVal::Kind::List)); return;                    // EMPTY_LIST
      case ')': push(make(PyVal::Kind::Tuple)); return;                   // EMPTY_TUPLE
      case '(': marks_.push_back(stack_.size()); return;                  // MARK
      case 'N': push(make(PyVal::Kind::None)); return;
      case 0x88: case 0x89: { Ref v = make(PyVal::Kind::Bool); v->i = op == 0x88; push(v); return; }
      case 'K': pushInt(byte()); return;                                  // BININT1
      case 'M': pushInt(uint16_t(byte() | byte() << 8)); return;          // BININT2
      case 'J': pushInt(int32_t(u32())); return;                          // BININT
      case 0x8a: pushLong(byte()); return;                                // LONG1
      case 'G': {                                                         // BINFLOAT (big-endian)
        uint64_t bits = 0;
        for (int k = 0; k < 8; ++k) bits = bits << 8 | byte();
        Ref v = make(PyVal::Kind::Float);
        std::memcpy(&v->f, &bits, 8);
        push(v);
        return;
      }
      case 'X': pushStr(take(u32())); return;                             // BINUNICODE
      case 0x8c: pushStr(take(byte())); return;                           // SHORT_BINUNICODE
      case 'c': {                                                         // GLOBAL
        std::string module = line(), name = line();
        Ref v = make(PyVal::Kind::Global);
        v->s = module + "." + name;
        push(v);
        return;
      }
      case 0x93: {                                                        // STACK_GLOBAL
        Ref name = pop(), module = pop();
        if (name->kind != PyVal::Kind::Str || module->kind != PyVal::Kind::Str) throw Error("a malformed global");
        Ref v = make(PyVal::Kind::Global);
        v->s = module->s + "." + name->s;
        push(v);
        return;
      }
      case 'q': memo(byte()); return;                                     // BINPUT
      case 'r': memo(u32()); return;                                      // LONG_BINPUT
      case 0x94: memo(memo_.size()); return;                              // MEMOIZE
      case 'h': recall(byte()); return;                                   // BINGET
      case 'j': recall(u32()); return;                                    // LONG_BINGET
      case 0x85: tuple(1); return;
      case 0x86: tuple(2); return;
      case 0x87: tuple(3); return;
      case 't': tuple(stack_.size() - popMark()); return;                 // TUPLE
      case 'Q': push(persistent(pop())); return;                          // BINPERSID
      case 'R': { Ref args = pop(); push(call(pop(), args)); return; }    // REDUCE
      case 'b': pop(); return;                                            // BUILD: an OrderedDict's _metadata, unused
      case 's': { Ref v = pop(), k = pop(); setItem(top(), k, v); return; }
      case 'u': {                                                         // SETITEMS
        size_t m = popMark();
        if ((stack_.size() - m) % 2) throw Error("SETITEMS with an odd number of values");
        Ref dict = at(m - 1);
        for (size_t k = m; k < stack_.size(); k += 2) setItem(dict, stack_[k], stack_[k + 1]);
        stack_.resize(m);
        return;
      }
      case 'a': { Ref v = pop(); append(top(), v); return; }
      case 'e': {                                                         // APPENDS
        size_t m = popMark();
        Ref list = at(m - 1);
        for (size_t k = m; k < stack_.size(); ++k) append(list, stack_[k]);
        stack_.resize(m);
        return;
      }
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        throw Error(std::string("pickle opcode ") + hex + " at byte " + std::to_string(pos_ - 1) +
                    ", which a state dict does not use");
      }
    }
  }

  // Calls of the globals a state dict may name.
  Ref call(const Ref& fn, const Ref& args) {
    if (fn->kind != PyVal::Kind::Global || args->kind != PyVal::Kind::Tuple) throw Error("a call of something not a global");
    const auto& a = args->items;
    if (fn->s == "collections.OrderedDict" && a.empty()) return make(PyVal::Kind::Dict);
    if (fn->s == "torch._utils._rebuild_tensor_v2" && a.size() >= 4) return tensor(a[0], a[1], a[2], a[3]);
    if (fn->s == "torch._utils._rebuild_parameter" && !a.empty() && a[0]->kind == PyVal::Kind::Tensor) return a[0];
    throw Error("a call of " + shown(fn->s) + ", which a state dict of tensors does not make");
  }

  // ('storage', storage class, key, location, numel)
  Ref persistent(const Ref& id) {
    const auto& a = id->items;
    if (id->kind != PyVal::Kind::Tuple || a.size() != 5 || a[0]->kind != PyVal::Kind::Str || a[0]->s != "storage" ||
        a[1]->kind != PyVal::Kind::Global || a[2]->kind != PyVal::Kind::Str || a[4]->kind != PyVal::Kind::Int)
      throw Error("a persistent id that is not a tensor storage");
    auto it = storages_.find(a[2]->s);
    if (it != storages_.end()) return it->second;
    Ref v = make(PyVal::Kind::Storage);
    v->tensor = storage_(a[2]->s, storageDtype(a[1]->s), a[4]->i);
    storages_[a[2]->s] = v;
    return v;
  }

  // A view of a storage, copied out after checking it lies inside it.
  Ref tensor(const Ref& storage, const Ref& offset, const Ref& size, const Ref& stride) {
    if (storage->kind != PyVal::Kind::Storage || offset->kind != PyVal::Kind::Int) throw Error("a malformed tensor");
    std::vector<int64_t> sizes = ints(size), strides = ints(stride);
    if (sizes.size() != strides.size()) throw Error("a tensor with " + std::to_string(sizes.size()) + " sizes and " +
                                                    std::to_string(strides.size()) + " strides");
    int64_t last = offset->i, numel = storage->tensor.numel();
    bool empty = false;
    for (size_t d = 0; d < sizes.size(); ++d) {
      if (sizes[d] < 0 || strides[d] < 0) throw Error("a tensor with a negative size or stride");
      empty = empty || sizes[d] == 0;
      if (sizes[d] > 0 && __builtin_add_overflow(last, (sizes[d] - 1) * strides[d], &last))
        throw Error("a tensor whose extent overflows");
    }
    if (offset->i < 0 || (!empty && last >= numel))
      throw Error("a tensor that reaches element " + std::to_string(last) + " of a storage of " + std::to_string(numel));
    Ref v = make(PyVal::Kind::Tensor);
    v->tensor = empty ? at::empty(sizes, storage->tensor.options())
                      : storage->tensor.as_strided(sizes, strides, offset->i).clone(at::MemoryFormat::Contiguous);
    return v;
  }

  static std::vector<int64_t> ints(const Ref& tuple) {
    if (tuple->kind != PyVal::Kind::Tuple) throw Error("tensor sizes that are not a tuple");
    std::vector<int64_t> out;
    for (auto& item : tuple->items) {
      if (item->kind != PyVal::Kind::Int) throw Error("a tensor size that is not an int");
      out.push_back(item->i);
    }
    return out;
  }

  static void setItem(const Ref& dict, const Ref& key, const Ref& value) {
    if (dict->kind != PyVal::Kind::Dict) throw Error("items stored into something not a dict");
    if (key->kind != PyVal::Kind::Str) throw Error("a dict key that is not a str");
    nest(*dict, *value);
    dict->keys.push_back(key->s);
    dict->items.push_back(value);
  }
  static void append(const Ref& list, const Ref& value) {
    if (list->kind != PyVal::Kind::List) throw Error("items appended to something not a list");
    nest(*list, *value);
    list->items.push_back(value);
  }

  void tuple(size_t n) {
    if (n > stack_.size()) throw Error("a tuple of more values than the stack holds");
    Ref v = make(PyVal::Kind::Tuple);
    v->items.assign(stack_.end() - long(n), stack_.end());
    for (auto& item : v->items) nest(*v, *item);
    stack_.resize(stack_.size() - n);
    push(v);
  }
  void pushInt(int64_t i) {
    Ref v = make(PyVal::Kind::Int);
    v->i = i;
    push(v);
  }
  void pushLong(size_t n) {
    if (n > 8) throw Error("an integer of " + std::to_string(n) + " bytes");
    std::string bytes = take(n);
    uint64_t u = 0;
    for (size_t k = 0; k < n; ++k) u |= uint64_t(uint8_t(bytes[k])) << (8 * k);
    if (n > 0 && n < 8 && (uint8_t(bytes[n - 1]) & 0x80)) u |= ~uint64_t(0) << (8 * n);  // sign-extend
    pushInt(int64_t(u));
  }
  void pushStr(std::string s) {
    Ref v = make(PyVal::Kind::Str);
    v->s = std::move(s);
    push(v);
  }
  void memo(size_t k) {
    if (k > (1u << 24)) throw Error("a memo index of " + std::to_string(k));
    if (memo_.size() <= k) memo_.resize(k + 1);
    memo_[k] = top();
  }
  void recall(size_t k) {
    if (k >= memo_.size() || !memo_[k]) throw Error("a memo index that was never set");
    push(memo_[k]);
  }

  void push(Ref v) {
    if (stack_.size() >= (1u << 22)) throw Error("a pickle deeper than a state dict");
    stack_.push_back(std::move(v));
  }
  Ref pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) throw Error("a pickle that pops an empty stack");
    Ref v = stack_.back();
    stack_.pop_back();
    return v;
  }
  Ref top() {
    if (stack_.empty()) throw Error("a pickle that reads an empty stack");
    return stack_.back();
  }
  Ref at(size_t k) {
    if (k >= stack_.size()) throw Error("a pickle that reads below its stack");
    return stack_[k];
  }
  size_t popMark() {
    if (marks_.empty()) throw Error("a pickle without the MARK it needs");
    size_t m = marks_.back();
    marks_.pop_back();
    return m;
  }

  uint8_t byte() {
    if (pos_ >= b_.size()) throw Error("the pickle ends early");
    return uint8_t(b_[pos_++]);
  }
  uint32_t u32() {
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) v |= uint32_t(byte()) << (8 * k);
    return v;
  }
  std::string take(size_t n) {
    if (n > b_.size() - pos_) throw Error("the pickle ends early");
    std::string s = b_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::string line() {
    size_t end = b_.find('\n', pos_);
    if (end == std::string::npos || end - pos_ > 256) throw Error("a malformed global name");
    std::string s = b_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return s;
  }

  const std::string& b_;
  size_t pos_ = 0;
  std::vector<Ref> stack_;
  std::vector<size_t> marks_;
  std::vector<Ref> memo_;
  std::map<std::string, Ref> storages_;
  std::function<at::Tensor(const std::string&, c10::ScalarType, int64_t)> storage_;
};

std::string recordBytes(caffe2::serialize::PyTorchStreamReader& zip, const std::string& name) {
  if (!zip.hasRecord(name)) throw Error("it has no record " + shown(name));
  auto [data, size] = zip.getRecord(name);
  return std::string(static_cast<const char*>(data.get()), size);
}

}  // namespace

StateDict loadStateDict(const std::string& path) {
  try {
    caffe2::serialize::PyTorchStreamReader zip(path);
    if (zip.hasRecord("byteorder") && recordBytes(zip, "byteorder") != "little")
      throw Error("its tensors are big-endian");
    std::string pickle = recordBytes(zip, "data.pkl");
    auto storage = [&](const std::string& key, c10::ScalarType dtype, int64_t numel) {
      std::string bytes = recordBytes(zip, "data/" + key);
      size_t element = c10::elementSize(dtype);
      if (numel < 0 || bytes.size() / element < size_t(numel))
        throw Error("storage " + shown(key) + " holds " + std::to_string(bytes.size()) + " bytes, not " + std::to_string(numel) +
                    " elements");
      at::Tensor flat = at::empty({numel}, at::TensorOptions().dtype(dtype));
      std::memcpy(flat.data_ptr(), bytes.data(), size_t(numel) * element);
      return flat;
    };
    Ref root = Unpickler(pickle, storage).run();
    if (root->kind != PyVal::Kind::Dict) throw Error("its object is not a dict (save model.state_dict())");
    StateDict out;
    for (size_t k = 0; k < root->keys.size(); ++k) {
      if (root->items[k]->kind != PyVal::Kind::Tensor) throw Error("its entry " + shown(root->keys[k]) + " is not a tensor");
      out.entries.push_back({root->keys[k], root->items[k]->tensor});
    }
    return out;
  } catch (const Error& e) {
    throw Error(path + ": not a state dict magpy can read: " + e.what());
  } catch (const c10::Error& e) {
    std::string what = e.what_without_backtrace();
    throw Error(path + ": not a torch.save file (" + what.substr(0, what.find('\n')) + ")");
  }
}

namespace {

Value* attrOrItem(Value& owner, const std::string& name, std::initializer_list<const char*> holders) {
  if (owner.kind != Value::Kind::Object) return nullptr;
  if (Value* v = owner.heap->attr(name)) return v;
  for (const char* holder : holders) {
    Value* dict = owner.heap->attr(holder);
    if (dict && dict->kind == Value::Kind::Dict)
      if (Value* v = dict->heap->item(record::Atom::string(name))) return v;
  }
  return nullptr;
}

// The tensor the record holds for state-dict key `key`, or null.
Value* stateTensor(Value& self, const std::string& key) {
  Value* cur = &self;
  size_t start = 0;
  for (size_t dot = key.find('.'); cur && dot != std::string::npos; start = dot + 1, dot = key.find('.', start))
    cur = attrOrItem(*cur, key.substr(start, dot - start), {record::kModuleSubmodules});
  Value* t = cur ? attrOrItem(*cur, key.substr(start), {record::kModuleParameters, record::kModuleBuffers}) : nullptr;
  return t && t->kind == Value::Kind::Tensor ? t : nullptr;
}

// Every module under self (an Object reached by attributes and _modules)
// with its state-dict prefix, each once.
void eachModule(Value& v, const std::string& prefix, std::set<const HeapObject*>& seen,
                const std::function<void(Value&, const std::string&)>& visit) {
  if (v.kind != Value::Kind::Object || !seen.insert(v.heap.get()).second) return;
  visit(v, prefix);
  for (size_t k = 0; k < v.heap->names.size(); ++k) {
    const std::string& name = v.heap->names[k];
    Value& child = v.heap->items[k];
    if (name == record::kModuleSubmodules && child.kind == Value::Kind::Dict) {
      for (size_t m = 0; m < child.heap->keys.size(); ++m)
        eachModule(child.heap->items[m], prefix + child.heap->keys[m].s + ".", seen, visit);
    } else if (name.empty() || name[0] != '_') {
      eachModule(child, prefix + name + ".", seen, visit);
    }
  }
}

}  // namespace

StateLoadReport loadStateInto(Value& self, const StateDict& dict, bool partial) {
  StateLoadReport report;
  std::set<std::string> given;
  at::NoGradGuard noGrad;
  for (auto& [key, loaded] : dict.entries) {
    given.insert(key);
    Value* target = stateTensor(self, key);
    if (!target) {
      if (partial) {
        report.ignored.push_back(key);
        continue;
      }
      throw Error("state key " + shown(key) + " is not part of the record's state (the captured code never read it, or "
                  "the file is another model's); --state-partial ignores such keys");
    }
    at::Tensor& t = target->tensor;
    if (t.scalar_type() != loaded.scalar_type() || !t.sizes().equals(loaded.sizes()))
      throw Error("state key " + shown(key) + " is " + dtypeName(loaded.scalar_type()) + shapeOf(loaded) +
                  " in the file, but the record was captured with " + dtypeName(t.scalar_type()) + shapeOf(t) +
                  ": its guards would refuse it; capture again with this model");
    t.copy_(loaded);
    report.loaded++;
  }
  std::set<const HeapObject*> seen;
  auto missing = [&](const std::string& key, const Value& v) {
    if (v.kind != Value::Kind::Tensor || !v.tensor.requires_grad() || !given.insert(key).second) return;
    if (!partial)
      throw Error("state key " + shown(key) + " (a parameter of the record's model) is missing from the file; "
                  "--state-partial keeps the captured value");
    report.kept.push_back(key);
  };
  eachModule(self, "", seen, [&](Value& module, const std::string& prefix) {
    for (size_t k = 0; k < module.heap->names.size(); ++k) missing(prefix + module.heap->names[k], module.heap->items[k]);
    Value* params = module.heap->attr(record::kModuleParameters);
    if (params && params->kind == Value::Kind::Dict)
      for (size_t k = 0; k < params->heap->keys.size(); ++k) missing(prefix + params->heap->keys[k].s, params->heap->items[k]);
  });
  return report;
}

size_t setEvalMode(Value& self) {
  size_t set = 0;
  std::set<const HeapObject*> seen;
  eachModule(self, "", seen, [&](Value& module, const std::string&) {
    Value* training = module.heap->attr("training");
    if (training && training->kind == Value::Kind::Atom && training->atom.kind == record::Atom::Kind::Bool) {
      *training = Value::ofAtom(record::Atom::boolean(false));
      set++;
    }
  });
  return set;
}

}  // namespace magpy::replay

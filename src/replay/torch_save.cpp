#include "replay/torch_save.h"

#include <ATen/ops/empty.h>
#include <caffe2/serialize/inline_container.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <unordered_map>

#include "magpy/support/error.h"
#include "magpy/support/strings.h"

namespace magpy::replay {
namespace {

// A pickle holds no more values than this on its stack or in its memo,
// whatever its size: plain data from torch.save needs far fewer.
constexpr size_t kMaxStack = size_t(1) << 20;
constexpr size_t kMaxMemo = size_t(1) << 20;
constexpr size_t kMaxPickleBytes = size_t(64) << 20;

// What the unpickler builds: the few Python values such files hold.
struct PyVal {
  enum class Kind : uint8_t { None, Bool, Int, Float, Str, Tuple, List, Dict, Global, Tensor, Storage };
  Kind kind = Kind::None;
  int64_t i = 0;
  double f = 0;
  std::string s;                              // Str; Global "module.name"
  std::vector<std::shared_ptr<PyVal>> items;  // Tuple, List items; Dict values
  std::vector<record::Atom> keys;             // Dict keys
  at::Tensor tensor;                          // Tensor; Storage (flat, its elements)
  int depth = 0;                              // containers nest at most kMaxTorchSaveDepth
  bool sealed = false;                        // stored in a container: it changes no more
};
using Ref = std::shared_ptr<PyVal>;

// `child` goes into `container`, which must still be open; the child is
// sealed from then on, so the container's depth stays true (no walk or
// destructor over a hostile file's values can exhaust the stack) and no
// container comes to hold itself.
void nest(PyVal& container, PyVal& child) {
  if (container.sealed) throw Error("a container changed after it was stored in another");
  // Sealing stops every cycle but one into itself (list.append(list)),
  // which reference counting would never free.
  if (&container == &child) throw Error("a container stored into itself");
  child.sealed = true;
  container.depth = std::max(container.depth, child.depth + 1);
  if (container.depth > kMaxTorchSaveDepth)
    throw Error("values nested deeper than " + std::to_string(kMaxTorchSaveDepth));
}

Ref make(PyVal::Kind k) {
  auto v = std::make_shared<PyVal>();
  v->kind = k;
  return v;
}

// A dict key: an atom (str, int, bool, None, float, or a tuple of them).
record::Atom keyOf(const PyVal& k) {
  switch (k.kind) {
    case PyVal::Kind::Str: return record::Atom::string(k.s);
    case PyVal::Kind::Int: return record::Atom::integer(k.i);
    case PyVal::Kind::Bool: return record::Atom::boolean(k.i != 0);
    case PyVal::Kind::None: return record::Atom::none();
    case PyVal::Kind::Float: return record::Atom::floating(k.f);
    case PyVal::Kind::Tuple: {
      std::vector<record::Atom> items;
      for (auto& item : k.items) items.push_back(keyOf(*item));
      return record::Atom::tuple(std::move(items));
    }
    default: throw Error("a dict key that is not a str, number, None or a tuple of them");
  }
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
  if (it == kTypes.end()) throw Error("a storage of type " + quote(global, true) + ", which magpy does not read");
  return it->second;
}

using StorageReader = std::function<at::Tensor(const std::string& key, c10::ScalarType, int64_t numel)>;

// A pickle machine for the opcodes torch.save (and libtorch's pickle_save)
// write for plain values (protocols 2-5). Globals it may call are a fixed
// list; anything else is an Error, so a hostile file cannot run code or
// build other objects.
class Unpickler {
 public:
  Unpickler(const std::string& bytes, StorageReader storage) : b_(bytes), storage_(std::move(storage)) {}

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
      case 'b': build(pop()); return;                                     // BUILD
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
                    ", which torch.save does not write for tensors and plain values");
      }
    }
  }

  // Calls of the globals such a file may name.
  Ref call(const Ref& fn, const Ref& args) {
    if (fn->kind != PyVal::Kind::Global || args->kind != PyVal::Kind::Tuple) throw Error("a call of something not a global");
    const auto& a = args->items;
    const std::string& f = fn->s;
    if (f == "collections.OrderedDict" && a.empty()) return make(PyVal::Kind::Dict);
    if (f == "torch._utils._rebuild_tensor_v2" && a.size() >= 4) {
      Ref t = tensor(a[0], a[1], a[2], a[3]);
      if (a.size() >= 5) requiresGrad(t, a[4]);
      return t;
    }
    if (f == "torch._utils._rebuild_parameter" && a.size() >= 2 && a[0]->kind == PyVal::Kind::Tensor) {
      requiresGrad(a[0], a[1]);
      return a[0];
    }
    // libtorch's pickle_save: typed lists and type tags, each the value itself.
    if ((f == "torch.jit._pickle.build_intlist" || f == "torch.jit._pickle.build_doublelist" ||
         f == "torch.jit._pickle.build_boollist" || f == "torch.jit._pickle.build_tensorlist" ||
         f == "torch.jit._pickle.build_genericlist") &&
        a.size() == 1 && a[0]->kind == PyVal::Kind::List)
      return a[0];
    if (f == "torch.jit._pickle.restore_type_tag" && a.size() == 2) return a[0];
    throw Error("a call of " + quote(f, true) + ", which torch.save does not make for tensors and plain values");
  }

  static void requiresGrad(const Ref& t, const Ref& flag) {
    if (flag->kind != PyVal::Kind::Bool) throw Error("a tensor's requires_grad that is not a bool");
    if (flag->i && !c10::isFloatingType(t->tensor.scalar_type()) && !c10::isComplexType(t->tensor.scalar_type()))
      throw Error("a tensor of a dtype that cannot require grad marked as requiring it");
    t->tensor.set_requires_grad(flag->i != 0);
  }

  // BUILD sets an object's state: torch.save writes it for an OrderedDict's
  // _metadata (unused here); tensors and containers take none.
  void build(const Ref& state) {
    Ref target = top();
    if (target->kind != PyVal::Kind::Dict || (state->kind != PyVal::Kind::Dict && state->kind != PyVal::Kind::None &&
                                              state->kind != PyVal::Kind::Tuple))
      throw Error("a BUILD of something torch.save does not write");
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

  // A view of a storage, checked to lie inside it (views of one storage
  // share it, as they did in Python).
  Ref tensor(const Ref& storage, const Ref& offset, const Ref& size, const Ref& stride) {
    if (storage->kind != PyVal::Kind::Storage || offset->kind != PyVal::Kind::Int) throw Error("a malformed tensor");
    std::vector<int64_t> sizes = ints(size), strides = ints(stride);
    if (sizes.size() != strides.size()) throw Error("a tensor with " + std::to_string(sizes.size()) + " sizes and " +
                                                    std::to_string(strides.size()) + " strides");
    int64_t last = offset->i, numel = storage->tensor.numel();
    bool empty = false;
    for (size_t d = 0; d < sizes.size(); ++d) {
      int64_t reach = 0;
      if (sizes[d] < 0 || strides[d] < 0) throw Error("a tensor with a negative size or stride");
      empty = empty || sizes[d] == 0;
      if (sizes[d] > 0 && (__builtin_mul_overflow(sizes[d] - 1, strides[d], &reach) ||
                           __builtin_add_overflow(last, reach, &last)))
        throw Error("a tensor whose extent overflows");
    }
    if (offset->i < 0 || (!empty && last >= numel))
      throw Error("a tensor that reaches element " + std::to_string(last) + " of a storage of " + std::to_string(numel));
    Ref v = make(PyVal::Kind::Tensor);
    v->tensor = empty ? at::empty(sizes, storage->tensor.options()) : storage->tensor.as_strided(sizes, strides, offset->i);
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
    record::Atom k = keyOf(*key);
    nest(*dict, *value);
    dict->keys.push_back(std::move(k));
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
    if (k >= kMaxMemo) throw Error("a memo index of " + std::to_string(k));
    if (memo_.size() <= k) memo_.resize(k + 1);
    memo_[k] = top();
  }
  void recall(size_t k) {
    if (k >= memo_.size() || !memo_[k]) throw Error("a memo index that was never set");
    push(memo_[k]);
  }

  void push(Ref v) {
    if (stack_.size() >= kMaxStack) throw Error("a pickle with more than " + std::to_string(kMaxStack) + " values at once");
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
  StorageReader storage_;
};

// The unpickled value as a replay Value; a value the pickle reuses becomes
// one shared Value (depth is bounded, so the recursion is).
class Converter {
 public:
  Value convert(const Ref& v) {
    auto it = done_.find(v.get());
    if (it != done_.end()) return it->second;
    Value out = make(*v);
    done_.emplace(v.get(), out);
    return out;
  }

 private:
  Value make(const PyVal& v) {
    switch (v.kind) {
      case PyVal::Kind::None: return Value::ofAtom(record::Atom::none());
      case PyVal::Kind::Bool: return Value::ofAtom(record::Atom::boolean(v.i != 0));
      case PyVal::Kind::Int: return Value::ofAtom(record::Atom::integer(v.i));
      case PyVal::Kind::Float: return Value::ofAtom(record::Atom::floating(v.f));
      case PyVal::Kind::Str: return Value::ofAtom(record::Atom::string(v.s));
      case PyVal::Kind::Tensor: return Value::ofTensor(v.tensor);
      case PyVal::Kind::Tuple:
      case PyVal::Kind::List: {
        std::vector<Value> items;
        for (auto& item : v.items) items.push_back(convert(item));
        return v.kind == PyVal::Kind::Tuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
      }
      case PyVal::Kind::Dict: {
        std::vector<Value> items;
        for (auto& item : v.items) items.push_back(convert(item));
        return Value::dict(v.keys, std::move(items));
      }
      case PyVal::Kind::Global: throw Error("a bare global " + quote(v.s, true) + " among the values");
      case PyVal::Kind::Storage: throw Error("a bare storage among the values");
    }
    throw Error("an unknown value");
  }

  std::unordered_map<const PyVal*, Value> done_;
};

// A zip member's bytes as they lie in the file (torch.save stores members
// uncompressed), at most `limit` of them; a member that claims more than
// the file holds is refused before anything is allocated.
class MemberReader {
 public:
  explicit MemberReader(const std::string& path) : zip_(path), in_(path, std::ios::binary) {
    if (!in_) throw Error("cannot open it");
    size_ = std::filesystem::file_size(path);
  }
  caffe2::serialize::PyTorchStreamReader& zip() { return zip_; }

  std::string read(const std::string& name, size_t bytes, bool upTo) {
    if (!zip_.hasRecord(name)) throw Error("it has no record " + quote(name, true));
    size_t offset = zip_.getRecordOffset(name);
    if (offset > size_) throw Error("its record " + quote(name, true) + " starts past its end");
    if (upTo) bytes = std::min(bytes, size_ - offset);
    if (bytes > size_ - offset)
      throw Error("its record " + quote(name, true) + " claims " + std::to_string(bytes) + " bytes, but the file holds " +
                  std::to_string(size_ - offset) + " from there");
    std::string out(bytes, '\0');
    in_.seekg(std::streamoff(offset));
    if (!in_.read(out.data(), std::streamsize(bytes))) throw Error("cannot read its record " + quote(name, true));
    return out;
  }

 private:
  caffe2::serialize::PyTorchStreamReader zip_;
  std::ifstream in_;
  uintmax_t size_ = 0;
};

}  // namespace

Value readTorchSave(const std::string& path, const std::string& what) {
  std::error_code missing;
  if (!std::filesystem::is_regular_file(path, missing)) throw Error(path + ": cannot open " + what + " (does it exist?)");
  try {
    MemberReader file(path);
    if (file.zip().hasRecord("byteorder") && file.read("byteorder", 6, true).rfind("little", 0) != 0)
      throw Error("its tensors are big-endian");
    // The pickle ends at its STOP opcode: what follows it is not read.
    std::string pickle = file.read("data.pkl", kMaxPickleBytes, true);
    auto storage = [&](const std::string& key, c10::ScalarType dtype, int64_t numel) {
      size_t element = c10::elementSize(dtype), bytes = 0;
      if (numel < 0 || __builtin_mul_overflow(size_t(numel), element, &bytes))
        throw Error("storage " + quote(key, true) + " of " + std::to_string(numel) + " elements");
      std::string data = file.read("data/" + key, bytes, false);
      at::Tensor flat = at::empty({numel}, at::TensorOptions().dtype(dtype));
      if (bytes) std::memcpy(flat.data_ptr(), data.data(), bytes);
      return flat;
    };
    Ref root = Unpickler(pickle, storage).run();
    return Converter().convert(root);
  } catch (const Error& e) {
    throw Error(path + ": " + what + " cannot be read: " + e.what() +
                " (write it with torch.save as tensors, numbers, strings, None, and tuples, lists or dicts of them)");
  } catch (const c10::Error& e) {
    std::string text = e.what_without_backtrace();
    throw Error(path + ": " + what + " is not a torch.save file (" + text.substr(0, text.find('\n')) + ")");
  } catch (const std::filesystem::filesystem_error& e) {
    throw Error(path + ": " + what + " cannot be read (" + e.code().message() + ")");
  }
}

}  // namespace magpy::replay

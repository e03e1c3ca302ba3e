#include "magpy/replay/state_dict.h"

#include <ATen/ops/empty.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include "magpy/record/path.h"
#include "magpy/replay/tensors.h"
#include "magpy/replay/value_files.h"
#include "magpy/support/error.h"
#include "magpy/support/strings.h"
#include "replay/torch_save.h"

namespace magpy::replay {
namespace {

std::string shapeOf(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t d = 0; d < t.dim(); ++d) s += (d ? ", " : "") + std::to_string(t.size(d));
  return s + "]";
}

}  // namespace

StateDict loadStateDict(const std::string& path) {
  Value root = readTorchSave(path, "the state file");
  if (root.kind != Value::Kind::Dict) throw Error(path + ": its object is not a dict (save model.state_dict())");
  StateDict out;
  for (size_t k = 0; k < root.heap->keys.size(); ++k) {
    const record::Atom& key = root.heap->keys[k];
    const Value& v = root.heap->items[k];
    if (key.kind != record::Atom::Kind::Str) throw Error(path + ": its key " + record::toString(key) + " is not a str");
    if (v.kind != Value::Kind::Tensor) throw Error(path + ": its entry " + quote(key.s, true) + " is not a tensor");
    out.entries.push_back({key.s, v.tensor});
  }
  return out;
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
      throw Error("state key " + quote(key, true) + " is not part of the record's state (the captured code never read it, or "
                  "the file is another model's); --state-partial ignores such keys");
    }
    at::Tensor& t = target->tensor;
    if (t.scalar_type() != loaded.scalar_type() || !t.sizes().equals(loaded.sizes()))
      throw Error("state key " + quote(key, true) + " is " + dtypeName(loaded.scalar_type()) + shapeOf(loaded) +
                  " in the file, but the record was captured with " + dtypeName(t.scalar_type()) + shapeOf(t) +
                  ": its guards would refuse it; capture again with this model");
    t.copy_(loaded);
    report.loaded++;
  }
  std::set<const HeapObject*> seen;
  auto missing = [&](const std::string& key, const Value& v) {
    if (v.kind != Value::Kind::Tensor || !v.tensor.requires_grad() || !given.insert(key).second) return;
    if (!partial)
      throw Error("state key " + quote(key, true) + " (a parameter of the record's model) is missing from the file; "
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

bool isModule(const Value& v) {
  if (v.kind != Value::Kind::Object) return false;
  for (const char* name : {record::kModuleSubmodules, record::kModuleParameters, record::kModuleBuffers, "training",
                           "_forward_hooks", "_forward_pre_hooks", "_backward_hooks"})
    if (v.heap->attr(name)) return true;
  return false;
}

StateDict stateDictOf(Value& module) {
  StateDict out;
  std::set<std::string> keys;
  auto add = [&](const std::string& key, const Value& v) {
    if (v.kind == Value::Kind::Tensor && keys.insert(key).second) out.entries.push_back({key, v.tensor.detach()});
  };
  std::set<const HeapObject*> seen;
  eachModule(module, "", seen, [&](Value& m, const std::string& prefix) {
    for (size_t k = 0; k < m.heap->names.size(); ++k) {
      const std::string& name = m.heap->names[k];
      Value& v = m.heap->items[k];
      if (!name.empty() && name[0] != '_') add(prefix + name, v);
      bool holds = name == record::kModuleParameters || name == record::kModuleBuffers;
      if (holds && v.kind == Value::Kind::Dict)
        for (size_t e = 0; e < v.heap->keys.size(); ++e) add(prefix + v.heap->keys[e].s, v.heap->items[e]);
    }
  });
  return out;
}

void saveStateDict(const std::string& path, const StateDict& dict) {
  std::vector<record::Atom> keys;
  std::vector<Value> tensors;
  for (auto& [key, t] : dict.entries) {
    keys.push_back(record::Atom::string(key));
    tensors.push_back(Value::ofTensor(t));
  }
  saveValueFile(path, Value::dict(std::move(keys), std::move(tensors)));
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

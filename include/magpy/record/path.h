// AccessPath: how to reach a value from the state a compiled function sees
// when it is called. Paths replace object identity in guards and mocks, so
// they mean the same thing in another process and without Python.
//
//   path  := root step*
//   root  := "self"                      the object given to magpy.compile
//          | "args[" int "]"             positional argument of the call
//          | "kwargs[" str "]"           keyword argument of the call
//          | "args" | "kwargs"           all of them (a tuple, a dict): the call's shape
//          | "G[" str "]"                global of the compiled function's module
//          | "G(" module ")[" str "]"    global of another module
//          | "runtime." name             interpreter state: grad_enabled, default_dtype,
//                                        deterministic_algorithms, inference_mode,
//                                        num_threads, anomaly_mode, autocast, autocast_cpu,
//                                        autocast_dtype, autocast_cpu_dtype,
//                                        dist_world_size, dist_backend (the process group's),
//                                        torch_modes (torch function and dispatch modes
//                                        entered: Python that runs inside torch calls)
//   step  := "." name                   attribute (".__referent__" of a weakref.ref: the
//                                        object it refers to, None once it died)
//          | "[" int "]"                 sequence position
//          | "[" key "]"                 dict key: 'str', #int, or a tuple such as ('disp', 0)
//          | "[@" path "]"               dict key that is an object: the one at path in the
//                                        same call's state (a tensor, whose hash is its
//                                        identity: torch.optim's state[param])
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "magpy/record/value.h"

namespace magpy::record {

struct AccessPath;

struct PathStep {
  enum class Kind : uint8_t { Attr, Index, Key, ObjectKey };
  Kind kind = Kind::Attr;
  std::string name;   // Attr
  int64_t index = 0;  // Index
  Atom key;           // Key
  std::vector<AccessPath> keyOf;  // ObjectKey: one path, to the object that is the key

  static PathStep attr(std::string n);
  static PathStep at(int64_t i);
  static PathStep keyed(Atom k);
  static PathStep keyedBy(AccessPath keyPath);

  bool operator==(const PathStep& o) const;
  bool operator<(const PathStep& o) const { return compare(o) < 0; }
  int compare(const PathStep& o) const;  // <0, 0, >0 in that order
};

struct AccessPath {
  enum class Root : uint8_t { Self, Arg, Kwarg, Global, Runtime };
  Root root = Root::Self;
  int64_t index = 0;   // Arg
  std::string name;    // Kwarg name, Global module ("" = the compiled function's), Runtime name
  std::vector<PathStep> steps;

  static AccessPath self() { return {}; }
  static AccessPath arg(int64_t i) { AccessPath p; p.root = Root::Arg; p.index = i; return p; }
  static AccessPath kwarg(std::string n) { AccessPath p; p.root = Root::Kwarg; p.name = std::move(n); return p; }
  // The whole tuple of positional / dict of keyword arguments.
  static AccessPath allArgs() { return arg(-1); }
  static AccessPath allKwargs() { return kwarg(""); }
  static AccessPath global(std::string module, std::string key);
  static AccessPath runtime(std::string n) { AccessPath p; p.root = Root::Runtime; p.name = std::move(n); return p; }

  AccessPath attr(std::string n) const;
  AccessPath item(int64_t i) const;
  AccessPath key(Atom k) const;
  AccessPath key(std::string k) const { return key(Atom::string(std::move(k))); }
  AccessPath keyedBy(AccessPath keyPath) const;  // [@keyPath]

  bool isPrefixOf(const AccessPath& other) const;
  bool operator==(const AccessPath& o) const {
    return root == o.root && index == o.index && name == o.name && steps == o.steps;
  }
  bool operator!=(const AccessPath& o) const { return !(*this == o); }
  bool operator<(const AccessPath& o) const { return compare(o) < 0; }
  int compare(const AccessPath& o) const;  // <0, 0, >0 in that order
};

inline PathStep PathStep::attr(std::string n) { PathStep s; s.name = std::move(n); return s; }
inline PathStep PathStep::at(int64_t i) { PathStep s; s.kind = Kind::Index; s.index = i; return s; }
inline PathStep PathStep::keyed(Atom k) { PathStep s; s.kind = Kind::Key; s.key = std::move(k); return s; }

std::string toString(const AccessPath& p);

// Whether name is interpreter state a "runtime." path may name.
bool isRuntimeState(const std::string& name);

// Whether steps k and k+1 are `.__dict__['name']`: the instance attribute
// `name`, as guards name one that must not shadow its class's method.
bool isInstanceDictKey(const AccessPath& p, size_t k);
// The path with each `.__dict__['name']` written as `.name`: for state
// that, like replay's, holds only instance attributes.
AccessPath withInstanceAttributes(AccessPath p);
// torch.nn.Module keeps parameters, buffers and submodules in three dicts
// of the instance, where Module.__getattr__ finds them: the path
// `self.fc._parameters['weight']` reads what `self.fc.weight` reads.
inline constexpr const char* kModuleParameters = "_parameters";
inline constexpr const char* kModuleBuffers = "_buffers";
inline constexpr const char* kModuleSubmodules = "_modules";
inline constexpr const char* kModuleDicts[] = {kModuleParameters, kModuleBuffers, kModuleSubmodules};
bool isModuleDict(const std::string& attr);  // one of kModuleDicts
// What `ref()` returns for a weakref.ref `ref`, named as an attribute:
// schedulers wrap opt.step in a function that dereferences one.
inline constexpr const char* kWeakReferent = "__referent__";

// Inverse of toString; throws Error naming the offending character.
AccessPath parsePath(const std::string& text);

}  // namespace magpy::record

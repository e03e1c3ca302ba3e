// Model weights from Python's torch.save(model.state_dict(), path), read
// without Python and put into a compiled module's native state: how a
// record captured during training serves the weights training produced.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "magpy/replay/value.h"

namespace magpy::replay {

// Keys in the file's order ("fc.weight", "bn.running_mean") and tensors.
struct StateDict {
  std::vector<std::pair<std::string, at::Tensor>> entries;
};

// Reads a torch.save file (the zip format, pickle protocol 2 to 5) whose
// object is a dict or OrderedDict of str -> tensor. Only that subset of
// pickle is accepted (no code runs; the file may come from anyone): an
// Error names the file and what in it is not a state dict.
StateDict loadStateDict(const std::string& path);

struct StateLoadReport {
  size_t loaded = 0;
  std::vector<std::string> ignored;  // file keys the record does not hold (partial only)
  std::vector<std::string> kept;     // parameters the file lacks, kept as recorded (partial only)
};

// Copies each entry into the tensor the record holds for it (`fc.weight`
// is self.fc.weight, reached as an attribute or through _modules,
// _parameters and _buffers), keeping that tensor's identity and strides.
// A dtype or shape other than the record's is an Error (the record's
// guards would refuse it). Unless `partial`, a key the record does not
// hold and a parameter (a tensor that requires grad) the file lacks are
// Errors too.
StateLoadReport loadStateInto(Value& self, const StateDict& dict, bool partial);

// The state dict of `module` as native state holds it, as Python's
// model.state_dict() names it ("fc.weight"): each tensor attribute and
// each entry of _parameters and _buffers of the module and the modules
// under it, once, in the order the state holds them. The record holds
// what its calls read: tensors no record read are not there.
StateDict stateDictOf(Value& module);

// Whether a native value is an nn.Module (an object with a module's
// dicts, hook dicts or training flag, as calling one reads them).
bool isModule(const Value& v);

// Writes a state dict that Python's torch.load gives back as a dict of
// str -> tensor (model.load_state_dict takes it), through a temporary
// file and a rename.
void saveStateDict(const std::string& path, const StateDict& dict);

// Sets every module's `training` flag under self to False, as
// model.eval() does; returns how many it set.
size_t setEvalMode(Value& self);

}  // namespace magpy::replay

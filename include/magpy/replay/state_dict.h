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

// Sets every module's `training` flag under self to False, as
// model.eval() does; returns how many it set.
size_t setEvalMode(Value& self);

}  // namespace magpy::replay

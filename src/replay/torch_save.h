// The one reader of torch.save files (the zip format, pickle protocols 2
// to 5) for every tensor file magpy-run takes: --inputs and --state. The
// file may come from anyone, so it is data, never code: the pickle runs
// on a machine that knows only the opcodes torch.save writes for plain
// values and a fixed list of globals (tensor rebuilding, OrderedDict, the
// list builders TorchScript's pickler writes); anything else is an Error.
//
// Bounds, each an Error when exceeded, none depending on trusting a size
// the file states:
//   - values nest at most kMaxDepth deep; a container is sealed once it is
//     stored in another (pickles build children first), so the depth
//     counted at insertion is the real one;
//   - storages are read from the file's own bytes at their zip offset: a
//     storage claiming more bytes than the file holds is refused before
//     any allocation, and nothing is inflated;
//   - tensors are views of their storage checked to lie inside it; views
//     of one storage share it, and an object the pickle reuses (memo) is
//     one shared value, so sharing costs nothing and aliasing is kept.
#pragma once

#include <string>

#include "magpy/replay/value.h"

namespace magpy::replay {

constexpr int kMaxTorchSaveDepth = 64;

// The file's object: tensors, None, bools, ints, floats, strs, and tuples,
// lists and dicts of them (dict keys: atoms). `what` names the file's role
// in messages ("the input file"). Throws Error naming the file.
Value readTorchSave(const std::string& path, const std::string& what);

}  // namespace magpy::replay

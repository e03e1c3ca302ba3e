// Values in torch.save files (the zip format Python writes by default):
// magpy-run reads call inputs from them and writes results to them, so
// Python can torch.load what native replay produced.
#pragma once

#include <string>

#include "magpy/replay/value.h"

namespace magpy::replay {

// Tensors, numbers, strings, None, and tuples/lists/dicts (atom keys) of
// them, read by the restricted reader every tensor file goes through
// (replay/torch_save.h: no code runs, sizes bounded, sharing kept).
// Throws Error naming the file and what it could not read.
Value loadValueFile(const std::string& path);

// Writes through a temporary file and a rename. Throws Error for values
// torch.load could not represent (objects).
void saveValueFile(const std::string& path, const Value& value);

}  // namespace magpy::replay

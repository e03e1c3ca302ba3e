// Dynamic records (MagPy sections 6.1 and 6.2.1): when a function gathers
// two records that differ only in the sizes of tensor arguments, the sizes
// are over-specialized. generalize() makes one record of the two whose
// differing sizes are symbols (s0, s1, ...):
//
//   - guards: an argument tensor's differing dimension becomes a symbol;
//     dimensions that change together (same sizes in both records) share
//     one, so their equality stays checked; such tensors must be
//     contiguous in both records (their strides then follow from sizes);
//   - graph: the two graphs must be the same operators with the same
//     arguments (sizes the program computed with are number nodes, so
//     their arguments agree); a result size that changes is taken from
//     the operator's size list, a tensor argument's dimension or an int it
//     takes, else from an int the graph computed with both values, else it
//     must be scale * s + offset of one symbol (each checked again on every
//     replayed call: a size that follows another rule makes the call miss,
//     never a stale result);
//   - everything else (other guards, the mock) must be equal.
//
// Whether the program's Python code used a size in a way the graph does not
// repeat (an index, range(n)) is not visible in a record: the caller
// refuses runs that did. Sizes 0
// and 1 stay specialized (every symbol is at least 2).
#pragma once

#include <optional>
#include <string>

#include "magpy/record/record.h"

namespace magpy::record {

struct Generalized {
  std::optional<Record> record;  // the dynamic record, serving `later` (and `earlier` where covers says so)
  bool coversEarlier = false;    // every size of `earlier` satisfies the dynamic record
  std::string why;               // without a record: why the two records cannot become one
};

// `earlier` may itself be dynamic; `later` is a record just captured.
Generalized generalize(const Record& earlier, const Record& later);

}  // namespace magpy::record

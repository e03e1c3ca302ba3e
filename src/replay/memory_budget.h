// The memory budget of a replayed call: a record is data from a possibly
// untrusted source, and `aten::ones([1 << 40])` is one node. While a
// MemoryBudget::Scope is alive, CPU tensor memory allocated beyond `bytes`
// more than was live when the scope began fails with a magpy::Error
// instead of exhausting the machine.
//
// It works by wrapping libtorch's CPU allocator (once per process, the
// first time a scope is made): each allocation's size is kept in a table
// beside the heap, keyed by its address, never next to tensor data. The
// count is process-wide, so concurrent calls share one budget.
#pragma once

#include <cstdint>

namespace magpy::replay {

class MemoryBudgetScope {
 public:
  explicit MemoryBudgetScope(uint64_t bytes);  // 0: no limit
  ~MemoryBudgetScope();
  MemoryBudgetScope(const MemoryBudgetScope&) = delete;
  MemoryBudgetScope& operator=(const MemoryBudgetScope&) = delete;

 private:
  uint64_t previousLimit_;
};

}  // namespace magpy::replay

#include <gtest/gtest.h>

#include <ATen/ops/empty.h>

#include "magpy/support/error.h"
#include "replay/memory_budget.h"

using magpy::replay::MemoryBudgetScope;

TEST(MemoryBudget, RefusesAllocationsBeyondItAndCountsFreedMemoryBack) {
  MemoryBudgetScope budget(1 << 20);
  at::Tensor half = at::empty({1 << 17});  // 512 KiB of float32
  EXPECT_THROW(at::empty({1 << 18}), magpy::Error);
  half.reset();
  EXPECT_NO_THROW(at::empty({(1 << 18) - 1024}));
}

TEST(MemoryBudget, NoLimitOutsideAScope) {
  { MemoryBudgetScope budget(1024); }
  EXPECT_NO_THROW(at::empty({1 << 20}));
}

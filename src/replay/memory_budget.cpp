#include "replay/memory_budget.h"

#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "magpy/support/error.h"

namespace magpy::replay {
namespace {

std::atomic<uint64_t> gLive{0};
std::atomic<uint64_t> gLimit{0};  // live bytes allowed; 0 = no limit

// What freeing a block needs, kept apart from the block: a tensor overrun
// (a record may ask a kernel to write out of bounds) then cannot reach it,
// as it would a header in front of the data.
struct Block {
  uint64_t bytes;
  void* baseContext;
  c10::DeleterFnPtr baseDeleter;
};

class BlockTable {
 public:
  void add(void* data, const Block& b) {
    std::lock_guard<std::mutex> lock(mutex_);
    blocks_.emplace(data, b);
  }
  std::optional<Block> take(void* data) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.find(data);
    if (it == blocks_.end()) return std::nullopt;
    Block b = it->second;
    blocks_.erase(it);
    return b;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<void*, Block> blocks_;
};

BlockTable& blocks() {
  static auto* table = new BlockTable;  // never destroyed: tensors may outlive static destructors
  return *table;
}

class BudgetedAllocator final : public c10::Allocator {
 public:
  explicit BudgetedAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t n) const override {
    uint64_t limit = gLimit.load(std::memory_order_relaxed);
    if (limit && gLive.load(std::memory_order_relaxed) + n > limit)
      throw Error("replay would hold more than its memory budget in tensors (a " + std::to_string(n) +
                  "-byte allocation with " + std::to_string(gLive.load()) + " bytes live, limit " + std::to_string(limit) +
                  "); raise it with --memory-budget if the record is trusted and needs it");
    c10::DataPtr base = base_->allocate(n);
    c10::Device device = base.device();
    void* data = base.get();
    c10::DeleterFnPtr baseDeleter = base.get_deleter();
    void* baseContext = base.release_context();
    blocks().add(data, Block{n, baseContext, baseDeleter});
    gLive.fetch_add(n, std::memory_order_relaxed);
    return {data, data, &release, device};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }

 private:
  static void release(void* data) {
    auto block = blocks().take(data);
    if (!block) return;  // given out before this wrapper was installed: left alone rather than freed wrongly
    gLive.fetch_sub(block->bytes, std::memory_order_relaxed);
    if (block->baseDeleter) block->baseDeleter(block->baseContext);
  }
  c10::Allocator* base_;
};

void installOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    static BudgetedAllocator allocator(c10::GetCPUAllocator());
    c10::SetCPUAllocator(&allocator, /*priority=*/1);
  });
}

}  // namespace

MemoryBudgetScope::MemoryBudgetScope(uint64_t bytes) {
  installOnce();
  previousLimit_ = gLimit.load();
  gLimit.store(bytes ? gLive.load() + bytes : 0);
}

MemoryBudgetScope::~MemoryBudgetScope() { gLimit.store(previousLimit_); }

}  // namespace magpy::replay

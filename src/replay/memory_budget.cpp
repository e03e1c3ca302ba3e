#include "replay/memory_budget.h"

#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <mutex>

#include "magpy/support/error.h"

namespace magpy::replay {
namespace {

std::atomic<uint64_t> gLive{0};
std::atomic<uint64_t> gLimit{0};  // live bytes allowed; 0 = no limit

// Sits in front of each block, so freeing needs no lookup and no second
// allocation: its size keeps the data 64-byte aligned as the base's is.
struct alignas(64) Header {
  uint64_t bytes;
  void* baseContext;
  c10::DeleterFnPtr baseDeleter;
};

class BudgetedAllocator final : public c10::Allocator {
 public:
  explicit BudgetedAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t n) const override {
    uint64_t limit = gLimit.load(std::memory_order_relaxed);
    if (limit && gLive.load(std::memory_order_relaxed) + n > limit)
      throw Error("the call would hold more than its memory budget in tensors (a " + std::to_string(n) +
                  "-byte allocation with " + std::to_string(gLive.load()) + " bytes live, limit " + std::to_string(limit) +
                  "); raise it with --memory-budget if the record is trusted and needs it");
    c10::DataPtr base = base_->allocate(n + sizeof(Header));
    c10::Device device = base.device();
    auto* header = static_cast<Header*>(base.get());
    c10::DeleterFnPtr baseDeleter = base.get_deleter();
    void* baseContext = base.release_context();
    *header = Header{n, baseContext, baseDeleter};
    gLive.fetch_add(n, std::memory_order_relaxed);
    void* data = header + 1;
    return {data, data, &release, device};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }

 private:
  static void release(void* data) {
    Header* header = static_cast<Header*>(data) - 1;
    gLive.fetch_sub(header->bytes, std::memory_order_relaxed);
    if (header->baseDeleter) header->baseDeleter(header->baseContext);
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

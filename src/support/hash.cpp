#include "magpy/support/hash.h"

#include <algorithm>
#include <cstring>

namespace magpy {
namespace {

constexpr uint64_t kMul = 0x9e3779b97f4a7c15ULL;

uint64_t mix(uint64_t h, uint64_t word) {
  h ^= word * kMul;
  h = (h << 31) | (h >> 33);
  h *= 0xbf58476d1ce4e5b9ULL;
  return h;
}

uint64_t finalize(uint64_t h) {
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h;
}

// Long inputs (tensor blobs, record bodies: most of a capture's and a
// load's hashing) go through four independent lanes of 32-byte blocks, so
// the multiply chains overlap instead of costing one latency per word.
void startLanes(uint64_t state, uint64_t (&lanes)[4]) {
  lanes[0] = state;
  lanes[1] = state ^ kMul;
  lanes[2] = state + kMul;
  lanes[3] = ~state;
}

void mixBlocks(uint64_t (&lanes)[4], const unsigned char* p, size_t blocks) {
  for (size_t b = 0; b < blocks; ++b, p += 32)
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      std::memcpy(&w, p + 8 * k, 8);
      lanes[k] = mix(lanes[k], w);
    }
}

// The words of a run's last `size` bytes, then its tail (size & 7 is the
// whole run's, as a run's lanes take whole 32-byte blocks).
uint64_t mixRest(uint64_t state, const unsigned char* p, size_t size) {
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);  // x86-64 and aarch64 are little-endian
    state = mix(state, w);
  }
  uint64_t tail = 0;
  for (size_t k = 0; i + k < size; ++k) tail |= uint64_t(p[i + k]) << (8 * k);
  return mix(state, tail ^ (uint64_t(size & 7) << 56));
}

}  // namespace

Hasher& Hasher::bytes(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  size_t i = 0;
  if (size >= 64) {
    uint64_t lanes[4];
    startLanes(state_, lanes);
    mixBlocks(lanes, p, size / 32);
    i = size / 32 * 32;
    for (uint64_t lane : lanes) state_ = mix(state_, lane);
  }
  state_ = mixRest(state_, p + i, size - i);
  length_ += size;
  return *this;
}

void ContentHasher::update(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  total_ += size;
  if (!laned_) {  // a run under 64 bytes has no lanes: wait for the 64th byte
    size_t take = std::min(size, sizeof pending_ - pendingSize_);
    std::memcpy(pending_ + pendingSize_, p, take);
    pendingSize_ += take;
    p += take;
    size -= take;
    if (pendingSize_ < sizeof pending_) return;
    laned_ = true;
    startLanes(kHashSeed, lanes_);
    mixBlocks(lanes_, pending_, 2);
    pendingSize_ = 0;
  }
  if (pendingSize_ > 0) {  // complete the block begun by the last piece
    size_t take = std::min(size, 32 - pendingSize_);
    std::memcpy(pending_ + pendingSize_, p, take);
    pendingSize_ += take;
    p += take;
    size -= take;
    if (pendingSize_ < 32) return;
    mixBlocks(lanes_, pending_, 1);
    pendingSize_ = 0;
  }
  mixBlocks(lanes_, p, size / 32);
  std::memcpy(pending_, p + size / 32 * 32, size % 32);
  pendingSize_ = size % 32;
}

uint64_t ContentHasher::digest() const {
  if (!laned_) return hashBytes(pending_, pendingSize_);
  uint64_t state = kHashSeed;
  for (uint64_t lane : lanes_) state = mix(state, lane);
  return finalize(mixRest(state, pending_, pendingSize_) ^ total_);
}

Hasher& Hasher::text(std::string_view s) {
  u64(s.size());
  return bytes(s.data(), s.size());
}

Hasher& Hasher::u64(uint64_t v) {
  state_ = mix(state_, v);
  length_ += 8;
  return *this;
}

uint64_t Hasher::digest() const { return finalize(state_ ^ length_); }

uint64_t hashBytes(const void* data, size_t size) {
  return Hasher().bytes(data, size).digest();
}

std::string hexDigest(uint64_t h) {
  static const char* kDigits = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4) out[i] = kDigits[h & 15];
  return out;
}

}  // namespace magpy

#include "magpy/support/hash.h"

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

}  // namespace

Hasher& Hasher::bytes(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  size_t i = 0;
  // Long inputs (tensor blobs, record bodies: most of a capture's and a
  // load's hashing) go through four independent lanes of 32-byte blocks,
  // so the multiply chains overlap instead of costing one latency per word.
  if (size >= 64) {
    uint64_t lanes[4] = {state_, state_ ^ kMul, state_ + kMul, ~state_};
    for (; i + 32 <= size; i += 32)
      for (int k = 0; k < 4; ++k) {
        uint64_t w;
        std::memcpy(&w, p + i + 8 * k, 8);
        lanes[k] = mix(lanes[k], w);
      }
    for (uint64_t lane : lanes) state_ = mix(state_, lane);
  }
  for (; i + 8 <= size; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);  // x86-64 and aarch64 are little-endian
    state_ = mix(state_, w);
  }
  uint64_t tail = 0;
  for (size_t k = 0; i + k < size; ++k) tail |= uint64_t(p[i + k]) << (8 * k);
  state_ = mix(state_, tail ^ (uint64_t(size & 7) << 56));
  length_ += size;
  return *this;
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

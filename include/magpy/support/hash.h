// Content hashing for tensors, annotation sets and records.
//
// The hash is a fixed, documented function (64-bit, little-endian words,
// multiply-xorshift mixing; a run of 64 bytes or more is mixed as 32-byte
// blocks into four lanes, folded into the state after the run) so that
// hashes written into records stay stable across machines and within a
// record format version (record/format.h). It is not cryptographic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace magpy {

constexpr uint64_t kHashSeed = 0x6d61677079726563ULL;  // "magpyrec"

class Hasher {
 public:
  Hasher& bytes(const void* data, size_t size);
  Hasher& text(std::string_view s);  // length-prefixed, so "ab"+"c" != "a"+"bc"
  Hasher& u64(uint64_t v);
  uint64_t digest() const;

 private:
  uint64_t state_ = kHashSeed;
  uint64_t length_ = 0;
};

uint64_t hashBytes(const void* data, size_t size);

// hashBytes of a byte run fed in pieces of any size (a record body written
// as it is made): the same value as hashBytes over their concatenation.
class ContentHasher {
 public:
  void update(const void* data, size_t size);
  uint64_t digest() const;

 private:
  uint64_t lanes_[4] = {};
  unsigned char pending_[64];  // bytes not yet mixed: fewer than 64 before the lanes start, then fewer than 32
  size_t pendingSize_ = 0;
  uint64_t total_ = 0;
  bool laned_ = false;  // 64 bytes or more were fed: full 32-byte blocks go through the lanes
};

// 16 lowercase hex digits.
std::string hexDigest(uint64_t h);

}  // namespace magpy

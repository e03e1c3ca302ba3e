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

class Hasher {
 public:
  Hasher& bytes(const void* data, size_t size);
  Hasher& text(std::string_view s);  // length-prefixed, so "ab"+"c" != "a"+"bc"
  Hasher& u64(uint64_t v);
  uint64_t digest() const;

 private:
  uint64_t state_ = 0x6d61677079726563ULL;  // "magpyrec"
  uint64_t length_ = 0;
};

uint64_t hashBytes(const void* data, size_t size);

// 16 lowercase hex digits.
std::string hexDigest(uint64_t h);

}  // namespace magpy

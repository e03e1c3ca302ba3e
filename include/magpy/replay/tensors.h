// Conversions between at::Tensor and the record's tensor data.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

#include "magpy/record/value.h"

namespace magpy::replay {

std::string dtypeName(c10::ScalarType t);       // "float32"
c10::ScalarType dtypeFromName(const std::string& name);  // throws Error
std::string deviceName(const c10::Device& d);   // "cpu", "cuda:0"

record::TensorMeta metaOf(const at::Tensor& t);

// t as dense row-major CPU memory (t itself where it is already).
at::Tensor denseCpu(const at::Tensor& t);
// A copy of a dense CPU tensor's bytes, whose hashBytes is `hash`.
record::TensorBlob blobOf(const at::Tensor& dense, uint64_t hash);

// A new CPU tensor holding blob's elements, laid out with meta's strides
// when they describe a dense layout, and requires_grad as in meta.
at::Tensor tensorFromBlob(const record::TensorBlob& blob, const record::TensorMeta& meta);
// The same, taking blob's bytes as the tensor's memory where meta is the
// blob's own row-major layout (blob.bytes is left empty), else a copy.
at::Tensor tensorAdoptingBlob(record::TensorBlob& blob, const record::TensorMeta& meta);

}  // namespace magpy::replay

namespace magpy::replay {
// The version of the libtorch replay runs on, e.g. "1.13.0".
std::string libtorchVersion();
// Empty when a record captured with torch `recordTorch` replays on this
// libtorch without concern; otherwise why it may not (a different
// major.minor: operators can change between releases).
std::string torchVersionConcern(const std::string& recordTorch);
}  // namespace magpy::replay

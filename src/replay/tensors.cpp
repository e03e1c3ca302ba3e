#include "magpy/replay/tensors.h"

#include <ATen/ops/empty.h>
#include <c10/core/CPUAllocator.h>
#include <ATen/ops/empty_strided.h>

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "magpy/support/error.h"
#include "magpy/support/hash.h"

namespace magpy::replay {
namespace {

// Fresh memory is faulted in one 4 KiB page at a time on first touch, and
// in a capture most of a record's cost is copying the weights into fresh
// memory. One madvise that populates the whole buffer first makes that
// copy about half as expensive (ResNet-18's 45 MB). Asking for huge pages
// first (the whole 2 MiB pages inside the buffer) cuts the faults 512-fold:
// on a virtual machine, where each is an exit to the hypervisor, a 45 MB
// copy into fresh memory took 20-30 ms instead of 110 ms. Kernels that
// refuse either advice leave the copy to fault as before.
void populatePages(char* data, size_t bytes) {
  constexpr uintptr_t kPage = 4096;
  uintptr_t begin = (uintptr_t(data) + kPage - 1) & ~(kPage - 1), end = (uintptr_t(data) + bytes) & ~(kPage - 1);
  if (end < begin + 16 * kPage) return;
  madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
  madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
}

const std::pair<c10::ScalarType, const char*> kDTypes[] = {
    {c10::ScalarType::Float, "float32"},   {c10::ScalarType::Double, "float64"},
    {c10::ScalarType::Half, "float16"},    {c10::ScalarType::BFloat16, "bfloat16"},
    {c10::ScalarType::Long, "int64"},      {c10::ScalarType::Int, "int32"},
    {c10::ScalarType::Short, "int16"},     {c10::ScalarType::Char, "int8"},
    {c10::ScalarType::Byte, "uint8"},      {c10::ScalarType::Bool, "bool"},
    {c10::ScalarType::ComplexFloat, "complex64"}, {c10::ScalarType::ComplexDouble, "complex128"},
};

// True when strides lay the elements out without gaps or overlap, so a
// dense copy can fill them.
bool isDense(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  if (shape.size() != strides.size()) return false;
  std::vector<std::pair<int64_t, int64_t>> dims;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return true;
    if (shape[i] != 1) dims.push_back({strides[i], shape[i]});
  }
  std::sort(dims.begin(), dims.end());
  int64_t expected = 1;
  for (auto& [stride, size] : dims) {
    if (stride != expected) return false;
    expected *= size;
  }
  return true;
}

}  // namespace

std::string dtypeName(c10::ScalarType t) {
  for (auto& [type, name] : kDTypes)
    if (type == t) return name;
  throw Error(std::string("tensors of dtype ") + c10::toString(t) + " are not supported in records");
}

c10::ScalarType dtypeFromName(const std::string& name) {
  for (auto& [type, n] : kDTypes)
    if (name == n) return type;
  throw Error("unknown tensor dtype '" + name + "'");
}

std::string deviceName(const c10::Device& d) { return d.str(); }

record::TensorMeta metaOf(const at::Tensor& t) {
  record::TensorMeta m;
  m.dtype = dtypeName(t.scalar_type());
  m.shape.assign(t.sizes().begin(), t.sizes().end());
  m.strides.assign(t.strides().begin(), t.strides().end());
  m.device = deviceName(t.device());
  m.requires_grad = t.requires_grad();
  return m;
}

at::Tensor denseCpu(const at::Tensor& t) { return t.detach().to(c10::kCPU).contiguous(); }

record::TensorBlob blobOf(const at::Tensor& dense, uint64_t hash) {
  record::TensorBlob b;
  b.dtype = dtypeName(dense.scalar_type());
  b.shape.assign(dense.sizes().begin(), dense.sizes().end());
  b.bytes.reserve(dense.nbytes());
  populatePages(b.bytes.data(), dense.nbytes());
  b.bytes.assign(static_cast<const char*>(dense.data_ptr()), dense.nbytes());
  b.hash = hash;
  return b;
}

at::Tensor tensorAdoptingBlob(record::TensorBlob& blob, const record::TensorMeta& meta) {
  std::vector<int64_t> contiguous(blob.shape.size(), 1);
  for (size_t d = blob.shape.size(); d-- > 1;) contiguous[d - 1] = contiguous[d] * std::max<int64_t>(blob.shape[d], 1);
  if (blob.bytes.empty() || meta.shape != blob.shape || meta.strides != contiguous) return tensorFromBlob(blob, meta);
  auto* owned = new std::string(std::move(blob.bytes));
  blob.bytes.clear();
  c10::DataPtr data(owned->data(), owned, [](void* bytes) { delete static_cast<std::string*>(bytes); }, c10::Device(c10::kCPU));
  // Resizable through the CPU allocator, as a tensor libtorch made.
  c10::Storage storage(c10::Storage::use_byte_size_t(), owned->size(), std::move(data), c10::GetCPUAllocator(), true);
  at::Tensor out = at::empty({0}, at::TensorOptions().dtype(dtypeFromName(blob.dtype)));
  out.set_(storage, 0, meta.shape, contiguous);
  if (meta.requires_grad && at::isFloatingType(out.scalar_type())) out.set_requires_grad(true);
  return out;
}

at::Tensor tensorFromBlob(const record::TensorBlob& blob, const record::TensorMeta& meta) {
  auto options = at::TensorOptions().dtype(dtypeFromName(blob.dtype));
  at::Tensor dense = at::empty(blob.shape, options);
  if (!blob.bytes.empty()) std::memcpy(dense.data_ptr(), blob.bytes.data(), blob.bytes.size());
  at::Tensor out = dense;
  if (meta.shape == blob.shape && meta.strides != std::vector<int64_t>(dense.strides().begin(), dense.strides().end()) &&
      isDense(meta.shape, meta.strides)) {
    out = at::empty_strided(meta.shape, meta.strides, options);
    out.copy_(dense);
  }
  if (meta.requires_grad && at::isFloatingType(out.scalar_type())) out.set_requires_grad(true);
  return out;
}

}  // namespace magpy::replay

#include <torch/version.h>

namespace magpy::replay {
std::string libtorchVersion() { return TORCH_VERSION; }

std::string torchVersionConcern(const std::string& recordTorch) {
  auto majorMinor = [](const std::string& v) {
    size_t first = v.find('.');
    size_t second = first == std::string::npos ? std::string::npos : v.find('.', first + 1);
    return v.substr(0, second);
  };
  if (majorMinor(recordTorch) == majorMinor(libtorchVersion())) return "";
  return "the record was captured with torch " + recordTorch + " and replays on libtorch " + libtorchVersion() +
         ": operators are matched by name and overload and missing trailing arguments take their defaults, but an "
         "operator's behaviour may differ between releases";
}
}  // namespace magpy::replay

#include "replay/page_out.h"

#include <ATen/core/Tensor.h>
#include <ATen/record_function.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace magpy::replay {

namespace {

struct Mapping {
  void* base;
  size_t bytes;
};

void unmap(void* context) {
  auto* m = static_cast<Mapping*>(context);
  munmap(m->base, m->bytes);
  delete m;
}

size_t pageSize() { return size_t(sysconf(_SC_PAGESIZE)); }

// An unlinked file: nothing is left behind, whatever ends the process.
int temporaryFile() {
  const char* dir = std::getenv("TMPDIR");
  if (!dir || !*dir) dir = "/var/tmp";
  int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
  std::string path = std::string(dir) + "/magpy-state-XXXXXX";
  fd = mkostemp(path.data(), O_CLOEXEC);
  if (fd >= 0) unlink(path.c_str());
  return fd;
}

bool writeAll(int fd, const char* bytes, size_t size) {
  while (size > 0) {
    ssize_t n = write(fd, bytes, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes += n;
    size -= size_t(n);
  }
  return true;
}

Mapping* mappingOf(const at::Tensor& tensor) {
  if (!tensor.defined() || !tensor.has_storage()) return nullptr;
  const c10::DataPtr& data = tensor.storage().data_ptr();
  return data.get_deleter() == &unmap ? static_cast<Mapping*>(data.get_context()) : nullptr;
}

}  // namespace

bool pageOut(const at::Tensor& tensor) {
  if (!tensor.defined() || !tensor.has_storage() || !tensor.device().is_cpu() || mappingOf(tensor)) return false;
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  size_t bytes = storage->nbytes();
  if (bytes < pageSize() || !storage->data()) return false;
  int fd = temporaryFile();
  if (fd < 0) return false;
  bool written = writeAll(fd, static_cast<const char*>(storage->data()), bytes);
  void* base = written ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0) : MAP_FAILED;
  close(fd);
  if (base == MAP_FAILED) return false;
  storage->set_data_ptr_noswap(c10::DataPtr(base, new Mapping{base, bytes}, &unmap, tensor.device()));
  return true;
}

bool pagedOut(const at::Tensor& tensor) { return mappingOf(tensor) != nullptr; }

void dropResident(const at::Tensor& tensor) {
  const Mapping* m = mappingOf(tensor);
  if (!m) return;
  // /proc/self/pagemap: one 64-bit entry per page; bit 63 says resident,
  // bit 61 that the page is the file's (a written page of a private
  // mapping is an anonymous copy, and must stay).
  constexpr uint64_t kResident = uint64_t(1) << 63, kFilePage = uint64_t(1) << 61;
  const size_t page = pageSize(), pages = (m->bytes + page - 1) / page;
  std::vector<uint64_t> entries(pages);
  int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  size_t want = pages * sizeof(uint64_t);
  ssize_t got = pread(fd, entries.data(), want, off_t(reinterpret_cast<uintptr_t>(m->base) / page * sizeof(uint64_t)));
  close(fd);
  if (got != ssize_t(want)) return;
  char* base = static_cast<char*>(m->base);
  for (size_t p = 0; p < pages;) {
    auto clean = [&](size_t k) { return (entries[k] & kResident) && (entries[k] & kFilePage); };
    if (!clean(p)) {
      ++p;
      continue;
    }
    size_t end = p;
    while (end < pages && clean(end)) ++end;
    madvise(base + p * page, (end - p) * page, MADV_DONTNEED);
    p = end;
  }
}

namespace {

struct PagedOutInputs : at::ObserverContext {
  std::vector<at::Tensor> tensors;
};

// The inputs are taken on entry: a boxed kernel pops them off its stack.
std::unique_ptr<at::ObserverContext> notePagedOutInputs(const at::RecordFunction& fn) {
  auto inputs = std::make_unique<PagedOutInputs>();
  for (const c10::IValue& v : fn.inputs())
    if (v.isTensor() && pagedOut(v.toTensor())) inputs->tensors.push_back(v.toTensor());
  return inputs;
}

void dropPagesRead(const at::RecordFunction&, at::ObserverContext* context) {
  if (auto* inputs = static_cast<PagedOutInputs*>(context))
    for (const at::Tensor& t : inputs->tensors) dropResident(t);
}

}  // namespace

PagesReadGoBack::PagesReadGoBack()
    : handle_(at::addThreadLocalCallback(at::RecordFunctionCallback(notePagedOutInputs, dropPagesRead)
                                             .needsInputs(true)
                                             .scopes({at::RecordScope::FUNCTION}))) {}

PagesReadGoBack::~PagesReadGoBack() { at::removeCallback(handle_); }

}  // namespace magpy::replay

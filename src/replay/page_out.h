// Paging state out: a state tensor whose values a compiled graph replaced
// with its own (batch norm folded in, oneDNN layout) is still the state's,
// and a guard miss, another record or a state write may read it again; but
// until then its bytes are a second copy of the weights. pageOut moves
// them to an unlinked temporary file mapped privately in their place: the
// tensor keeps its storage, sizes and values, a read faults its pages back
// in from the page cache (or the disk), and a write copies the page it
// touches, as any private mapping does. dropResident hands back the pages
// a reader faulted in, and only those still the file's (never written
// since): nothing a program wrote is ever dropped.
//
// Native replay only: in a live Python process numpy arrays and ctypes
// pointers may hold the old address of the bytes.
#pragma once

#include <cstdint>

namespace at {
class Tensor;
}

namespace magpy::replay {

// Moves the bytes of the tensor's storage (a CPU storage of at least one
// page, not already paged out) to a temporary file in $TMPDIR (or
// /var/tmp) and maps them in their place. Returns false, changing nothing,
// where it cannot: no such file can be written, the storage is shared
// with memory magpy does not own, or it is too small to gain a page.
bool pageOut(const at::Tensor& tensor);

// Whether the tensor's storage is paged out.
bool pagedOut(const at::Tensor& tensor);

// Hands back to the file the pages of a paged-out storage that are resident
// and unwritten (read since pageOut). A no-op for other storages, or where
// the kernel does not say which pages are unwritten (/proc/self/pagemap).
void dropResident(const at::Tensor& tensor);

// While one is alive on this thread, each operator that reads a paged-out
// tensor hands back the pages it read (dropResident) when it returns: a
// pass that copies many paged-out tensors (into another layout) holds one
// of them resident at a time, not all.
class PagesReadGoBack {
 public:
  PagesReadGoBack();
  ~PagesReadGoBack();
  PagesReadGoBack(const PagesReadGoBack&) = delete;
  PagesReadGoBack& operator=(const PagesReadGoBack&) = delete;

 private:
  uint64_t handle_;
};

}  // namespace magpy::replay

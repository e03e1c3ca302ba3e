// Paging state out (src/replay/page_out.*): values, storage and writes
// survive; only unwritten pages are handed back.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <unistd.h>

#include <ATen/ops/equal.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/relu.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "replay/page_out.h"

using magpy::replay::dropResident;
using magpy::replay::pageOut;
using magpy::replay::pagedOut;
using magpy::replay::PagesReadGoBack;

namespace {

// Whether each page of the tensor's bytes is mapped in this process; empty
// where /proc/self/pagemap cannot be read.
std::vector<bool> residentPages(const at::Tensor& t) {
  size_t page = size_t(sysconf(_SC_PAGESIZE)), pages = (t.nbytes() + page - 1) / page;
  std::vector<uint64_t> entries(pages);
  int fd = open("/proc/self/pagemap", O_RDONLY);
  if (fd < 0) return {};
  ssize_t want = ssize_t(pages * sizeof(uint64_t));
  ssize_t got = pread(fd, entries.data(), size_t(want), off_t(reinterpret_cast<uintptr_t>(t.data_ptr()) / page * 8));
  close(fd);
  if (got != want) return {};
  std::vector<bool> out;
  for (uint64_t e : entries) out.push_back((e >> 63) & 1);
  return out;
}

}  // namespace

TEST(PageOut, KeepsTheStorageAndItsValues) {
  at::Tensor t = at::randn({256, 1024}), want = t.clone(), view = t.narrow(0, 8, 4);
  const void* storage = t.storage().unsafeGetStorageImpl();
  ASSERT_TRUE(pageOut(t));
  EXPECT_TRUE(pagedOut(t));
  EXPECT_TRUE(pagedOut(view)) << "a view shares the storage";
  EXPECT_EQ(t.storage().unsafeGetStorageImpl(), storage);
  EXPECT_TRUE(at::equal(t, want));
  EXPECT_TRUE(at::equal(view, want.narrow(0, 8, 4)));
  view.fill_(3.0f);  // a write copies the pages it touches
  want.narrow(0, 8, 4).fill_(3.0f);
  EXPECT_TRUE(at::equal(t, want));
}

TEST(PageOut, LeavesSmallAndPagedOutStoragesAlone) {
  at::Tensor small = at::randn({16});
  EXPECT_FALSE(pageOut(small));
  EXPECT_FALSE(pagedOut(small));
  at::Tensor big = at::randn({4096});
  ASSERT_TRUE(pageOut(big));
  const void* data = big.data_ptr();
  EXPECT_FALSE(pageOut(big));
  EXPECT_EQ(big.data_ptr(), data);
}

TEST(PageOut, DropsOnlyPagesNeverWritten) {
  at::Tensor t = at::randn({64, 1024}), want = t.clone();  // 64 pages of 4 KiB
  ASSERT_TRUE(pageOut(t));
  ASSERT_TRUE(at::equal(t, want));  // reads every page in
  t.narrow(0, 0, 8).mul_(2.0f);     // writes the first pages
  want.narrow(0, 0, 8).mul_(2.0f);
  dropResident(t);
  std::vector<bool> resident = residentPages(t);
  if (resident.empty()) GTEST_SKIP() << "/proc/self/pagemap cannot be read here";
  size_t written = 8 * 1024 * sizeof(float) / size_t(sysconf(_SC_PAGESIZE));
  for (size_t p = 0; p < resident.size(); ++p) EXPECT_EQ(resident[p], p < written) << "page " << p;
  EXPECT_TRUE(at::equal(t, want)) << "what was written stays; the rest is read back from the file";
}

TEST(PageOut, PagesAnOperatorReadGoBackWhenItReturns) {
  at::Tensor t = at::randn({64, 1024}), want = t.clone();
  ASSERT_TRUE(pageOut(t));
  at::Tensor read = at::relu(t);  // without the observer: read pages stay
  std::vector<bool> resident = residentPages(t);
  if (resident.empty()) GTEST_SKIP() << "/proc/self/pagemap cannot be read here";
  EXPECT_EQ(std::count(resident.begin(), resident.end(), true), ptrdiff_t(resident.size()));
  dropResident(t);
  {
    PagesReadGoBack goBack;
    read = at::relu(t);
    resident = residentPages(t);
    EXPECT_EQ(std::count(resident.begin(), resident.end(), true), 0);
    at::Tensor unpaged = at::randn({64, 1024});
    at::relu(unpaged);  // other tensors are left alone
    EXPECT_FALSE(pagedOut(unpaged));
  }
  EXPECT_TRUE(at::equal(read, at::relu(want)));
  at::relu(t);  // the observer is gone with its scope
  resident = residentPages(t);
  EXPECT_EQ(std::count(resident.begin(), resident.end(), true), ptrdiff_t(resident.size()));
}

TEST(PageOut, LeavesNoFileAndStaysInMemoryWhereNoneCanBeWritten) {
  const char* given = std::getenv("TMPDIR");
  std::string saved = given ? given : "";
  std::string dir = std::filesystem::temp_directory_path() / ("magpy-page-out-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  setenv("TMPDIR", dir.c_str(), 1);
  at::Tensor t = at::randn({4096}), want = t.clone();
  EXPECT_TRUE(pageOut(t));
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << "the file is unlinked from the start";
  setenv("TMPDIR", (dir + "/missing").c_str(), 1);
  at::Tensor kept = at::randn({4096});
  const void* data = kept.data_ptr();
  EXPECT_FALSE(pageOut(kept));
  EXPECT_EQ(kept.data_ptr(), data);
  if (given) setenv("TMPDIR", saved.c_str(), 1);
  else unsetenv("TMPDIR");
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(at::equal(t, want));
}

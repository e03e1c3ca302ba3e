// The restricted torch.save reader every tensor file goes through: files
// written here byte by byte, well formed and hostile.
#include <gtest/gtest.h>

#include <caffe2/serialize/inline_container.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "magpy/support/error.h"
#include "replay/torch_save.h"

using namespace magpy;
using namespace magpy::replay;

namespace {

// Pickle pieces (protocol 2).
const std::string kProto = "\x80\x02";
std::string shortStr(const std::string& s) { return "\x8c" + std::string(1, char(s.size())) + s; }
std::string binint1(int v) { return "K" + std::string(1, char(v)); }
std::string put(int k) { return "q" + std::string(1, char(k)); }
std::string get(int k) { return "h" + std::string(1, char(k)); }
// A float32 tensor of `numel` elements in storage "0", viewed at offset
// with one size and stride.
std::string tensor(int offset, int size, int stride, int64_t storageNumel) {
  std::string numel = "\x8a\x08";
  for (int k = 0; k < 8; ++k) numel += char((uint64_t(storageNumel) >> (8 * k)) & 0xff);
  return shortStr("torch._utils") + shortStr("_rebuild_tensor_v2") + "\x93" + "((" + shortStr("storage") +
         shortStr("torch") + shortStr("FloatStorage") + "\x93" + shortStr("0") + shortStr("cpu") + numel + "t" + "Q" +
         binint1(offset) + binint1(size) + "\x85" + binint1(stride) + "\x85" + "\x89" + "t" + "R";
}

std::string writeFile(const std::string& name, const std::string& pickle, size_t storageBytes = 0,
                      bool compressPickle = false) {
  std::string path = (std::filesystem::temp_directory_path() / (name + ".pt")).string();
  caffe2::serialize::PyTorchStreamWriter w(path);
  w.writeRecord("data.pkl", pickle.data(), pickle.size(), compressPickle);
  std::string bytes(storageBytes, '\0');
  for (size_t k = 0; k + 4 <= storageBytes; k += 4) {
    float f = float(k / 4);
    std::memcpy(&bytes[k], &f, 4);
  }
  if (storageBytes) w.writeRecord("data/0", bytes.data(), bytes.size());
  w.writeEndOfFile();
  return path;
}

std::string errorOf(const std::string& path) {
  try {
    readTorchSave(path, "the input file");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(TorchSave, ViewsOfOneStorageShareIt) {
  std::string pickle = kProto + tensor(0, 4, 1, 8) + put(0) + tensor(2, 3, 2, 8) + "\x86" + ".";
  Value v = readTorchSave(writeFile("views", pickle, 32), "the input file");
  ASSERT_EQ(v.kind, Value::Kind::Tuple);
  at::Tensor a = v.heap->items[0].tensor, b = v.heap->items[1].tensor;
  EXPECT_EQ(a.sizes(), c10::IntArrayRef({4}));
  EXPECT_EQ(b.stride(0), 2);
  EXPECT_FLOAT_EQ(b[1].item<float>(), 4.0f);
  a.fill_(7);  // b's first element is a's third
  EXPECT_FLOAT_EQ(b[0].item<float>(), 7.0f);
}

TEST(TorchSave, AReusedObjectIsOneSharedValue) {
  // x = [1]; then 40 levels of (x, x): 2^40 paths, one object per level.
  std::string pickle = kProto + "]" + put(0) + binint1(1) + "a";
  for (int level = 0; level < 40; ++level) pickle += put(1) + get(1) + "\x86";
  pickle += ".";
  auto t0 = std::chrono::steady_clock::now();
  Value v = readTorchSave(writeFile("shared", pickle), "the input file");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  ASSERT_EQ(v.kind, Value::Kind::Tuple);
  EXPECT_EQ(v.heap->items[0].heap, v.heap->items[1].heap);
}

TEST(TorchSave, AContainerChangedAfterItWasStoredIsRefused) {
  // Lists appended to their parent before they are filled would nest
  // deeper than any depth counted at insertion.
  std::string pickle = kProto + "]" + put(0);
  for (int k = 1; k < 200; ++k) pickle += "]" + put(k) + "a" + get(k);
  pickle += ".";
  EXPECT_TRUE(contains(errorOf(writeFile("chain", pickle)), "a container changed after it was stored in another"));
}

TEST(TorchSave, AContainerStoredIntoItselfIsRefused) {
  // l.append(l): a cycle reference counting never frees (the fuzzer found it leaking).
  std::string pickle = kProto + "]" + put(0) + get(0) + "a.";
  EXPECT_TRUE(contains(errorOf(writeFile("itself", pickle)), "a container stored into itself"));
}

TEST(TorchSave, NestingIsBounded) {
  std::string pickle = kProto;
  for (int k = 0; k < 100; ++k) pickle += "]";
  for (int k = 0; k < 99; ++k) pickle += "a";
  pickle += ".";
  EXPECT_TRUE(contains(errorOf(writeFile("deep", pickle)), "values nested deeper than 64"));
}

TEST(TorchSave, StoragesLargerThanTheFileAreRefusedBeforeAllocating) {
  std::string pickle = kProto + tensor(0, 4, 1, int64_t(1) << 40) + ".";
  std::string e = errorOf(writeFile("huge", pickle, 32));
  EXPECT_TRUE(contains(e, "its record 'data/0' claims 4398046511104 bytes, but the file holds")) << e;
}

TEST(TorchSave, ViewsOutsideTheirStorageAreRefused) {
  std::string pickle = kProto + tensor(6, 4, 1, 8) + ".";
  EXPECT_TRUE(contains(errorOf(writeFile("outside", pickle, 32)), "a tensor that reaches element 9 of a storage of 8"));
}

TEST(TorchSave, CodeAndCompressedPicklesAreRefused) {
  std::string code = kProto + shortStr("posix") + shortStr("system") + "\x93" + shortStr("touch pwned") + "\x85" + "R.";
  EXPECT_TRUE(contains(errorOf(writeFile("code", code)), "a call of 'posix.system', which torch.save does not make"));
  std::string plain = kProto + binint1(3) + ".";
  EXPECT_EQ(readTorchSave(writeFile("plain", plain), "x").atom.i, 3);
  std::string packed = kProto + "](" + std::string(4000, 'N') + "e.";  // compresses well
  EXPECT_EQ(readTorchSave(writeFile("unpacked", packed), "x").heap->items.size(), 4000u);
  EXPECT_TRUE(contains(errorOf(writeFile("packed", packed, 0, true)), "the input file cannot be read"));
}

#include "replay/collectives.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <cstdlib>

#include "magpy/record/graph.h"
#include "magpy/replay/distributed.h"
#include "magpy/support/error.h"

namespace magpy::replay {

namespace {

GroupSource& source() {
  static GroupSource s;
  return s;
}

bool argumentOfClass(const c10::Argument& param, const char* name) {
  auto type = param.real_type();
  if (type->kind() == c10::TypeKind::OptionalType) type = type->containedType(0);
  auto cls = type->cast<c10::ClassType>();
  return cls && cls->name() && cls->name()->qualifiedName() == std::string("__torch__.torch.classes.c10d.") + name;
}

c10::intrusive_ptr<c10d::ProcessGroup> groupOf(const c10::IValue& v) {
  if (!v.isCustomClass()) return {};
  try {
    return v.toCustomClass<c10d::ProcessGroup>();
  } catch (const c10::Error&) {
    return {};
  }
}

}  // namespace

void setGroupSource(GroupSource s) { source() = std::move(s); }

c10::IValue currentGroup() { return source() ? source()() : c10::IValue(); }

bool takesGroup(const c10::Argument& param) { return argumentOfClass(param, "ProcessGroup"); }
bool takesReduceOp(const c10::Argument& param) { return argumentOfClass(param, "ReduceOp"); }

c10::IValue reduceOpFor(int64_t code) {
  if (!record::isRecordedReduceOp(code)) throw Error("reduce op " + std::to_string(code) + " is none a record may hold");
  return c10::IValue(c10::make_intrusive<c10d::ReduceOp>(static_cast<c10d::ReduceOp::RedOpType>(code)));
}

std::optional<int64_t> reduceOpCode(const c10::IValue& v) {
  if (!v.isCustomClass()) return std::nullopt;
  auto op = v.toCustomClass<c10d::ReduceOp>();
  if (op->supplement_ || !record::isRecordedReduceOp(int64_t(op->op_))) return std::nullopt;
  return int64_t(op->op_);
}

bool isCurrentGroup(const c10::IValue& v) {
  auto group = groupOf(v);
  return group && group == groupOf(currentGroup());
}

bool isWork(const c10::IValue& v) {
  if (!v.isCustomClass()) return false;
  auto type = v.type()->cast<c10::ClassType>();
  return type && type->name() && type->name()->qualifiedName() == "__torch__.torch.classes.c10d.Work";
}

void waitFor(const c10::IValue& work) { work.toCustomClass<c10d::Work>()->wait(); }

std::optional<record::Atom> groupState(const std::string& name) {
  if (name != "dist_world_size" && name != "dist_backend") return std::nullopt;
  auto group = groupOf(currentGroup());
  if (name == "dist_world_size") return record::Atom::integer(group ? group->getSize() : 0);
  return record::Atom::string(group ? group->getBackendName() : "");
}

namespace {

int intVariable(const char* name, int low, int high) {
  const char* text = std::getenv(name);
  if (!text || !*text) throw Error(std::string("the environment variable ") + name + " is not set: torchrun sets it for each rank");
  char* end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (*end || value < low || value > high)
    throw Error(std::string("the environment variable ") + name + " is '" + text + "', not an integer from " +
                std::to_string(low) + " to " + std::to_string(high));
  return int(value);
}

}  // namespace

std::optional<RankEnvironment> rankEnvironment() {
  if (!std::getenv("RANK") && !std::getenv("WORLD_SIZE")) return std::nullopt;
  RankEnvironment env;
  env.worldSize = intVariable("WORLD_SIZE", 1, 1 << 16);
  env.rank = intVariable("RANK", 0, env.worldSize - 1);
  env.localRank = std::getenv("LOCAL_RANK") ? intVariable("LOCAL_RANK", 0, env.worldSize - 1) : env.rank;
  const char* addr = std::getenv("MASTER_ADDR");
  if (!addr || !*addr) throw Error("the environment variable MASTER_ADDR is not set: torchrun sets it for each rank");
  env.masterAddr = addr;
  env.masterPort = intVariable("MASTER_PORT", 1, 65535);
  return env;
}

std::string forRank(const std::string& text, int rank) {
  std::string out = text;
  for (size_t at = out.find("{rank}"); at != std::string::npos; at = out.find("{rank}", at))
    out.replace(at, 6, std::to_string(rank));
  return out;
}

namespace {

std::vector<uint8_t> bytesOf(const std::string& s) { return {s.begin(), s.end()}; }

// Every rank states its digest and reads all of them; rank 0, whose
// process serves the store, waits for every rank to have read before it
// leaves (even to refuse), so each finds the others' digests.
void agree(c10d::Store& store, const RankEnvironment& env, const std::string& digest,
           std::chrono::milliseconds timeout) {
  store.set("record/" + std::to_string(env.rank), bytesOf(digest));
  std::string differs;
  for (int r = 0; r < env.worldSize && differs.empty(); ++r) {
    std::vector<uint8_t> theirs;
    try {
      theirs = store.get("record/" + std::to_string(r));
    } catch (const std::exception& e) {
      throw Error("rank " + std::to_string(env.rank) + ": rank " + std::to_string(r) +
                  " did not state which records it replays in time (" + e.what() + "): it failed before, or "
                  "was never started");
    }
    if (theirs != bytesOf(digest))
      differs = "rank " + std::to_string(env.rank) + ": rank " + std::to_string(r) + " replays other records (digest " +
                std::string(theirs.begin(), theirs.end()) + ", this rank's " + digest +
                "): give every rank records captured from the same script at the same world size";
  }
  store.set("read/" + std::to_string(env.rank), bytesOf("1"));
  if (env.rank == 0) {
    std::vector<std::string> read;
    for (int r = 1; r < env.worldSize; ++r) read.push_back("read/" + std::to_string(r));
    try {
      store.wait(read, timeout);
    } catch (const std::exception&) {
      // a rank that never read: it reports its own failure
    }
  }
  if (!differs.empty()) throw Error(differs);
}

}  // namespace

void formGroup(const RankEnvironment& env, const std::string& digest, std::chrono::milliseconds timeout) {
  std::string where = env.masterAddr + ":" + std::to_string(env.masterPort);
  c10d::TCPStoreOptions options;
  options.port = uint16_t(env.masterPort);
  options.isServer = env.rank == 0;
  options.numWorkers = size_t(env.worldSize);
  options.waitWorkers = true;
  options.timeout = timeout;
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(env.masterAddr, options);
  } catch (const std::exception& e) {
    throw Error("rank " + std::to_string(env.rank) + ": the store at " + where + " did not form with " +
                std::to_string(env.worldSize) + " ranks (" + e.what() + "): start every rank with the same " +
                "MASTER_ADDR, MASTER_PORT and WORLD_SIZE, or use magpy-run --nproc-per-node");
  }
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>("magpy", store);
  agree(*prefixed, env, digest, timeout);
  auto gloo = c10d::ProcessGroupGloo::Options::create(timeout);
  bool loopback = env.masterAddr == "127.0.0.1" || env.masterAddr == "localhost";
  gloo->devices.push_back(loopback ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                   : c10d::ProcessGroupGloo::createDefaultDevice());
  // Lives until the process exits: its worker threads must not be joined
  // while libtorch tears down its own statics.
  auto* group = new c10::IValue(c10::intrusive_ptr<c10d::ProcessGroup>(
      c10::make_intrusive<c10d::ProcessGroupGloo>(c10::make_intrusive<c10d::PrefixStore>("gloo", store), env.rank,
                                                   env.worldSize, gloo)));
  setGroupSource([group] { return *group; });
}

}  // namespace magpy::replay

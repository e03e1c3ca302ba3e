// Data-parallel replay: the ranks of a torch.distributed job, as torchrun
// starts them (its launch contract is a set of environment variables:
// RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), and the process
// group magpy-run forms for records with collectives (record/graph.h).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace magpy::replay {

struct RankEnvironment {
  int rank = 0;
  int localRank = 0;
  int worldSize = 1;
  std::string masterAddr;
  int masterPort = 0;
};

// torchrun's variables, or nothing where RANK and WORLD_SIZE are both
// unset. Throws Error naming a variable that is malformed or missing.
std::optional<RankEnvironment> rankEnvironment();

// `text` with every "{rank}" replaced by the rank ("shard_{rank}.pt").
std::string forRank(const std::string& text, int rank);

// Forms the process group collectives run in natively: a TCPStore at
// MASTER_ADDR:MASTER_PORT (rank 0 serves it) and Gloo over it. Every rank
// then states `digest` (what it will replay: its records' guards, graphs
// and mocks) and reads every other rank's, so a rank given another record
// refuses to start, as do the others. Throws Error when the store does not
// form, a rank does not state its digest within `timeout`, or digests
// differ. The group lives until the process exits.
void formGroup(const RankEnvironment& env, const std::string& digest, std::chrono::milliseconds timeout);

// Runs `argv` (argv[0] the program) once per rank, as torchrun would on one
// node: nproc processes with RANK = LOCAL_RANK = 0..nproc-1, WORLD_SIZE =
// nproc, MASTER_ADDR = 127.0.0.1 and a free MASTER_PORT. When one exits
// with a failure (or is killed), the others are stopped within `grace`.
// Returns the first failing rank's exit status (128 + signal when killed),
// or 0 when all succeed.
int launchRanks(int nproc, const std::vector<std::string>& argv, std::chrono::milliseconds grace);

}  // namespace magpy::replay

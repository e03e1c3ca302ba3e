// magpy-run --nproc-per-node: the ranks of one node, started as torchrun
// starts them (the environment of include/magpy/replay/distributed.h).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <optional>
#include <cstring>
#include <thread>

#include "magpy/replay/distributed.h"
#include "magpy/support/error.h"

namespace magpy::replay {

namespace {

// A port no one listens on now (the kernel's choice for port 0).
int freePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw Error(std::string("cannot open a socket to find a free port: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof addr;
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
            getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &size) == 0;
  close(fd);
  if (!ok) throw Error(std::string("cannot find a free port on 127.0.0.1: ") + std::strerror(errno));
  return ntohs(addr.sin_port);
}

[[noreturn]] void runRank(int rank, int nproc, int port, const std::vector<std::string>& argv) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // no rank outlives the launcher
  std::string r = std::to_string(rank), n = std::to_string(nproc), p = std::to_string(port);
  setenv("RANK", r.c_str(), 1);
  setenv("LOCAL_RANK", r.c_str(), 1);
  setenv("WORLD_SIZE", n.c_str(), 1);
  setenv("LOCAL_WORLD_SIZE", n.c_str(), 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", p.c_str(), 1);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execv("/proc/self/exe", args.data());
  std::fprintf(stderr, "magpy-run: rank %d: cannot start: %s\n", rank, std::strerror(errno));
  _exit(127);
}

int exitStatus(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

}  // namespace

int launchRanks(int nproc, const std::vector<std::string>& argv, std::chrono::milliseconds grace) {
  if (nproc < 1 || nproc > 1024) throw Error("--nproc-per-node must be from 1 to 1024, not " + std::to_string(nproc));
  int port = freePort();
  std::vector<std::pair<pid_t, int>> running;  // pid, rank
  for (int rank = 0; rank < nproc; ++rank) {
    pid_t pid = fork();
    if (pid < 0) throw Error(std::string("cannot start rank ") + std::to_string(rank) + ": " + std::strerror(errno));
    if (pid == 0) runRank(rank, nproc, port, argv);
    running.emplace_back(pid, rank);
  }
  // After a failure the others usually fail on their own at their next
  // collective; those still running after the grace period are killed.
  int failure = 0;
  std::optional<std::chrono::steady_clock::time_point> stopAt;
  while (!running.empty()) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, stopAt ? WNOHANG : 0);
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) break;
    if (pid == 0) {
      if (std::chrono::steady_clock::now() >= *stopAt) {
        for (auto& [other, rank] : running) {
          std::fprintf(stderr, "magpy-run: rank %d still ran %lld s after a rank failed; stopping it\n", rank,
                       static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(grace).count()));
          kill(other, SIGKILL);
        }
        stopAt = std::chrono::steady_clock::time_point::max();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    auto it = std::find_if(running.begin(), running.end(), [&](auto& r) { return r.first == pid; });
    if (it == running.end()) continue;
    int rank = it->second;
    running.erase(it);
    if (exitStatus(status) == 0 || failure != 0) continue;
    failure = exitStatus(status);
    if (WIFSIGNALED(status)) std::fprintf(stderr, "magpy-run: rank %d was killed by signal %d\n", rank, WTERMSIG(status));
    stopAt = std::chrono::steady_clock::now() + grace;
  }
  return failure;
}

}  // namespace magpy::replay

#include "hetplan/runtime/launch.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "hetplan/runtime/emulate.h"

extern char** environ;

namespace hetplan::runtime {
namespace {

Result<int> int_var(const std::map<std::string, std::string>& env, const std::string& name, int lo,
                    int hi) {
  const std::string& text = env.at(name);
  int v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v < lo || v > hi)
    return Error{fmt::format("environment variable {}: expected an integer in [{}, {}], got \"{}\"",
                             name, lo, hi, text)};
  return v;
}

}  // namespace

Result<int> free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Error{fmt::format("--nprocs: cannot open a socket: {}", std::strerror(errno))};
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  if (!ok) return Error{fmt::format("--nprocs: cannot find a free port: {}", std::strerror(errno))};
  return static_cast<int>(ntohs(addr.sin_port));
}

Result<RankEnv> rank_env_from(const std::map<std::string, std::string>& env) {
  RankEnv r;
  const bool has_rank = env.count("RANK") > 0, has_world = env.count("WORLD_SIZE") > 0;
  if (has_rank != has_world)
    return Error{fmt::format("environment variable {}: expected it set together with {}",
                             has_rank ? "WORLD_SIZE" : "RANK", has_rank ? "RANK" : "WORLD_SIZE")};
  if (has_world) {
    auto world = int_var(env, "WORLD_SIZE", 1, 1 << 20);
    if (!world) return world.error();
    r.world_size = *world;
    auto rank = int_var(env, "RANK", 0, r.world_size - 1);
    if (!rank) return rank.error();
    r.rank = *rank;
    r.local_rank = r.rank;
    r.serves_store = r.rank == 0;
    r.launcher_rank = r.rank;
  }
  if (env.count("LOCAL_RANK")) {
    auto local = int_var(env, "LOCAL_RANK", 0, r.world_size - 1);
    if (!local) return local.error();
    r.local_rank = *local;
  }
  if (env.count("MASTER_ADDR")) {
    r.master_addr = env.at("MASTER_ADDR");
    if (r.master_addr.empty())
      return Error{"environment variable MASTER_ADDR: expected a host name or address"};
  }
  if (env.count("MASTER_PORT")) {
    auto port = int_var(env, "MASTER_PORT", 1, 65535);
    if (!port) return port.error();
    r.master_port = *port;
  }
  if (auto agent = env.find("TORCHELASTIC_USE_AGENT_STORE");
      agent != env.end() && agent->second == "True") {
    auto attempt = env.count("TORCHELASTIC_RESTART_COUNT")
                       ? int_var(env, "TORCHELASTIC_RESTART_COUNT", 0, 1 << 20)
                       : Result<int>(0);
    if (!attempt) return attempt.error();
    r.serves_store = false;
    r.store_prefix = fmt::format("/worker/attempt_{}", *attempt);
  }
  return r;
}

Result<RankEnv> rank_env_from_environment() {
  std::map<std::string, std::string> env;
  for (const char* name : {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                           "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RESTART_COUNT"})
    if (const char* v = std::getenv(name)) env[name] = v;
  return rank_env_from(env);
}

Result<int> launch_local_workers(int nprocs, const std::vector<std::string>& args,
                                 const Emulation* emulation, WorkerFailure* failure) {
  if (nprocs < 1) return Error{"--nprocs: expected at least 1 process"};
  if (emulation && emulation->size() != nprocs)
    return Error{"--emulate: the emulation has a different number of ranks than --nprocs"};
  auto port = free_port();
  if (!port) return port.error();
  const std::string master = emulation ? emulation->address(0) : "127.0.0.1";
  // This binary by its own path, so that the workers carry its name (not "exe").
  // (A binary replaced while it runs reads as "... (deleted)": then /proc/self/exe itself.)
  std::error_code ec;
  std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec || !std::filesystem::exists(self)) self = "/proc/self/exe";
  std::vector<pid_t> pids;
  for (int rank = 0; rank < nprocs; ++rank) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      for (pid_t p : pids) ::kill(p, SIGTERM);
      return Error{fmt::format("--nprocs: cannot start worker {}: {}", rank, std::strerror(errno))};
    }
    if (pid == 0) {
      if (emulation) {
        if (!emulation->enter(rank)) {
          std::fprintf(stderr,
                       "hetplan: error: --emulate: worker %d cannot enter its namespace "
                       "and cgroup: %s\n",
                       rank, std::strerror(errno));
          ::_exit(126);
        }
        ::setenv("GLOO_SOCKET_IFNAME", Emulation::interface(), 1);
        if (emulation->paths() > 1)
          ::setenv(kPathInterfacesVariable, emulation->path_interfaces().c_str(), 1);
      }
      ::setenv("MASTER_ADDR", master.c_str(), 1);
      ::setenv("MASTER_PORT", std::to_string(*port).c_str(), 1);
      ::setenv("RANK", std::to_string(rank).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(nprocs).c_str(), 1);
      std::vector<std::string> argv_s{"hetplan"};
      argv_s.insert(argv_s.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (auto& a : argv_s) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execve(self.c_str(), argv.data(), environ);
      std::fprintf(stderr, "hetplan: error: --nprocs: cannot start worker %d: %s\n", rank,
                   std::strerror(errno));
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  // The first worker to fail is named, and the others are killed (SIGKILL: a stopped worker
  // would not act on anything gentler).
  int code = 0;
  for (std::size_t left = pids.size(); left > 0; --left) {
    int status = 0;
    const pid_t done = ::waitpid(-1, &status, 0);
    if (done < 0) break;
    const int c = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    if (c != 0 && code == 0) {
      code = c;
      const auto rank = std::find(pids.begin(), pids.end(), done) - pids.begin();
      if (failure)
        *failure = WorkerFailure{static_cast<int>(rank), WIFSIGNALED(status) != 0,
                                 WIFSIGNALED(status) ? WTERMSIG(status) : 0};
      if (WIFSIGNALED(status))
        std::fprintf(stderr,
                     "hetplan: error: rank %d (process %d) was killed by signal %d (%s); "
                     "stopping the other ranks\n",
                     static_cast<int>(rank), static_cast<int>(done), WTERMSIG(status),
                     strsignal(WTERMSIG(status)));
      else
        std::fprintf(stderr,
                     "hetplan: error: rank %d (process %d) failed (exit code %d); "
                     "stopping the other ranks\n",
                     static_cast<int>(rank), static_cast<int>(done), c);
      for (pid_t p : pids)
        if (p != done) ::kill(p, SIGKILL);
    }
  }
  return code;
}

}  // namespace hetplan::runtime

// How a worker process finds its peers: the variables torchrun sets, or a local launch of N
// worker processes on this host.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "hetplan/core/error.h"

namespace hetplan::runtime {

// One worker's place in the job. A single process without any of the variables is rank 0 of 1.
struct RankEnv {
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  // RANK as the launcher set it; `rank` is the plan's rank, which differs under
  // `hetplan run --ranks-by-device`.
  int launcher_rank = 0;
  // Whether this process serves the job's TCPStore: the worker RANK 0 names (whatever plan rank
  // it runs), unless torchrun's agent serves it (TORCHELASTIC_USE_AGENT_STORE=True, as torchrun's
  // static rendezvous sets it); then every worker is a client, its keys under store_prefix
  // ("/worker/attempt_<TORCHELASTIC_RESTART_COUNT>", as torch.distributed's workers use it).
  bool serves_store = true;
  std::string store_prefix;
};

// Reads MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, TORCHELASTIC_USE_AGENT_STORE and
// TORCHELASTIC_RESTART_COUNT from `env` (as torchrun sets them). RANK and WORLD_SIZE come together
// or not at all; errors name the variable and what was expected.
Result<RankEnv> rank_env_from(const std::map<std::string, std::string>& env);
// The same, from the process environment.
Result<RankEnv> rank_env_from_environment();

// Which worker of a local job failed first, and how.
struct WorkerFailure {
  int rank = -1;           // -1: none failed
  bool signalled = false;  // killed by a signal (a lost worker) rather than exiting with an error
  int signal = 0;
};

// A TCP port on 127.0.0.1 that the kernel considers free right now (bound to port 0, then
// released): where a local job's rendezvous store listens.
Result<int> free_port();

class Emulation;

// Starts `nprocs` copies of this executable with `args` (argv without the program name) and the
// variables of ranks 0..nprocs-1 on 127.0.0.1 and a free port, and waits for them. With an
// emulation, each worker first enters its rank's namespace and cgroup and rank 0's address is
// the master's. When a worker fails, the others are stopped. Returns the exit code to use: 0 when
// all succeeded, else the first failure's code (a worker killed by a signal counts as 1), and
// that worker in `failure` when given.
Result<int> launch_local_workers(int nprocs, const std::vector<std::string>& args,
                                 const Emulation* emulation = nullptr,
                                 WorkerFailure* failure = nullptr);

}  // namespace hetplan::runtime

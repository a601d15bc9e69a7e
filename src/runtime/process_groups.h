// Internal to the runtime: the rendezvous store and the process groups every job of worker
// processes opens: Gloo on CPU tensors, NCCL on CUDA tensors where the build has a CUDA-enabled
// libtorch (HETPLAN_WITH_NCCL).
#pragma once

#include <chrono>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "collectives.h"
#include "hetplan/core/error.h"
#include "hetplan/runtime/launch.h"

namespace hetplan::runtime::detail {

// The job's TCPStore at env.master_addr:master_port, served by the process env.serves_store
// names (torchrun's agent or RANK 0). Joining waits for every
// rank to start (loading libtorch takes seconds): at least 2 minutes, whatever `timeout` says.
c10::intrusive_ptr<c10d::Store> connect_store(const RankEnv& env,
                                              std::chrono::milliseconds timeout);

// Gloo with `timeout` per operation: an emulated rank talks through its namespace's interface
// (GLOO_SOCKET_IFNAME), a local job over loopback, any other through the host's default one.
c10::intrusive_ptr<c10d::ProcessGroupGloo::Options> gloo_options_for(
    const RankEnv& env, std::chrono::milliseconds timeout);

enum class Backend { gloo, nccl };

// Whether this build opens NCCL process groups (it was compiled against a CUDA-enabled libtorch),
// or why not.
Result<bool> nccl_available();

// Process group `rank` of `size` over `store`: Gloo (gloo_options_for), or NCCL with `timeout`
// per operation, waited for on the host (blocking wait), so that a dead peer ends the wait with
// an error as Gloo's does. NCCL in a build without it: an error saying so.
Result<c10::intrusive_ptr<Collectives>> open_group(Backend backend,
                                                   const c10::intrusive_ptr<c10d::Store>& store,
                                                   int rank, int size, const RankEnv& env,
                                                   std::chrono::milliseconds timeout);

}  // namespace hetplan::runtime::detail

// Internal to the runtime: the rendezvous store and the Gloo options every job of worker
// processes opens its process groups with.
#pragma once

#include <chrono>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "hetplan/runtime/launch.h"

namespace hetplan::runtime::detail {

// The job's TCPStore: rank 0 serves it at env.master_addr:master_port. Joining waits for every
// rank to start (loading libtorch takes seconds): at least 2 minutes, whatever `timeout` says.
c10::intrusive_ptr<c10d::Store> connect_store(const RankEnv& env,
                                              std::chrono::milliseconds timeout);

// Gloo with `timeout` per operation: an emulated rank talks through its namespace's interface
// (GLOO_SOCKET_IFNAME), a local job over loopback, any other through the host's default one.
c10::intrusive_ptr<c10d::ProcessGroupGloo::Options> gloo_options_for(
    const RankEnv& env, std::chrono::milliseconds timeout);

}  // namespace hetplan::runtime::detail

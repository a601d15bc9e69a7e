#include "process_groups.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef HETPLAN_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace hetplan::runtime::detail {

c10::intrusive_ptr<c10d::Store> connect_store(const RankEnv& env,
                                              std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions so;
  so.port = static_cast<std::uint16_t>(env.master_port);
  so.isServer = env.serves_store;
  so.numWorkers = env.world_size;
  so.waitWorkers = true;
  so.timeout = std::max(timeout, std::chrono::milliseconds(120000));
  auto store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, so);
  if (env.store_prefix.empty()) return store;
  return c10::make_intrusive<c10d::PrefixStore>(env.store_prefix, store);
}

c10::intrusive_ptr<c10d::ProcessGroupGloo::Options> gloo_options_for(
    const RankEnv& env, std::chrono::milliseconds timeout) {
  auto opts = c10d::ProcessGroupGloo::Options::create();
  opts->timeout = timeout;
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  const bool local = env.master_addr == "127.0.0.1" || env.master_addr == "localhost";
  opts->devices.push_back(ifname  ? c10d::ProcessGroupGloo::createDeviceForInterface(ifname)
                          : local ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                  : c10d::ProcessGroupGloo::createDefaultDevice());
  return opts;
}

Result<bool> nccl_available() {
#ifdef HETPLAN_WITH_NCCL
  return true;
#else
  return Error{
      "NCCL: this hetplan was built against a libtorch without CUDA (build it against a "
      "CUDA-enabled libtorch, e.g. CMAKE_PREFIX_PATH=$(python3 -c 'import torch; "
      "print(torch.utils.cmake_prefix_path)'))"};
#endif
}

Result<c10::intrusive_ptr<Collectives>> open_group(Backend backend,
                                                   const c10::intrusive_ptr<c10d::Store>& store,
                                                   int rank, int size, const RankEnv& env,
                                                   std::chrono::milliseconds timeout) {
  if (backend == Backend::gloo)
    return c10::intrusive_ptr<Collectives>(c10::make_intrusive<c10d::ProcessGroupGloo>(
        store, rank, size, gloo_options_for(env, timeout)));
#ifdef HETPLAN_WITH_NCCL
  // Blocking wait: Work::wait waits on the host for at most the timeout and then throws (both
  // names: libtorch 1.x reads the first, 2.x the second).
  ::setenv("NCCL_BLOCKING_WAIT", "1", 0);
  ::setenv("TORCH_NCCL_BLOCKING_WAIT", "1", 0);
  auto opts = c10d::ProcessGroupNCCL::Options::create();
  opts->timeout = timeout;
  return c10::intrusive_ptr<Collectives>(
      c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, opts));
#else
  (void)store, (void)rank, (void)size, (void)env, (void)timeout;
  return nccl_available().error();
#endif
}

}  // namespace hetplan::runtime::detail

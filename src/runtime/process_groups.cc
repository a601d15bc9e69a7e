#include "process_groups.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace hetplan::runtime::detail {

c10::intrusive_ptr<c10d::Store> connect_store(const RankEnv& env,
                                              std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions so;
  so.port = static_cast<std::uint16_t>(env.master_port);
  so.isServer = env.rank == 0;
  so.numWorkers = env.world_size;
  so.waitWorkers = true;
  so.timeout = std::max(timeout, std::chrono::milliseconds(120000));
  return c10::make_intrusive<c10d::TCPStore>(env.master_addr, so);
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

}  // namespace hetplan::runtime::detail

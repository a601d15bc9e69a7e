// A process group the runtime's unit tests share: Gloo over one rank on loopback (its collectives
// return what they are given).
#pragma once

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "../../src/runtime/collectives.h"

namespace hetplan::runtime::testing {

inline c10::intrusive_ptr<detail::Collectives> one_rank_group() {
  auto options = c10d::ProcessGroupGloo::Options::create();
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  return c10::make_intrusive<c10d::ProcessGroupGloo>(c10::make_intrusive<c10d::HashStore>(), 0, 1,
                                                     options);
}

}  // namespace hetplan::runtime::testing

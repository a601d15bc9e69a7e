// Internal to the runtime: the c10d class its process groups are. libtorch 1.x's Gloo and NCCL
// groups derive from c10d::ProcessGroup; 2.x's from c10d::Backend (its ProcessGroup dispatches to
// backends by device). Both offer the collectives and point-to-point calls the runtime makes.
#pragma once

#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

namespace hetplan::runtime::detail {

#if TORCH_VERSION_MAJOR >= 2
using Collectives = c10d::Backend;
#else
using Collectives = c10d::ProcessGroup;
#endif

}  // namespace hetplan::runtime::detail

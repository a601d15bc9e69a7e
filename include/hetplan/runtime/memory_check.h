// Will a run fit in the host's memory? What each rank of `hetplan run` holds, by the simulator's
// memory model for the plan carried over to the runtime's fp32 training on CPUs, against the
// memory the host (or its cgroup) has available, so that a run that cannot fit is refused with the
// numbers instead of being killed by the kernel.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hetplan/cluster/cluster.h"
#include "hetplan/core/error.h"
#include "hetplan/core/units.h"
#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"

namespace hetplan::runtime {

// One rank's host memory, in the runtime's fp32: every rank builds the whole model (4 bytes per
// parameter) and then trains its part: 4-byte gradients and Adam's two 4-byte moments for the
// parameters the simulator puts on its device (its optimizer bytes, ZeRO included), fp32
// activations (the simulator's, rescaled from the model's dtype), and the process itself
// (libtorch loaded: 180 MiB measured, `run` of a 2-layer MLP, /usr/bin/time, 2026-11-25).
struct RankMemory {
  int device = 0;
  Bytes whole_model, gradients, optimizer, activations, process;
  // Under ZeRO-2 and -3, the flat copy of the gradients the step's reduce-scatter takes once the
  // backward passes are done: what it needs beyond the activations, freed by then.
  Bytes flat_gradients;
  Bytes total() const {
    return whole_model + gradients + optimizer + activations + flat_gradients + process;
  }
};

// Per rank (in runtime::rank_devices order) of plan p (the form `run` executes), simulated on c.
Result<std::vector<RankMemory>> rank_memory(const model::Model& m, const cluster::Cluster& c,
                                            const plan::Plan& p);

// The memory this host can give new processes: /proc/meminfo's MemAvailable, lowered to what the
// cgroup (v2 memory.max - memory.current) allows when that is less. Nullopt when unreadable.
std::optional<Bytes> host_available_memory();

// The ranks' memory together, and the rank that needs the most (null for none).
struct MemoryTotals {
  Bytes all;
  const RankMemory* largest = nullptr;
};
MemoryTotals memory_totals(const std::vector<RankMemory>& ranks);

// Why `ranks` of these (all on this host) will not fit in `available`, with the numbers; empty
// when they fit.
std::string memory_shortfall(const std::vector<RankMemory>& ranks, Bytes available);

}  // namespace hetplan::runtime

// Internal to the runtime: the end of a run, shared by the stage and the op-level training loops.
#pragma once

#include <c10/core/Device.h>

#include <vector>

#include "collectives.h"
#include "hetplan/runtime/launch.h"
#include "hetplan/runtime/run.h"

namespace hetplan::runtime::detail {

// Fills res's losses (each step's sum over the ranks of own_losses, one all-reduce over `world`
// after the last step, so that no step pays a collective the plan does not have), its mean step
// time over the steps after the first `skip`, and every rank's times (each rank fills its own slot
// of a summed buffer). `world` is null for a job of one rank.
void finish_run(RunResult& res, const std::vector<double>& own_losses, const RankTimes& own,
                int steps, int skip, Collectives* world, const RankEnv& env,
                const c10::Device& dev);

}  // namespace hetplan::runtime::detail

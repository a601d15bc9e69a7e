// Internal to the simulator: op-level plans (plan::Plan::op_groups), lowered op by op.
#pragma once

#include "hetplan/sim/simulate.h"

namespace hetplan::sim::detail {

// The plan must be op-level and validated.
Result<SimResult> simulate_op_level(const model::Model& m, const cluster::Cluster& c,
                                    const plan::Plan& p, const SimOptions& opts);

}  // namespace hetplan::sim::detail

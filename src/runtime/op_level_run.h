// Internal to the runtime: op-level plans (plan::OpGroup) executed op by op. Each rank runs one
// of the plan's devices (rank k the k-th, ascending). Every rank walks the model's ops in order,
// one micro-batch after another, forward then backward: a rank in an op's group computes the op
// on its rows of the micro-batch (its group's share, rounded by largest remainder); where an op
// reads a producer in another group, the producer's devices send each consumer device the rows
// both hold, and the gradients of those rows come back in the backward walk. After the last
// micro-batch each replicated group synchronises its weights' gradients over its devices as the
// plan says: all-reduce, parameter servers (each server reduces and broadcasts its shard of the
// group's flattened gradients), or sufficient factors (the linear layers' inputs and output
// gradients are gathered and each device forms the weight gradient from them; the group's other
// weights are all-reduced). Batch normalisation covers a group's devices when the plan says
// "synced", else each device's rows. Dropout masks are drawn per sample from the seed and step,
// so a split batch draws what the whole batch would.
#pragma once

#include <c10/core/Device.h>

#include "check/op_level_layout.h"
#include "hetplan/core/error.h"
#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"
#include "hetplan/runtime/run.h"

namespace hetplan::runtime::detail {

Result<RunResult> run_op_level(const model::Model& m, const plan::Plan& p, const RunOptions& opts,
                               const RankEnv& env, const c10::Device& dev);

}  // namespace hetplan::runtime::detail

// Replicas that split every op by batch are data parallelism: the same plan with one replica per
// device. HAP writes such programs (op_overrides of "batch" for every op, uneven tp_shares) where
// data parallelism across a replica's unlike devices wins; `hetplan run` executes them in this
// form.
#pragma once

#include <optional>

#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"

namespace hetplan::plan {

// True when the plan splits every op of the model by batch (SplitKind::batch).
bool splits_every_op_by_batch(const model::Model& m, const Plan& p);

// The plan with each replica of more than one device replaced by one replica per device, each
// taking the replica's batch share times the device's tp_share (an even part when tp_shares is
// empty), and no op overrides; the same training step. Nullopt unless splits_every_op_by_batch
// and some replica has more than one device.
std::optional<Plan> as_data_parallel(const model::Model& m, const Plan& p);

// ZeRO-3 over one stage of single-device replicas is HAP's batch program with every weight
// sharded: the plan as one replica of those devices, its tp_shares the replicas' batch shares,
// every op batch_sharded (each device keeps its share of every weight, gathers it whole for each
// use, and gets its share of the summed gradient), ZeRO stage 0; the same training step. Nullopt
// unless the plan is such (zero_stage 3, one stage, two replicas or more of one device each, no
// sequence parallelism, gradients all-reduced without a grad_priority) and m is a decoder or an
// MLP (the families whose runtime modules shard weights in batch programs).
std::optional<Plan> zero3_as_batch_program(const model::Model& m, const Plan& p);

}  // namespace hetplan::plan

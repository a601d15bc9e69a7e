// What the runtime executes, free of libtorch: whether `hetplan run` runs a plan, in which form,
// and why not. `hetplan plan` asks it of every plan it may choose (without starting libtorch).
#pragma once

#include <string>
#include <vector>

#include "hetplan/core/error.h"
#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"
#include "hetplan/plan/run_form.h"

namespace hetplan::runtime {

// Why the runtime cannot execute this plan for this model, or ok. Checked before any worker
// starts. `world_size` is the number of ranks the job will have. Executed: pipelines of stages
// with uneven layer counts (GPipe, 1F1B), each stage any number of replicas with uneven batch
// shares, Megatron-style tensor parallelism with uneven shares inside a replica (and sequence
// parallelism for decoders), micro-batches, ZeRO-1 and 2 (ZeRO-3 as plan::run_form's batch
// program), full or selective recomputation, local or
// synced batch normalisation; and op-level plans of models whose every op says what it computes
// (model::OpCompute: the zoo's ResNets, VGGs and Inception-v3), op by op with each group's
// devices, shares and gradient synchronisation (all-reduce, parameter servers, sufficient
// factors), with ZeRO-1 and full or selective recomputation (plan::recompute_segments). Refused
// with the reason: sequence parallelism outside decoders, per-op split overrides under tensor
// parallelism, replicas of one stage with different tp_shares, interleaved schedules, ZeRO-3
// (where run_form leaves it),
// stage-level gradient sync other than all-reduce, model families without a runtime module (CNNs
// other than ResNets, in stage plans), CNNs under tensor parallelism, and CNN replicas left without
// a sample of some micro-batch.
Result<bool> check_executable(const model::Model& m, const plan::Plan& p, int world_size);

// Every reason check_executable would give one after another: its first, then each setting it
// refuses whatever else the plan holds (ZeRO-3, a CNN under tensor parallelism, interleaved
// schedules, gradient sync other than all-reduce in stage plans), once each. Empty when the plan
// runs.
std::vector<std::string> executable_problems(const model::Model& m, const plan::Plan& p,
                                             int world_size);

// The form in which `hetplan run` executes plan p on world_size ranks: plan::run_form's, except
// that an op-level plan whose stage-plan form the stage runtime refuses but which runs op by op
// (a VGG or an Inception, which have no stage module) stays op-level, and a stage plan of such a
// model without tensor parallelism runs op by op as plan::as_op_level_plan's plan.
plan::RunForm executable_form(const model::Model& m, const plan::Plan& p, int world_size);

// Why `hetplan run` would not execute plan p at its full scale (one rank per device it uses), in
// the form executable_form gives it: check_executable's reason, or precision_problem's on CUDA, or
// "" when it runs. What `plan`
// (unless --any-form) asks of every plan it may choose, and what `run --check` reports first.
std::string why_not_runnable(const model::Model& m, const plan::Plan& p);

// Why the runtime would not train in `precision` on CUDA or the CPU, or "" when it does: fp32,
// tf32 and bf16 run everywhere, stage plans and op by op; fp16 needs CUDA (the CPU's autocast has
// no fp16).
std::string precision_problem(model::DType precision, bool cuda);

// Whether a stage plan sends every gradient through parameter servers: every grad_sync rule says
// parameter_server and one of them matches every op ("*"; ops no rule matches are all-reduced).
// The runtime then sums them with DLCP's transport in its parameter-server form.
bool every_gradient_to_parameter_servers(const plan::Plan& p);

}  // namespace hetplan::runtime

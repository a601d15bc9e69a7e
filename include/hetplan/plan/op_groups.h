// Op-level plans: which op group each op of the model belongs to.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"

namespace hetplan::plan {

// Per model op, the index of the group of p.op_groups that names it (by full name, or by pattern
// when no group names it in full: the first such group), or -1 when none does. Names are looked
// up in a table, so a plan that lists every op by name costs linear time.
std::vector<int> group_of_ops(const Plan& p, const model::Model& m);

// The tied LM head and the table it reads ({head, table}) when `group_of_op` (per op, its group)
// puts them in different groups, which an op-level plan must not (they share their weights);
// nullopt otherwise.
std::optional<std::pair<int, int>> tied_ops_apart(const model::Model& m,
                                                  const std::vector<int>& group_of_op);

// Where the tied LM head and its table are in different groups of p that share a device and one of
// them is split, unless both are laid out alike (same_split_layout), which an op-level plan must
// not (a device holds one table: whole in a group that is not split, its vocabulary rows in a
// split one): the first such device; nullopt otherwise.
// (Each group's devices hold a copy of the table, one on a device of both groups, and every copy's
// gradient is summed over both groups' devices.)
std::optional<int> tied_groups_overlap(const Plan& p, const model::Model& m,
                                       const std::vector<int>& group_of_op);

// The message for that: op_groups names the two groups and the device.
std::string tied_overlap_message(const model::Model& m, const std::vector<int>& group_of_op,
                                 int device);

// A split group's replicas (OpGroup::replica_sizes; one when none are given), 1 for other groups;
// the replica that device j of group g belongs to (0 outside split groups); and the index of
// replica r's first device.
int replica_count(const OpGroup& g);
int replica_of(const OpGroup& g, std::size_t j);
std::size_t replica_begin(const OpGroup& g, int r);

// The indices of group g's devices in replica r, in the group's order (every device for r = 0 of
// a group that is not split).
std::vector<std::size_t> replica_members(const OpGroup& g, int r);

// The ops that recomputation `r` reruns in the backward pass, in segments: under full, the ops of
// each transformer or convolution-block layer (cost::recomputes_whole_layer) in each group; under
// selective, the attention-core ops of each layer in each group. A segment keeps only the inputs it
// reads from outside itself; just before the backward pass of its last op, the forward passes of
// all its ops run again. Each segment's ops ascend; segments come in the order of their first op.
std::vector<std::vector<int>> recompute_segments(const model::Model& m,
                                                 const std::vector<int>& group_of_op,
                                                 cost::Recompute r);

// The places of a split group whose replicas split alike (the same sizes and tensor shares, each
// replica's devices taken in increasing order, which is the runtime's rank order): per place, the
// index of its device in each replica, replica by replica. Devices at one place hold the same
// slices of the weights and sum their gradients. Empty for one replica, replicas that split
// unlike, or a group that is not split.
std::vector<std::vector<std::size_t>> replica_places(const OpGroup& g);

// Whether ZeRO-1 shards group g's optimizer states: a replicated group of several devices that all
// hold the summed gradients (not one whose parameter servers step the weights), or a split group
// of replicas that split alike (over the devices at each place). The simulator prices and the
// runtime executes ZeRO-1 on these groups; the others step their weights whole.
bool zero_shards(const OpGroup& g);

// Whether split groups a and b lay their ops out alike: the same devices in the same order, in the
// same replicas at the same batch and tensor shares. An activation passing between two such
// groups stays on its devices in the layout it has, as inside one group (a stage plan's ops
// synchronised by sufficient factors form a second group laid out as the first).
bool same_split_layout(const OpGroup& a, const OpGroup& b);

// Group g's share of each micro-batch on its device j: shares[j], 1 / devices for even shares,
// 1 for a placed group; in a split group its replica's batch share (1 for one replica: every
// device sees every sample).
double group_share(const OpGroup& g, std::size_t j);

// Group g's share of each op's tensor dimension on its device j: for a split group shares[j] (1 /
// the devices of its replica for even shares), else 1.
double tensor_share(const OpGroup& g, std::size_t j);

// Many op-level plans are stage-level plans in disguise: walking Model::layers in order, all of a
// layer's ops are in groups with the same devices and shares (a placed group: one device, share 1;
// a replicated one: each device at its group_share; a split one: all its devices at their
// tensor_share, in replicas of its replica_sizes at its batch_shares), every group of more than
// one device or replica synchronises by all_reduce, and consecutive layers on the same devices and
// shares form one stage, whose replicas are the single devices at their shares (for a split group:
// a tensor-parallel replica per replica of the group, its devices in increasing order with their
// tensor shares as tp_shares). A device may run only one such run of layers (no interleaving). Then
// the stage plan below is the same training step, and `hetplan run` executes it. (Its timing may
// differ from the op-level plan's simulation: the simulator orders an op-level plan's ops by its
// execution_order (HEFT), a stage plan's passes by its 1F1B schedule.)
//
// The equivalent stage-level plan: the same model, cluster and planner strings, global_batch,
// num_microbatches, grad_bucket_bytes, batch_norm, recomputation and ZeRO stage; schedule 1f1b, no
// op overrides or grad_sync rules (the group's all-reduce algorithm is not carried over).
// Nullopt when the plan is not op-level or not convertible; why_not_stage_plan says why.
std::optional<Plan> as_stage_plan(const Plan& p, const model::Model& m);

// The other way: a stage plan as the op-level plan of the same training step: one group per stage
// naming its layers' ops, on its replicas' devices at their batch shares (placed when the stage
// has one replica of one device; split when a replica has several: at the tp_shares, in replicas
// of the stage's replica sizes and batch shares), gradients all-reduced, but the ops that grad_sync
// synchronises by sufficient factors, which form a second group laid out as the first
// (same_split_layout for split groups), and those it synchronises by parameter servers, which
// form a third (whose first device serves, or for tensor-parallel replicas the first replica's
// devices, each for its place, as the stage's rule prices it).
// Where op overrides split a stage of tensor-parallel replicas otherwise (HAP's batch programs),
// its ops split by batch form a replicated group of every device at its replica's batch share
// times its tensor share, and those computed whole (`replicate`) a group of one device per replica
// (its largest tensor share) at the replica's batch share. The same model, cluster and planner
// strings, global_batch, num_microbatches, grad_bucket_bytes, batch_norm, recomputation
// (recompute_segments; a fused attention core without recomputation becomes selective: its ops
// one by one keep no more than the fused kernel) and ZeRO stage, execution order heft. Nullopt for
// an op-level plan, grad_sync rules of `none`, weights sharded by batch_sharded, sequence
// parallelism or ZeRO-2/3.
std::optional<Plan> as_op_level_plan(const Plan& p, const model::Model& m);

// Why as_op_level_plan gives nullopt ("sequence_parallel: sequence parallelism has no op-level
// form");
// empty when it converts.
std::string why_not_op_level_plan(const Plan& p, const model::Model& m);

// Why as_stage_plan gives nullopt ("layer 2 (layers.1): op \"layers.1.fc\" runs on devices {0}
// but op \"layers.1.act\" on {1}"); empty when it converts.
std::string why_not_stage_plan(const Plan& p, const model::Model& m);

}  // namespace hetplan::plan

// as_stage_plan: op-level plans that are stage-level plans in disguise.
#include <gtest/gtest.h>

#include "hetplan/plan/op_groups.h"
#include "hetplan/plan/validate.h"
#include "plan_fixtures.h"

namespace hetplan::plan {
namespace {

using testing::tiny_cluster;
using testing::tiny_gpt;

OpGroup replicated(std::vector<std::string> ops, std::vector<int> devices,
                   std::vector<double> shares = {}, SyncMethod sync = SyncMethod::all_reduce) {
  OpGroup g;
  g.ops = std::move(ops);
  g.devices = std::move(devices);
  g.shares = std::move(shares);
  g.sync = sync;
  return g;
}

OpGroup placed(std::vector<std::string> ops, int device) {
  OpGroup g;
  g.ops = std::move(ops);
  g.devices = {device};
  g.mode = GroupMode::place;
  return g;
}

// tiny_gpt(2): embedding, layers.0, layers.1, head on 8 devices.
class AsStagePlan : public ::testing::Test {
 protected:
  model::Model model_ = tiny_gpt(2);
  cluster::Cluster cluster_ = tiny_cluster(8);
  Plan plan_ = [] {
    Plan p;
    p.model = "tiny-gpt";
    p.cluster = "tiny-cluster";
    p.planner = "tag";
    p.global_batch = 16;
    p.num_microbatches = 2;
    p.grad_bucket_bytes = 1e6;
    return p;
  }();
  std::string validate(const Plan& p) const {
    auto r = validate_plan(p, model_, cluster_, "plan.json");
    return r.ok() ? std::string("ok") : r.error().message;
  }
};

// A split group of whole layers is a stage of one tensor-parallel replica: its devices in
// increasing order with their tensor shares (none when even).
TEST_F(AsStagePlan, SplitGroupsAreTensorParallelReplicas) {
  OpGroup tensor;
  tensor.ops = {"embedding.*", "layers.0.*"};
  tensor.devices = {3, 1};
  tensor.shares = {0.25, 0.75};
  tensor.mode = GroupMode::split;
  plan_.op_groups = {tensor, replicated({"layers.1.*", "head.*"}, {4, 5})};
  ASSERT_EQ(validate(plan_), "ok");
  auto s = as_stage_plan(plan_, model_);
  ASSERT_TRUE(s) << why_not_stage_plan(plan_, model_);
  ASSERT_EQ(s->stages.size(), 2u);
  ASSERT_EQ(s->stages[0].replicas.size(), 1u);
  EXPECT_EQ(s->stages[0].replicas[0].devices, (std::vector<int>{1, 3}));
  EXPECT_EQ(s->stages[0].replicas[0].tp_shares, (std::vector<double>{0.75, 0.25}));
  EXPECT_DOUBLE_EQ(s->stages[0].replicas[0].batch_share, 1.0);
  EXPECT_EQ(s->stages[1].replicas.size(), 2u);
  EXPECT_EQ(validate(*s), "ok");
  plan_.op_groups[0].shares.clear();
  s = as_stage_plan(plan_, model_);
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->stages[0].replicas[0].tp_shares.empty());
  // Half a layer split, the other half replicated: not a stage plan.
  plan_.op_groups = {tensor, replicated({"layers.1.*", "head.*"}, {4, 5})};
  plan_.op_groups[0].ops = {"embedding.*", "layers.0.attn*"};
  plan_.op_groups[1].ops = {"layers.0.norm*", "layers.0.mlp.*", "layers.1.*", "head.*"};
  ASSERT_EQ(validate(plan_), "ok");
  EXPECT_NE(why_not_stage_plan(plan_, model_).find("at tensor shares 0.75/0.25"), std::string::npos)
      << why_not_stage_plan(plan_, model_);
}

TEST_F(AsStagePlan, DataParallelIsOneStageOfOneDeviceReplicas) {
  plan_.op_groups = {replicated({"*"}, {2, 0, 1}, {0.25, 0.5, 0.25})};
  ASSERT_EQ(validate(plan_), "ok");
  EXPECT_EQ(why_not_stage_plan(plan_, model_), "");
  auto s = as_stage_plan(plan_, model_);
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->is_op_level());
  EXPECT_EQ(s->model, "tiny-gpt");
  EXPECT_EQ(s->cluster, "tiny-cluster");
  EXPECT_EQ(s->planner, "tag");
  EXPECT_EQ(s->global_batch, 16);
  EXPECT_EQ(s->num_microbatches, 2);
  EXPECT_EQ(s->grad_bucket_bytes, 1e6);
  EXPECT_EQ(s->schedule, Schedule::one_f_one_b);
  ASSERT_EQ(s->stages.size(), 1u);
  EXPECT_EQ(s->stages[0].first_layer, 0);
  EXPECT_EQ(s->stages[0].num_layers, 4);
  EXPECT_EQ(s->stages[0].replicas,
            (std::vector<Replica>{Replica{{0}, {}, 0.5}, Replica{{1}, {}, 0.25},
                                  Replica{{2}, {}, 0.25}}));
  EXPECT_EQ(validate(*s), "ok");
}

// The other way: a pipeline of one-device replicas becomes one group per stage (a placed one for
// a single replica), valid, and converts back to itself.
TEST_F(AsStagePlan, StagePlansOfOneDeviceReplicasBecomeOpLevelPlansAndBack) {
  plan_.op_groups = {placed({"embedding.*"}, 3), placed({"layers.0.*"}, 3),
                     replicated({"layers.1.*", "head.*"}, {4, 5}, {0.75, 0.25})};
  auto stages = as_stage_plan(plan_, model_);
  ASSERT_TRUE(stages) << why_not_stage_plan(plan_, model_);
  auto ops = as_op_level_plan(*stages, model_);
  ASSERT_TRUE(ops);
  ASSERT_EQ(ops->op_groups.size(), 2u);
  EXPECT_EQ(ops->op_groups[0].mode, GroupMode::place);
  EXPECT_EQ(ops->op_groups[0].devices, std::vector<int>{3});
  EXPECT_EQ(ops->op_groups[1].mode, GroupMode::replicate);
  EXPECT_EQ(ops->op_groups[1].devices, (std::vector<int>{4, 5}));
  EXPECT_EQ(ops->op_groups[1].shares, (std::vector<double>{0.75, 0.25}));
  EXPECT_EQ(ops->op_groups[1].sync, SyncMethod::all_reduce);
  EXPECT_EQ(ops->global_batch, 16);
  EXPECT_EQ(ops->num_microbatches, 2);
  EXPECT_EQ(validate(*ops), "ok");
  // Every op named once, in its stage's group.
  const auto group = group_of_ops(*ops, model_);
  for (std::size_t i = 0; i < model_.ops.size(); ++i)
    EXPECT_EQ(group[i], model_.layer_of(static_cast<int>(i)) < 2 ? 0 : 1) << model_.ops[i].name;
  auto back = as_stage_plan(*ops, model_);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->stages, stages->stages);
  // A stage of one tensor-parallel replica becomes a split group at its tp_shares, and back.
  Plan split = *stages;
  split.stages[0].replicas = {Replica{{3, 7}, {0.75, 0.25}, 1.0}};
  auto split_ops = as_op_level_plan(split, model_);
  ASSERT_TRUE(split_ops);
  EXPECT_EQ(split_ops->op_groups[0].mode, GroupMode::split);
  EXPECT_EQ(split_ops->op_groups[0].devices, (std::vector<int>{3, 7}));
  EXPECT_EQ(split_ops->op_groups[0].shares, (std::vector<double>{0.75, 0.25}));
  EXPECT_EQ(validate(*split_ops), "ok");
  auto split_back = as_stage_plan(*split_ops, model_);
  ASSERT_TRUE(split_back) << why_not_stage_plan(*split_ops, model_);
  EXPECT_EQ(split_back->stages, split.stages);
  // A stage's ops synchronised by sufficient factors form a second group on its devices.
  Plan sfb = *stages;
  sfb.grad_sync = {GradSync{"head.*", SyncMethod::sufficient_factor}};
  auto sfb_ops = as_op_level_plan(sfb, model_);
  ASSERT_TRUE(sfb_ops);
  ASSERT_EQ(sfb_ops->op_groups.size(), 3u);
  EXPECT_EQ(sfb_ops->op_groups[1].sync, SyncMethod::all_reduce);
  EXPECT_EQ(sfb_ops->op_groups[2].sync, SyncMethod::sufficient_factor);
  EXPECT_EQ(sfb_ops->op_groups[2].devices, (std::vector<int>{4, 5}));
  EXPECT_EQ(sfb_ops->op_groups[2].shares, (std::vector<double>{0.75, 0.25}));
  for (const auto& op : sfb_ops->op_groups[2].ops) EXPECT_EQ(op.rfind("head.", 0), 0u) << op;
  EXPECT_EQ(validate(*sfb_ops), "ok");
  // Those it synchronises by a parameter server form a third, whose first device serves.
  sfb.grad_sync = {GradSync{"head.lm", SyncMethod::sufficient_factor},
                   GradSync{"head.*", SyncMethod::parameter_server}};
  auto ps_ops = as_op_level_plan(sfb, model_);
  ASSERT_TRUE(ps_ops) << why_not_op_level_plan(sfb, model_);
  ASSERT_EQ(ps_ops->op_groups.size(), 4u);
  EXPECT_EQ(ps_ops->op_groups[2].ops, std::vector<std::string>{"head.lm"});
  EXPECT_EQ(ps_ops->op_groups[3].sync, SyncMethod::parameter_server);
  EXPECT_EQ(ps_ops->op_groups[3].ops, (std::vector<std::string>{"head.norm", "head.loss"}));
  EXPECT_EQ(ps_ops->op_groups[3].devices, (std::vector<int>{4, 5}));
  EXPECT_EQ(ps_ops->op_groups[3].shares, (std::vector<double>{0.75, 0.25}));
  EXPECT_TRUE(ps_ops->op_groups[3].servers.empty());
  EXPECT_EQ(validate(*ps_ops), "ok");
  sfb.grad_sync = {GradSync{"head.*", SyncMethod::none}};
  EXPECT_EQ(why_not_op_level_plan(sfb, model_),
            "grad_sync[0].method: none has no op-level form for a stage's rules");
  // Replicas of several devices beside others: a split group of replicas, which converts back.
  Plan tp = *stages;
  tp.stages[1].replicas[0].devices = {4, 6};
  tp.stages[1].replicas[0].tp_shares = {0.25, 0.75};
  auto tp_ops = as_op_level_plan(tp, model_);
  ASSERT_TRUE(tp_ops);
  ASSERT_EQ(tp_ops->op_groups.size(), 2u);
  const OpGroup& replicas = tp_ops->op_groups[1];
  EXPECT_EQ(replicas.mode, GroupMode::split);
  EXPECT_EQ(replicas.devices, (std::vector<int>{4, 6, 5}));
  EXPECT_EQ(replicas.replica_sizes, (std::vector<int>{2, 1}));
  EXPECT_EQ(replicas.batch_shares, (std::vector<double>{0.75, 0.25}));
  EXPECT_EQ(replicas.shares, (std::vector<double>{0.25, 0.75, 1.0}));
  EXPECT_EQ(validate(*tp_ops), "ok");
  auto tp_back = as_stage_plan(*tp_ops, model_);
  ASSERT_TRUE(tp_back) << why_not_stage_plan(*tp_ops, model_);
  EXPECT_EQ(tp_back->stages, tp.stages);
  // With sufficient factors there, the factored ops form a second split group laid out as the
  // first, which does not convert back (a stage plan's replicas all-reduce).
  tp.grad_sync = {GradSync{"head.*", SyncMethod::sufficient_factor}};
  auto tp_sfb = as_op_level_plan(tp, model_);
  ASSERT_TRUE(tp_sfb);
  ASSERT_EQ(tp_sfb->op_groups.size(), 3u);
  EXPECT_EQ(tp_sfb->op_groups[1].sync, SyncMethod::all_reduce);
  EXPECT_EQ(tp_sfb->op_groups[2].sync, SyncMethod::sufficient_factor);
  EXPECT_TRUE(same_split_layout(tp_sfb->op_groups[1], tp_sfb->op_groups[2]));
  for (const auto& op : tp_sfb->op_groups[2].ops) EXPECT_EQ(op.rfind("head.", 0), 0u) << op;
  for (const auto& op : tp_sfb->op_groups[1].ops) EXPECT_NE(op.rfind("head.", 0), 0u) << op;
  EXPECT_EQ(validate(*tp_sfb), "ok");
  EXPECT_FALSE(as_stage_plan(*tp_sfb, model_));
  // With parameter servers there, a second split group laid out as the first that serves.
  tp.grad_sync = {GradSync{"layers.1.*", SyncMethod::parameter_server}};
  auto tp_ps = as_op_level_plan(tp, model_);
  ASSERT_TRUE(tp_ps) << why_not_op_level_plan(tp, model_);
  ASSERT_EQ(tp_ps->op_groups.size(), 3u);
  EXPECT_EQ(tp_ps->op_groups[2].sync, SyncMethod::parameter_server);
  EXPECT_EQ(tp_ps->op_groups[2].mode, GroupMode::split);
  EXPECT_TRUE(same_split_layout(tp_ps->op_groups[1], tp_ps->op_groups[2]));
  for (const auto& op : tp_ps->op_groups[2].ops) EXPECT_EQ(op.rfind("layers.1.", 0), 0u) << op;
  EXPECT_EQ(validate(*tp_ps), "ok");
  // ZeRO-1 carries over (a group's devices shard Adam's states as a stage's replicas do); 2 not.
  Plan zero = *stages;
  zero.zero_stage = 1;
  auto zero_ops = as_op_level_plan(zero, model_);
  ASSERT_TRUE(zero_ops);
  EXPECT_EQ(zero_ops->zero_stage, 1);
  EXPECT_EQ(validate(*zero_ops), "ok");
  zero.zero_stage = 2;
  EXPECT_FALSE(as_op_level_plan(zero, model_));
  // Recomputation carries over both ways (the op-level plan reruns the same layers).
  Plan recompute = *stages;
  recompute.recompute = cost::Recompute::full;
  auto recompute_ops = as_op_level_plan(recompute, model_);
  ASSERT_TRUE(recompute_ops) << why_not_op_level_plan(recompute, model_);
  EXPECT_EQ(recompute_ops->recompute, cost::Recompute::full);
  EXPECT_EQ(validate(*recompute_ops), "ok");
  auto recompute_back = as_stage_plan(*recompute_ops, model_);
  ASSERT_TRUE(recompute_back);
  EXPECT_EQ(recompute_back->recompute, cost::Recompute::full);
  Plan sp = *stages;
  sp.sequence_parallel = true;
  EXPECT_EQ(why_not_op_level_plan(sp, model_),
            "sequence_parallel: sequence parallelism has no op-level form");
  EXPECT_EQ(why_not_op_level_plan(*stages, model_), "");
  EXPECT_FALSE(as_op_level_plan(plan_, model_));  // already op-level
}

// HAP's batch program as an op-level plan: in a stage of tensor-parallel replicas, the ops split by
// batch run on every device at its replica's batch share times its tensor share, those computed
// whole on one device per replica (its largest tensor share), those split by tensor in a split
// group of the replicas.
TEST_F(AsStagePlan, BatchProgramsBecomeAGroupPerSplit) {
  Plan hap = plan_;
  Stage st;
  st.first_layer = 0;
  st.num_layers = 4;
  st.replicas = {Replica{{0, 1}, {0.25, 0.75}, 0.5}, Replica{{2, 3}, {}, 0.5}};
  hap.stages = {st};
  hap.op_overrides = {OpOverride{"embedding.*", SplitKind::replicate},
                      OpOverride{"layers.0.*", SplitKind::batch},
                      OpOverride{"head.*", SplitKind::replicate}};
  auto ops = as_op_level_plan(hap, model_);
  ASSERT_TRUE(ops);
  ASSERT_EQ(ops->op_groups.size(), 3u);
  const OpGroup& batch = ops->op_groups[0];
  EXPECT_EQ(batch.mode, GroupMode::replicate);
  EXPECT_EQ(batch.devices, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(batch.shares, (std::vector<double>{0.125, 0.375, 0.25, 0.25}));
  const OpGroup& whole = ops->op_groups[1];
  EXPECT_EQ(whole.mode, GroupMode::replicate);
  EXPECT_EQ(whole.devices, (std::vector<int>{1, 2}));
  EXPECT_EQ(whole.shares, (std::vector<double>{0.5, 0.5}));
  const OpGroup& tensor = ops->op_groups[2];
  EXPECT_EQ(tensor.mode, GroupMode::split);
  EXPECT_EQ(tensor.replica_sizes, (std::vector<int>{2, 2}));
  const auto group = group_of_ops(*ops, model_);
  for (std::size_t i = 0; i < model_.ops.size(); ++i) {
    const int layer = model_.layer_of(static_cast<int>(i));
    EXPECT_EQ(group[i], layer == 1 ? 0 : layer == 2 ? 2 : 1) << model_.ops[i].name;
  }
  EXPECT_EQ(validate(*ops), "ok");
  // One replica: the ops computed whole are placed on its device of the largest share.
  Plan one = hap;
  one.stages[0].replicas = {Replica{{0, 1}, {0.25, 0.75}, 1.0}};
  ops = as_op_level_plan(one, model_);
  ASSERT_TRUE(ops);
  EXPECT_EQ(ops->op_groups[1].mode, GroupMode::place);
  EXPECT_EQ(ops->op_groups[1].devices, std::vector<int>{1});
  // Not with weights sharded by batch_sharded.
  Plan sharded = hap;
  sharded.op_overrides[1].split = SplitKind::batch_sharded;
  EXPECT_TRUE(as_op_level_plan(sharded, model_));  // (no weights to shard)
  model_.ops[static_cast<std::size_t>(model_.layers[1].first_op)].params = 1000;
  EXPECT_FALSE(as_op_level_plan(sharded, model_));
  EXPECT_NE(why_not_op_level_plan(sharded, model_).find("shards its weights (batch_sharded)"),
            std::string::npos);
  // Ops split by batch that grad_sync sums by sufficient factors: a second group on the same
  // devices at the same shares.
  Plan factors = hap;
  factors.grad_sync = {GradSync{"layers.0.*", SyncMethod::sufficient_factor}};
  ops = as_op_level_plan(factors, model_);
  ASSERT_TRUE(ops);
  ASSERT_EQ(ops->op_groups.size(), 3u);  // (the tiny model's layer has no ops left to reduce)
  EXPECT_EQ(ops->op_groups[0].sync, SyncMethod::sufficient_factor);
  EXPECT_EQ(ops->op_groups[0].shares, (std::vector<double>{0.125, 0.375, 0.25, 0.25}));
}

TEST_F(AsStagePlan, EvenSharesWhenTheGroupHasNone) {
  plan_.op_groups = {replicated({"*"}, {0, 1, 2, 3})};
  auto s = as_stage_plan(plan_, model_);
  ASSERT_TRUE(s) << why_not_stage_plan(plan_, model_);
  ASSERT_EQ(s->stages.size(), 1u);
  ASSERT_EQ(s->stages[0].replicas.size(), 4u);
  for (const Replica& r : s->stages[0].replicas) EXPECT_DOUBLE_EQ(r.batch_share, 0.25);
  EXPECT_EQ(validate(*s), "ok");
}

TEST_F(AsStagePlan, LayerAlignedGroupsArePipelineStages) {
  // Adjacent groups on the same device join one stage; a replicated group is a stage of replicas.
  plan_.op_groups = {placed({"embedding.*"}, 3), placed({"layers.0.*"}, 3),
                     replicated({"layers.1.*", "head.*"}, {5, 4}, {0.25, 0.75})};
  ASSERT_EQ(validate(plan_), "ok");
  auto s = as_stage_plan(plan_, model_);
  ASSERT_TRUE(s) << why_not_stage_plan(plan_, model_);
  ASSERT_EQ(s->stages.size(), 2u);
  EXPECT_EQ(s->stages[0], (Stage{0, 2, {Replica{{3}, {}, 1.0}}}));
  EXPECT_EQ(s->stages[1], (Stage{2, 2, {Replica{{4}, {}, 0.75}, Replica{{5}, {}, 0.25}}}));
  EXPECT_EQ(validate(*s), "ok");
}

TEST_F(AsStagePlan, OneDeviceReplicatedGroupIsAPlacedOne) {
  plan_.op_groups = {
      replicated({"embedding.*", "layers.0.*"}, {1}, {}, SyncMethod::parameter_server),
      placed({"layers.1.*"}, 1), placed({"head.*"}, 2)};
  auto s = as_stage_plan(plan_, model_);
  ASSERT_TRUE(s) << why_not_stage_plan(plan_, model_);
  ASSERT_EQ(s->stages.size(), 2u);
  EXPECT_EQ(s->stages[0], (Stage{0, 3, {Replica{{1}, {}, 1.0}}}));
  EXPECT_EQ(s->stages[1], (Stage{3, 1, {Replica{{2}, {}, 1.0}}}));
  EXPECT_EQ(validate(*s), "ok");
}

TEST_F(AsStagePlan, ALayerSplitAcrossDevicesIsNotConvertible) {
  plan_.op_groups = {placed({"embedding.*", "layers.0.norm1", "layers.0.attn.*"}, 0),
                     placed({"layers.0.norm2", "layers.0.mlp.*", "layers.1.*", "head.*"}, 1)};
  ASSERT_EQ(validate(plan_), "ok");
  EXPECT_FALSE(as_stage_plan(plan_, model_));
  EXPECT_EQ(why_not_stage_plan(plan_, model_),
            "layer 1 (layers.0) is split across op groups: op \"layers.0.norm1\" runs on device 0 "
            "but op \"layers.0.norm2\" on device 1 (a stage holds whole layers)");
}

TEST_F(AsStagePlan, ALayerOnGroupsOfOtherSharesIsNotConvertible) {
  plan_.op_groups = {replicated({"embedding.*", "layers.*", "head.norm"}, {0, 1}),
                     replicated({"head.lm", "head.loss"}, {0, 1}, {0.75, 0.25})};
  ASSERT_EQ(validate(plan_), "ok");
  EXPECT_FALSE(as_stage_plan(plan_, model_));
  EXPECT_EQ(why_not_stage_plan(plan_, model_),
            "layer 3 (head) is split across op groups: op \"head.norm\" runs on devices {0,1} at "
            "shares 0.5/0.5 but op \"head.lm\" on devices {0,1} at shares 0.75/0.25 (a stage holds "
            "whole layers)");
}

TEST_F(AsStagePlan, AParameterServerGroupIsNotConvertible) {
  plan_.op_groups = {placed({"embedding.*"}, 0),
                     replicated({"layers.*", "head.*"}, {1, 2}, {}, SyncMethod::parameter_server)};
  ASSERT_EQ(validate(plan_), "ok");
  EXPECT_FALSE(as_stage_plan(plan_, model_));
  EXPECT_EQ(why_not_stage_plan(plan_, model_),
            "op_groups[1] synchronises its gradients by parameter_server; a stage plan's replicas "
            "all-reduce them");
}

TEST_F(AsStagePlan, ADeviceOnTwoNonAdjacentStagesIsNotConvertible) {
  plan_.op_groups = {placed({"embedding.*", "head.*"}, 0), placed({"layers.*"}, 1)};
  ASSERT_EQ(validate(plan_), "ok");
  EXPECT_FALSE(as_stage_plan(plan_, model_));
  EXPECT_EQ(why_not_stage_plan(plan_, model_),
            "device 0 runs layer 0 (embedding) and layer 3 (head), which are not adjacent (a "
            "stage plan runs one stage per device)");
}

TEST_F(AsStagePlan, AStageLevelPlanIsNotOpLevel) {
  Plan p = testing::two_stage_plan();
  EXPECT_FALSE(as_stage_plan(p, tiny_gpt(4)));
  EXPECT_EQ(why_not_stage_plan(p, tiny_gpt(4)), "the plan is not op-level (it has no op_groups)");
}

// Recomputation's segments: under full, each transformer layer's ops in each group (a layer cut
// between two groups gives two); under selective, each layer's attention-core ops in each group;
// embeddings and heads never.
TEST_F(AsStagePlan, RecomputeSegmentsAreALayersOpsInOneGroup) {
  // Ops: embedding 0-1, layers.0 2-7, layers.1 8-13, head 14-16; layers.0 cut after attn.proj.
  std::vector<int> group(model_.ops.size(), 1);
  for (int op = 0; op <= 4; ++op) group[static_cast<std::size_t>(op)] = 0;
  using Segments = std::vector<std::vector<int>>;
  EXPECT_EQ(recompute_segments(model_, group, cost::Recompute::none), Segments{});
  EXPECT_EQ(recompute_segments(model_, group, cost::Recompute::full),
            (Segments{{2, 3, 4}, {5, 6, 7}, {8, 9, 10, 11, 12, 13}}));
  EXPECT_EQ(recompute_segments(model_, group, cost::Recompute::selective), Segments{});
  model::Model cores = model_;
  for (int op : {3, 4, 9}) cores.ops[static_cast<std::size_t>(op)].attention_core = true;
  group[4] = 2;  // layers.0's cores in two groups
  EXPECT_EQ(recompute_segments(cores, group, cost::Recompute::selective),
            (Segments{{3}, {4}, {9}}));
  EXPECT_EQ(recompute_segments(cores, group, cost::Recompute::full),
            (Segments{{2, 3}, {4}, {5, 6, 7}, {8, 9, 10, 11, 12, 13}}));
}

}  // namespace
}  // namespace hetplan::plan

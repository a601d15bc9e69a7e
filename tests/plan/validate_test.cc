#include "hetplan/plan/validate.h"

#include <gtest/gtest.h>

#include "hetplan/plan/op_groups.h"
#include "plan_fixtures.h"

namespace hetplan::plan {
namespace {

using testing::tiny_cluster;
using testing::tiny_gpt;
using testing::two_stage_plan;

std::string error_of(const Plan& p, const model::Model& m, const cluster::Cluster& c) {
  auto r = validate_plan(p, m, c, "plan.json");
  return r.ok() ? std::string("ok") : r.error().message;
}

class Validate : public ::testing::Test {
 protected:
  model::Model model_ = tiny_gpt(4);  // embedding, layers.0..3, head: 6 layers, 8 heads
  cluster::Cluster cluster_ = tiny_cluster(8);
  Plan plan_ = two_stage_plan();
  std::string check() const { return error_of(plan_, model_, cluster_); }
};

TEST_F(Validate, ExamplePlanIsValid) { EXPECT_EQ(check(), "ok"); }

TEST_F(Validate, UnassignedTrailingLayers) {
  plan_.stages[1].num_layers = 1;
  EXPECT_EQ(check(),
            "plan.json: stages: layers 4..5 (layers.3 ... head) are not assigned to any stage");
}

TEST_F(Validate, UnassignedSingleLayerInAGap) {
  plan_.stages[1].first_layer = 4;
  plan_.stages[1].num_layers = 2;
  EXPECT_EQ(check(), "plan.json: stages: layer 3 (layers.2) are not assigned to any stage");
}

TEST_F(Validate, OverlappingStages) {
  plan_.stages[1].first_layer = 2;
  plan_.stages[1].num_layers = 4;
  EXPECT_EQ(check(),
            "plan.json: stages[1].first_layer: layer 2 (layers.1) are already assigned to an "
            "earlier stage "
            "(expected stages in model order starting at layer 3)");
}

TEST_F(Validate, StagePastTheLastLayer) {
  plan_.stages[1].num_layers = 4;
  EXPECT_EQ(
      check(),
      "plan.json: stages[1].num_layers: layers 3..6 run past the model's last layer 5 (head)");
}

TEST_F(Validate, FirstLayerOutOfRange) {
  plan_.stages[1].first_layer = 9;
  EXPECT_EQ(check(),
            "plan.json: stages[1].first_layer: expected a layer index in 0..5 (the model has 6 "
            "layers), got 9");
}

TEST_F(Validate, DeviceDoesNotExist) {
  plan_.stages[1].replicas[0].devices[3] = 40;
  EXPECT_EQ(check(),
            "plan.json: stages[1].replicas[0].devices[3]: device 40 does not exist (the cluster "
            "has 8 devices)");
}

TEST_F(Validate, DeviceTwiceInAReplica) {
  plan_.stages[1].replicas[0].devices[2] = 4;
  EXPECT_EQ(check(),
            "plan.json: stages[1].replicas[0].devices[2]: device 4 appears twice in the replica "
            "(also at devices[0])");
}

TEST_F(Validate, TpSharesSizeMismatch) {
  plan_.stages[0].replicas[0].tp_shares = {0.5, 0.25, 0.25};
  EXPECT_EQ(check(),
            "plan.json: stages[0].replicas[0].tp_shares: expected 2 shares (one per device) or "
            "none, got 3");
}

TEST_F(Validate, TpSharesNonPositive) {
  plan_.stages[0].replicas[0].tp_shares = {1.0, 0.0};
  EXPECT_EQ(check(), "plan.json: stages[0].replicas[0].tp_shares[1]: expected a number > 0");
}

TEST_F(Validate, TpSharesNotSummingToOne) {
  plan_.stages[0].replicas[0].tp_shares = {0.6, 0.5};
  EXPECT_EQ(check(),
            "plan.json: stages[0].replicas[0].tp_shares: expected shares summing to 1, got 1.1");
}

TEST_F(Validate, TpSharesWithinTolerance) {
  plan_.stages[0].replicas[0].tp_shares = {0.6 + 4e-7, 0.4};
  EXPECT_EQ(check(), "ok");
}

TEST_F(Validate, BatchSharesNotSummingToOne) {
  plan_.stages[0].replicas[1].batch_share = 0.25;
  EXPECT_EQ(check(),
            "plan.json: stages[0].replicas: expected batch_share values summing to 1, got 0.75");
}

TEST_F(Validate, BatchShareOutOfRange) {
  plan_.stages[1].replicas[0].batch_share = 0;
  EXPECT_EQ(check(), "plan.json: stages[1].replicas[0].batch_share: expected a number in (0, 1]");
}

TEST_F(Validate, EvenTpMustDivideHeads) {
  model_ = tiny_gpt(4, 6, 6);  // 6 heads; stage 1 has tp = 4
  plan_.stages[1].replicas[0].tp_shares.clear();
  EXPECT_EQ(check(),
            "plan.json: stages[1].replicas[0].devices: tensor-parallel degree 4 does not divide "
            "the 6 attention "
            "heads (expected a divisor of 6 for an even split)");
}

TEST_F(Validate, EvenTpMustDivideKvHeads) {
  model_ = tiny_gpt(4, 8, 2);
  plan_.stages[1].replicas[0].tp_shares.clear();
  EXPECT_EQ(check(),
            "plan.json: stages[1].replicas[0].devices: tensor-parallel degree 4 does not divide "
            "the 2 key/value "
            "heads (expected a divisor of 2 for an even split)");
}

TEST_F(Validate, EvenTpMustDivideExperts) {
  model_ = tiny_gpt(4, 8, 8, 6);
  plan_.stages[1].replicas[0].tp_shares.clear();
  EXPECT_EQ(check(),
            "plan.json: stages[1].replicas[0].devices: tensor-parallel degree 4 does not divide "
            "the 6 experts "
            "(expected a divisor of 6 for an even split)");
}

TEST_F(Validate, UnevenTpNeedsOnlyAHeadPerDevice) {
  model_ = tiny_gpt(4, 6, 6);
  EXPECT_EQ(check(), "ok");  // stage 1 has uneven shares over 4 devices; 4 <= 6 heads
  model_ = tiny_gpt(4, 3, 3);
  plan_.stages[0].replicas[1].devices = {2};  // tp = 1 there
  EXPECT_EQ(check(),
            "plan.json: stages[1].replicas[0].devices: tensor-parallel degree 4 exceeds the 3 "
            "attention heads "
            "(expected at most one device per head)");
}

TEST_F(Validate, EqualSharesCountAsEven) {
  model_ = tiny_gpt(4, 6, 6);
  plan_.stages[1].replicas[0].tp_shares = {0.25, 0.25, 0.25, 0.25};
  EXPECT_NE(check().find("does not divide the 6 attention heads"), std::string::npos);
}

TEST_F(Validate, OverlappingDeviceSets) {
  plan_.stages[1].replicas[0].devices = {3, 4, 5, 6};
  EXPECT_EQ(check(),
            "plan.json: stages[1].replicas[0].devices: device set {3,4,5,6} overlaps {2,3} of "
            "stages[0].replicas[1] "
            "(expected device sets that are equal or disjoint)");
}

TEST_F(Validate, ReplicasOfAStageOnTheSameDevices) {
  plan_.stages[0].replicas[1].devices = {1, 0};
  plan_.stages[0].replicas[1].tp_shares = {};
  EXPECT_EQ(check(),
            "plan.json: stages[0].replicas[1].devices: uses the same devices as replicas[0] of the "
            "same stage "
            "(expected disjoint replicas)");
}

TEST_F(Validate, StagesSharingDevicesNeedInterleaved) {
  plan_.stages[1].replicas = plan_.stages[0].replicas;
  EXPECT_EQ(check(),
            "plan.json: stages[1]: shares device 0 with stages[0]; only the interleaved schedule "
            "runs several "
            "stages on the same devices");
}

// Four stages cycling over two device groups.
Plan interleaved_plan() {
  Plan p;
  p.global_batch = 8;
  p.num_microbatches = 4;
  p.schedule = Schedule::interleaved;
  for (int s = 0; s < 4; ++s) {
    Stage st;
    st.first_layer = s == 0 ? 0 : s + 1;
    st.num_layers = s == 0 ? 2 : (s == 3 ? 2 : 1);
    int base = (s % 2) * 2;
    st.replicas = {Replica{{base, base + 1}, {}, 1.0}};
    p.stages.push_back(st);
  }
  return p;
}

TEST_F(Validate, InterleavedCyclesThroughGroups) {
  plan_ = interleaved_plan();
  EXPECT_EQ(check(), "ok");
  plan_.num_microbatches = 3;
  EXPECT_EQ(check(),
            "plan.json: num_microbatches: expected a multiple of the 2 pipeline device groups for "
            "the interleaved "
            "schedule, got 3");
}

TEST_F(Validate, InterleavedOutOfOrder) {
  plan_ = interleaved_plan();
  plan_.stages[2].replicas[0].devices = {2, 3};
  plan_.stages[3].replicas[0].devices = {0, 1};
  EXPECT_EQ(check(),
            "plan.json: stages[2]: expected the devices of stages[0] (the interleaved schedule "
            "cycles through the "
            "2 device groups in order)");
}

TEST_F(Validate, InterleavedPartialReuse) {
  plan_ = interleaved_plan();
  plan_.stages[2].replicas = {Replica{{0, 1}, {}, 0.5}, Replica{{4, 5}, {}, 0.5}};
  EXPECT_EQ(check(),
            "plan.json: stages[2]: shares device 0 with stages[0] but not its replica device sets "
            "(expected the "
            "same replicas as stages[0] or devices of no other stage)");
}

TEST_F(Validate, GlobalBatchAndMicrobatches) {
  plan_.global_batch = 0;
  EXPECT_EQ(check(), "plan.json: global_batch: expected an integer in 1..1048576, got 0");
  plan_.global_batch = kMaxGlobalBatch + 1;
  EXPECT_EQ(check(), "plan.json: global_batch: expected an integer in 1..1048576, got 1048577");
  plan_.global_batch = 2;
  plan_.num_microbatches = 0;
  EXPECT_EQ(check(), "plan.json: num_microbatches: expected an integer in 1..65536, got 0");
  plan_.num_microbatches = 4;
  EXPECT_EQ(check(),
            "plan.json: num_microbatches: expected at most global_batch (2) micro-batches, got 4");
}

TEST_F(Validate, ZeroStageRange) {
  plan_.zero_stage = 5;
  EXPECT_EQ(check(), "plan.json: zero_stage: expected an integer in 0..3");
}

TEST_F(Validate, MetricsRange) {
  plan_.metrics = 9;
  EXPECT_EQ(check(), "plan.json: metrics: expected an integer in 0..8");
  plan_.metrics = 2;
  EXPECT_EQ(check(), "ok");
}

// A fused attention core is a stage's kernel: a stage plan may have it, an op-level plan may not.
// Converted op by op, a flash stage plan recomputes its attention cores instead (as little kept).
TEST_F(Validate, FlashAttentionOnlyInStagePlans) {
  plan_.attention = cost::Attention::flash;
  EXPECT_EQ(check(), "ok");
  auto ops = as_op_level_plan(plan_, model_);
  ASSERT_TRUE(ops.has_value());
  EXPECT_EQ(ops->attention, cost::Attention::plain);
  EXPECT_EQ(ops->recompute, cost::Recompute::selective);
  EXPECT_EQ(error_of(*ops, model_, cluster_), "ok");
  ops->attention = cost::Attention::flash;
  EXPECT_EQ(
      error_of(*ops, model_, cluster_),
      "plan.json: attention: expected plain in an op-level plan (its groups place the "
      "attention core's ops one by one; flash and flash1 fuse them into one kernel of a stage)");
}

TEST_F(Validate, OverlapOnlyInStagePlansAndParamGatherOnlyUnderZeroOneOrTwo) {
  plan_.overlap = Overlap::tp;
  EXPECT_EQ(check(), "ok");
  auto ops = as_op_level_plan(plan_, model_);
  ASSERT_TRUE(ops.has_value());
  EXPECT_EQ(ops->overlap, Overlap::none);
  ops->overlap = Overlap::tp;
  EXPECT_EQ(error_of(*ops, model_, cluster_),
            "plan.json: overlap: expected none in an op-level plan (its collectives are placed op "
            "by op)");
  plan_.overlap = Overlap::tp_param;
  plan_.zero_stage = 0;
  EXPECT_EQ(check(),
            "plan.json: overlap: expected zero_stage 1 or 2 for 'tp+param' (it hides the "
            "all-gather of the updated parameter shards), got 0");
  plan_.zero_stage = 3;
  EXPECT_NE(check(), "ok");
  for (int zero : {1, 2}) {
    plan_.zero_stage = zero;
    EXPECT_EQ(check(), "ok") << zero;
  }
}

TEST_F(Validate, OpOverridePatternMustMatch) {
  plan_.op_overrides = {OpOverride{"layers.*.norm*", SplitKind::replicate},
                        OpOverride{"layers.*.ln", SplitKind::replicate}};
  EXPECT_EQ(check(),
            "plan.json: op_overrides[1].ops: pattern \"layers.*.ln\" matches no op of the model");
  plan_.op_overrides.pop_back();
  plan_.grad_sync = {GradSync{"head.*", SyncMethod::none, cost::Algorithm::automatic, 0},
                     GradSync{"emb", SyncMethod::all_reduce, cost::Algorithm::ring, 0}};
  EXPECT_EQ(check(), "plan.json: grad_sync[1].ops: pattern \"emb\" matches no op of the model");
}

TEST(OpPattern, Globs) {
  EXPECT_TRUE(op_pattern_matches("*", "layers.3.attn.qkv"));
  EXPECT_TRUE(op_pattern_matches("layers.3.*", "layers.3.attn.qkv"));
  EXPECT_FALSE(op_pattern_matches("layers.3.*", "layers.31.attn.qkv"));
  EXPECT_TRUE(op_pattern_matches("layers.*.ln*", "layers.12.ln2"));
  EXPECT_FALSE(op_pattern_matches("layers.*.ln*", "layers.12.attn.qkv"));
  EXPECT_TRUE(op_pattern_matches("head.lm", "head.lm"));
  EXPECT_FALSE(op_pattern_matches("head.lm", "head.lm2"));
  EXPECT_TRUE(op_pattern_matches("*.fc*", "layers.0.mlp.fc2"));
  EXPECT_TRUE(op_pattern_matches("a**b", "axxb"));
  EXPECT_FALSE(op_pattern_matches("", "a"));
}

}  // namespace
}  // namespace hetplan::plan

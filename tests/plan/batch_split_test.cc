#include "hetplan/plan/batch_split.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "hetplan/model/zoo.h"
#include "hetplan/plan/run_form.h"

namespace hetplan::plan {
namespace {

model::Model gpt() {
  auto m = model::load_model("gpt:layers=2,hidden=64,heads=4,seq=32,vocab=256");
  if (!m) throw std::runtime_error(m.error().message);
  return *m;
}

Plan two_replicas() {
  Plan p;
  p.global_batch = 16;
  Stage st;
  st.num_layers = 4;
  st.replicas = {{{0, 1, 2}, {0.5, 0.3, 0.2}, 0.8}, {{3, 4}, {}, 0.2}};
  p.stages = {st};
  p.op_overrides = {{"*", SplitKind::batch}};
  return p;
}

TEST(BatchSplit, EveryOpByBatchIsOneReplicaPerDevice) {
  const auto dp = as_data_parallel(gpt(), two_replicas());
  ASSERT_TRUE(dp);
  EXPECT_TRUE(dp->op_overrides.empty());
  ASSERT_EQ(dp->stages.size(), 1u);
  const auto& r = dp->stages[0].replicas;
  ASSERT_EQ(r.size(), 5u);
  const std::vector<double> shares{0.4, 0.24, 0.16, 0.1, 0.1};
  for (std::size_t i = 0; i < r.size(); ++i) {
    EXPECT_EQ(r[i].devices, std::vector<int>{static_cast<int>(i)});
    EXPECT_TRUE(r[i].tp_shares.empty());
    EXPECT_NEAR(r[i].batch_share, shares[i], 1e-12);
  }
}

TEST(BatchSplit, OtherPlansAreLeftAlone) {
  Plan p = two_replicas();
  p.op_overrides = {{"layers.*", SplitKind::batch}};  // the embedding and head split by tensor
  EXPECT_FALSE(splits_every_op_by_batch(gpt(), p));
  EXPECT_FALSE(as_data_parallel(gpt(), p));
  p.op_overrides = {{"embedding.*", SplitKind::replicate}, {"*", SplitKind::batch}};
  EXPECT_FALSE(as_data_parallel(gpt(), p));
  p.op_overrides = {{"*", SplitKind::batch_sharded}};
  EXPECT_FALSE(as_data_parallel(gpt(), p));
  // Already one device per replica: nothing to unroll.
  p = two_replicas();
  p.stages[0].replicas = {{{0}, {}, 0.5}, {{1}, {}, 0.5}};
  EXPECT_TRUE(splits_every_op_by_batch(gpt(), p));
  EXPECT_FALSE(as_data_parallel(gpt(), p));
}

Plan zero3_replicas() {
  Plan p;
  p.global_batch = 12;
  p.zero_stage = 3;
  Stage st;
  st.num_layers = 4;
  st.replicas = {{{2}, {}, 0.5}, {{0}, {}, 0.25}, {{5}, {}, 0.25}};
  p.stages = {st};
  return p;
}

TEST(BatchSplit, ZeroThreeOverSingleDeviceReplicasIsAShardedBatchProgram) {
  const auto program = zero3_as_batch_program(gpt(), zero3_replicas());
  ASSERT_TRUE(program);
  EXPECT_EQ(program->zero_stage, 0);
  ASSERT_EQ(program->op_overrides.size(), 1u);
  EXPECT_EQ(program->op_overrides[0].ops, "*");
  EXPECT_EQ(program->op_overrides[0].split, SplitKind::batch_sharded);
  ASSERT_EQ(program->stages.size(), 1u);
  ASSERT_EQ(program->stages[0].replicas.size(), 1u);
  const Replica& r = program->stages[0].replicas[0];
  EXPECT_EQ(r.devices, (std::vector<int>{2, 0, 5}));
  EXPECT_EQ(r.tp_shares, (std::vector<double>{0.5, 0.25, 0.25}));
  EXPECT_EQ(r.batch_share, 1);
  // run_form gives that form.
  const RunForm f = run_form(zero3_replicas(), gpt());
  EXPECT_TRUE(f.zero3_batch_program);
  EXPECT_EQ(f.plan, *program);
}

TEST(BatchSplit, ZeroThreeStaysAsItIsElsewhere) {
  std::vector<Plan> others(6, zero3_replicas());
  others[0].zero_stage = 2;
  others[1].stages[0].replicas[0].devices = {2, 3};  // a replica of two devices
  others[2].stages.push_back(others[2].stages[0]);   // two stages
  others[3].grad_sync = {GradSync{"*", SyncMethod::parameter_server}};
  others[4].grad_priority = GradPriority::layer;
  others[5].stages[0].replicas.resize(1);
  for (std::size_t i = 0; i < others.size(); ++i)
    EXPECT_FALSE(zero3_as_batch_program(gpt(), others[i])) << i;
  auto cnn = model::load_model("resnet:depth=18,width=8,image=32,classes=10");
  ASSERT_TRUE(cnn);
  EXPECT_FALSE(zero3_as_batch_program(*cnn, zero3_replicas()));
}

}  // namespace
}  // namespace hetplan::plan

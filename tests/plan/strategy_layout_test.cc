#include <gtest/gtest.h>

#include "hetplan/plan/strategy.h"
#include "hetplan/plan/validate.h"
#include "plan_fixtures.h"

namespace hetplan::plan {
namespace {

using testing::tiny_cluster;
using testing::tiny_cnn;
using testing::tiny_gpt;

Plan layout(std::string_view text, const model::Model& m, const cluster::Cluster& c) {
  auto s = parse_strategy(text);
  EXPECT_TRUE(s.ok()) << s.error().message;
  auto p = plan_from_strategy(*s, m, c);
  EXPECT_TRUE(p.ok()) << p.error().message;
  auto v = validate_plan(*p, m, c, "layout");
  EXPECT_TRUE(v.ok()) << v.error().message;
  return *p;
}

std::string error_of(std::string_view text, const model::Model& m, const cluster::Cluster& c) {
  auto s = parse_strategy(text);
  if (!s.ok()) return s.error().message;
  auto p = plan_from_strategy(*s, m, c);
  return p.ok() ? std::string("ok") : p.error().message;
}

TEST(StrategyLayout, MegatronRankOrderOnEightDevices) {
  const model::Model m = tiny_gpt(4);  // [embedding, layers.0..3, head]
  const Plan p = layout("tp=2,pp=2,dp=2,mbs=2,gbs=16", m, tiny_cluster(8));
  ASSERT_EQ(p.stages.size(), 2u);
  // Stage 0: embedding + 2 blocks on pipeline rank 0 (devices 0..3); stage 1: 2 blocks + head.
  EXPECT_EQ(p.stages[0].first_layer, 0);
  EXPECT_EQ(p.stages[0].num_layers, 3);
  EXPECT_EQ(p.stages[1].first_layer, 3);
  EXPECT_EQ(p.stages[1].num_layers, 3);
  const std::vector<std::vector<int>> devices[2] = {{{0, 1}, {2, 3}}, {{4, 5}, {6, 7}}};
  for (int s = 0; s < 2; ++s) {
    ASSERT_EQ(p.stages[s].replicas.size(), 2u);
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(p.stages[s].replicas[r].devices, devices[s][r]);
      EXPECT_TRUE(p.stages[s].replicas[r].tp_shares.empty());
      EXPECT_EQ(p.stages[s].replicas[r].batch_share, 0.5);
    }
  }
  EXPECT_EQ(p.global_batch, 16);
  EXPECT_EQ(p.num_microbatches, 4);
  EXPECT_EQ(p.schedule, Schedule::one_f_one_b);
  EXPECT_EQ(p.model, "tiny-gpt");
  EXPECT_EQ(p.cluster, "tiny-cluster");
  EXPECT_EQ(p.planner,
            "strategy:dp=2,tp=2,pp=2,vpp=1,mbs=2,gbs=16,recompute=none,zero=0,schedule=1f1b,sp=0");
}

TEST(StrategyLayout, InterleavedChunksCycleOverPipelineRanks) {
  const model::Model m = tiny_gpt(8);
  const Plan p = layout("pp=2,vpp=2,tp=2", m, tiny_cluster(8));  // dp = 2
  ASSERT_EQ(p.stages.size(), 4u);
  const int first[] = {0, 3, 5, 7}, count[] = {3, 2, 2, 3};
  for (int c = 0; c < 4; ++c) {
    EXPECT_EQ(p.stages[c].first_layer, first[c]) << c;
    EXPECT_EQ(p.stages[c].num_layers, count[c]) << c;
    int base = (c % 2) * 4;
    EXPECT_EQ(p.stages[c].replicas[0].devices, (std::vector<int>{base, base + 1})) << c;
    EXPECT_EQ(p.stages[c].replicas[1].devices, (std::vector<int>{base + 2, base + 3})) << c;
  }
  EXPECT_EQ(p.schedule, Schedule::interleaved);
  EXPECT_EQ(p.global_batch, 16);  // default: dp * mbs * 4 * pp
  EXPECT_EQ(p.num_microbatches, 8);
}

TEST(StrategyLayout, UnevenBlocksGoToTheMiddleStages) {
  const model::Model m = tiny_gpt(10);  // 10 blocks over 4 stages: 2, 3, 3, 2
  const Plan p = layout("pp=4", m, tiny_cluster(4));
  ASSERT_EQ(p.stages.size(), 4u);
  const int first[] = {0, 3, 6, 9}, count[] = {3, 3, 3, 3};  // + embedding, + head
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(p.stages[s].first_layer, first[s]) << s;
    EXPECT_EQ(p.stages[s].num_layers, count[s]) << s;
    EXPECT_EQ(p.stages[s].replicas.size(), 1u);
    EXPECT_EQ(p.stages[s].replicas[0].devices, std::vector<int>{s});
  }
}

TEST(StrategyLayout, CnnSplitsByLayerCount) {
  const model::Model m = tiny_cnn(7);  // 7 layers over 3 stages: 2, 3, 2
  const Plan p = layout("pp=3", m, tiny_cluster(3));
  ASSERT_EQ(p.stages.size(), 3u);
  EXPECT_EQ(p.stages[0].num_layers, 2);
  EXPECT_EQ(p.stages[1].num_layers, 3);
  EXPECT_EQ(p.stages[2].num_layers, 2);
}

TEST(StrategyLayout, DefaultsFillTheCluster) {
  const model::Model m = tiny_gpt(2);
  const Plan p = layout("tp=2", m, tiny_cluster(7));  // floor(7 / 2) = 3 replicas; device 6 idle
  ASSERT_EQ(p.stages.size(), 1u);
  ASSERT_EQ(p.stages[0].replicas.size(), 3u);
  EXPECT_EQ(p.stages[0].replicas[2].devices, (std::vector<int>{4, 5}));
  EXPECT_EQ(p.stages[0].replicas[0].batch_share, 1.0 / 3);
  EXPECT_EQ(p.global_batch, 3);  // pp = 1: one micro-batch of mbs per replica
  EXPECT_EQ(p.num_microbatches, 1);
  EXPECT_EQ(p.stages[0].num_layers, 4);
}

TEST(StrategyLayout, CarriesTheOtherSettings) {
  const model::Model m = tiny_gpt(4);
  const Plan p = layout("tp=2,sp=1,zero=2,recompute=selective,schedule=gpipe", m, tiny_cluster(4));
  EXPECT_TRUE(p.sequence_parallel);
  EXPECT_EQ(p.zero_stage, 2);
  EXPECT_EQ(p.recompute, cost::Recompute::selective);
  EXPECT_EQ(p.schedule, Schedule::gpipe);
}

TEST(StrategyLayout, Errors) {
  const model::Model gpt = tiny_gpt(12, 32, 32);
  EXPECT_EQ(error_of("tp=3", gpt, tiny_cluster(8)),
            "--strategy: tp=3: expected a divisor of the number of attention heads (32)");
  EXPECT_EQ(error_of("tp=4", tiny_gpt(12, 32, 2), tiny_cluster(8)),
            "--strategy: tp=4: expected a divisor of the number of key/value heads (2)");
  EXPECT_EQ(error_of("tp=4", tiny_gpt(12, 32, 32, 2), tiny_cluster(8)),
            "--strategy: tp=4: expected a divisor of the number of experts (2)");
  EXPECT_EQ(error_of("dp=16,tp=8,pp=16", gpt, tiny_cluster(1536)),
            "--strategy: dp*tp*pp = 2048 devices requested but the cluster has 1536");
  EXPECT_EQ(error_of("tp=8,pp=2", gpt, tiny_cluster(8)),
            "--strategy: tp*pp = 16 devices requested but the cluster has 8");
  EXPECT_EQ(error_of("dp=2147483647,tp=2147483647,pp=2147483647", tiny_cnn(4), tiny_cluster(8)),
            "--strategy: dp*tp*pp = too many devices requested but the cluster has 8");
  EXPECT_EQ(error_of("dp=8,tp=2,mbs=6,gbs=1000", gpt, tiny_cluster(16)),
            "--strategy: gbs=1000: expected a multiple of dp*mbs = 48");
  EXPECT_EQ(error_of("pp=16", gpt, tiny_cluster(16)),
            "--strategy: pp=16: expected at most 12 pipeline chunks (pp*vpp) for the model's 12 "
            "transformer blocks, "
            "got 16");
  EXPECT_EQ(error_of("pp=4,vpp=2", tiny_gpt(12, 32, 32), tiny_cluster(4)),
            "--strategy: vpp=2: expected pp*vpp = 8 to divide the model's 12 transformer blocks");
  EXPECT_EQ(error_of("pp=4,vpp=3,dp=1,gbs=6", gpt, tiny_cluster(4)),
            "--strategy: gbs=6: expected the number of micro-batches gbs/(dp*mbs) = 6 to be a "
            "multiple of pp = 4 "
            "for the interleaved schedule");
  EXPECT_EQ(error_of("pp=8", tiny_cnn(5), tiny_cluster(8)),
            "--strategy: pp=8: expected at most 5 pipeline chunks (pp*vpp) for the model's 5 "
            "layers, got 8");
  auto s = parse_strategy("tp=3");
  auto p = plan_from_strategy(*s, gpt, tiny_cluster(8), "--strategy-file");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().message.rfind("--strategy-file: tp=3: ", 0), 0u);
}

}  // namespace
}  // namespace hetplan::plan

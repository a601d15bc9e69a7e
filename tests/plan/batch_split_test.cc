#include "hetplan/plan/batch_split.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "hetplan/model/zoo.h"

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

}  // namespace
}  // namespace hetplan::plan

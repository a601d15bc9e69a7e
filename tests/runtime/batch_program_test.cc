// Weights sharded over a batch program's group: each rank keeps its share of the flattened weight,
// computes with the whole one and gets the group's summed gradient of its shard. Two ranks in two
// threads of this process, over Gloo, in both forms of unlike shards (padded and grouped).
#include "../../src/runtime/batch_program.h"

#include <gtest/gtest.h>

#include <thread>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

namespace hetplan::runtime::detail {
namespace {

struct RankResult {
  torch::Tensor shard, whole, grad;
};

// Rank r shards a 2 x 3 weight holding 0..5 at `shares`, computes sum(whole x (r + 1)) and
// back-propagates.
std::vector<RankResult> run_two_ranks(bool grouped, std::vector<double> shares) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<RankResult> out(2);
  auto rank_main = [&](int r) {
    auto options = c10d::ProcessGroupGloo::Options::create();
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, r, 2, options);
    TensorParallel group;
    group.group = pg.get();
    group.rank = r;
    group.size = 2;
    group.shares = shares;
    group.grouped = grouped;
    ShardedWeights weights(&group);
    torch::Tensor w = torch::arange(6, torch::kFloat).view({2, 3}).requires_grad_(true);
    weights.shard(w);
    EXPECT_TRUE(weights.holds(w));
    const torch::Tensor whole = weights.whole(w);
    (whole * static_cast<double>(r + 1)).sum().backward();
    out[r] = {w.detach().clone(), whole.detach().clone(), w.grad().clone()};
  };
  std::thread a(rank_main, 0), b(rank_main, 1);
  a.join();
  b.join();
  return out;
}

TEST(ShardedWeights, EachRankKeepsItsShareAndGetsTheGroupsGradientOfIt) {
  // 3.6 and 2.4 elements: 4 and 2 by largest remainder.
  for (bool grouped : {false, true}) {
    const auto res = run_two_ranks(grouped, {0.6, 0.4});
    ASSERT_EQ(res.size(), 2u);
    EXPECT_TRUE(torch::equal(res[0].shard, torch::tensor({0.f, 1.f, 2.f, 3.f})))
        << "grouped " << grouped;
    EXPECT_TRUE(torch::equal(res[1].shard, torch::tensor({4.f, 5.f})));
    for (int r = 0; r < 2; ++r)
      EXPECT_TRUE(torch::equal(res[r].whole, torch::arange(6, torch::kFloat).view({2, 3})));
    // d/dw of sum(whole x 1) + sum(whole x 2), each rank's slice of it.
    EXPECT_TRUE(torch::equal(res[0].grad, torch::full({4}, 3.f))) << res[0].grad;
    EXPECT_TRUE(torch::equal(res[1].grad, torch::full({2}, 3.f))) << res[1].grad;
  }
}

TEST(ShardedWeights, ARankMayHoldAnEmptyShard) {
  // 5.7 and 0.3 elements: 6 and none.
  for (bool grouped : {false, true}) {
    const auto res = run_two_ranks(grouped, {0.95, 0.05});
    ASSERT_EQ(res.size(), 2u);
    EXPECT_EQ(res[0].shard.numel(), 6) << "grouped " << grouped;
    EXPECT_EQ(res[1].shard.numel(), 0);
    for (int r = 0; r < 2; ++r)
      EXPECT_TRUE(torch::equal(res[r].whole, torch::arange(6, torch::kFloat).view({2, 3})));
    EXPECT_TRUE(torch::equal(res[0].grad, torch::full({6}, 3.f))) << res[0].grad;
    EXPECT_EQ(res[1].grad.numel(), 0);
  }
}

TEST(ShardedWeights, LeavesOtherTensorsAlone) {
  TensorParallel group;  // inactive
  ShardedWeights weights(&group);
  const torch::Tensor w = torch::ones({3});
  EXPECT_FALSE(weights.holds(w));
  EXPECT_EQ(weights.whole(w).unsafeGetTensorImpl(), w.unsafeGetTensorImpl());
  EXPECT_FALSE(weights.whole(torch::Tensor()).defined());
}

}  // namespace
}  // namespace hetplan::runtime::detail

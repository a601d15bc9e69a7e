// Weights sharded over a batch program's group: each rank keeps its share of the flattened weight,
// computes with the whole one and gets the group's summed gradient of its shard. Two ranks in two
// threads of this process, over Gloo, in both forms of unlike shards (padded and grouped).
#include "../../src/runtime/batch_program.h"

#include <gtest/gtest.h>

#include <functional>
#include <thread>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

namespace hetplan::runtime::detail {
namespace {

struct RankResult {
  torch::Tensor shard, whole, grad;
};

// Runs f(rank, group) on two ranks, each in its own thread with its own Gloo group.
std::vector<RankResult> on_two_ranks(bool grouped, const std::vector<double>& shares,
                                     const std::function<RankResult(int, TensorParallel&)>& f) {
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
    out[r] = f(r, group);
  };
  std::thread a(rank_main, 0), b(rank_main, 1);
  a.join();
  b.join();
  return out;
}

// Rank r shards a 2 x 3 weight holding 0..5 at `shares`, computes sum(whole x (r + 1)) and
// back-propagates.
std::vector<RankResult> run_two_ranks(bool grouped, std::vector<double> shares) {
  return on_two_ranks(grouped, shares, [](int r, TensorParallel& group) {
    ShardedWeights weights(&group);
    torch::Tensor w = torch::arange(6, torch::kFloat).view({2, 3}).requires_grad_(true);
    weights.shard(w);
    EXPECT_TRUE(weights.holds(w));
    const torch::Tensor whole = weights.whole(w);
    (whole * static_cast<double>(r + 1)).sum().backward();
    return RankResult{w.detach().clone(), whole.detach().clone(), w.grad().clone()};
  });
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

// The product and gradients of a linear op on a sharded weight, here over a group of one rank
// (the gather and reduce-scatter are then identities; the two-rank tests above move shards and
// the run tests run them between processes: two ranks as threads of one process would call the
// BLAS library at once, which gave one thread the other's product on this machine).
TEST(ShardedWeights, LinearIsTorchsLinearWithTheGradientInTheShardsLayout) {
  TensorParallel group;  // one rank
  ShardedWeights weights(&group);
  torch::Tensor w = torch::arange(6, torch::kFloat).view({3, 2}).requires_grad_(true);
  weights.shard(w);
  ASSERT_TRUE(weights.holds(w));
  EXPECT_EQ(w.sizes(), torch::IntArrayRef({6}));  // the flattened shard: all of it
  const torch::Tensor x = torch::tensor({{1.f, 2.f}, {2.f, 4.f}}).requires_grad_(true);
  const torch::Tensor b = torch::tensor({1.f, 0.f, -1.f});
  const torch::Tensor y = weights.linear(x, w, b);
  EXPECT_TRUE(torch::equal(y, torch::tensor({{3.f, 8.f, 13.f}, {5.f, 16.f, 27.f}}))) << y;
  y.sum().backward();
  // dW: every row the sum of x's rows, [3, 6], flattened as the shard is; dx: W's column sums.
  EXPECT_TRUE(torch::equal(w.grad(), torch::tensor({3.f, 6.f, 3.f, 6.f, 3.f, 6.f}))) << w.grad();
  EXPECT_TRUE(torch::equal(x.grad(), torch::tensor({{6.f, 9.f}, {6.f, 9.f}}))) << x.grad();
}

// A sharded bias moves with its sharded weight: the same product, and each shard's gradient.
TEST(ShardedWeights, LinearMovesAShardedBiasWithItsWeight) {
  TensorParallel group;  // one rank
  ShardedWeights weights(&group);
  torch::Tensor w = torch::arange(6, torch::kFloat).view({3, 2}).requires_grad_(true);
  torch::Tensor b = torch::tensor({1.f, 0.f, -1.f}).requires_grad_(true);
  weights.shard(w);
  weights.shard(b);
  const torch::Tensor x = torch::tensor({{1.f, 2.f}, {2.f, 4.f}}).requires_grad_(true);
  const torch::Tensor y = weights.linear(x, w, b);
  EXPECT_TRUE(torch::equal(y, torch::tensor({{3.f, 8.f, 13.f}, {5.f, 16.f, 27.f}}))) << y;
  y.sum().backward();
  EXPECT_TRUE(torch::equal(w.grad(), torch::tensor({3.f, 6.f, 3.f, 6.f, 3.f, 6.f}))) << w.grad();
  EXPECT_TRUE(torch::equal(b.grad(), torch::tensor({2.f, 2.f, 2.f}))) << b.grad();  // two rows
  EXPECT_TRUE(torch::equal(x.grad(), torch::tensor({{6.f, 9.f}, {6.f, 9.f}}))) << x.grad();
}

// Two tensors' rank slices, rank by rank (what one all-gather of both moves), and back.
TEST(ShardedWeights, InterleavesRankSlices) {
  const torch::Tensor w = torch::arange(5, torch::kFloat), b = torch::tensor({10.f, 11.f});
  const std::vector<std::vector<std::int64_t>> counts{{3, 2}, {1, 1}};
  const torch::Tensor flat = interleave({w, b}, counts);
  EXPECT_TRUE(torch::equal(flat, torch::tensor({0.f, 1.f, 2.f, 10.f, 3.f, 4.f, 11.f}))) << flat;
  const auto back = deinterleave(flat, counts);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_TRUE(torch::equal(back[0], w));
  EXPECT_TRUE(torch::equal(back[1], b));
  // A rank with an empty slice of one of them.
  EXPECT_TRUE(torch::equal(interleave({w, b}, {{5, 0}, {0, 2}}),
                           torch::tensor({0.f, 1.f, 2.f, 3.f, 4.f, 10.f, 11.f})));
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

// Gradient buckets: all-reduced while the last backward pass runs, with the sums one all-reduce
// of every gradient gives (one rank here, so the sums are the gradients themselves).
#include "../../src/runtime/grad_buckets.h"

#include <gtest/gtest.h>

#include "one_rank_group.h"

namespace hetplan::runtime::detail {
namespace {

using testing::one_rank_group;

struct ThreeLayers {
  torch::nn::Linear a{4, 8}, b{8, 8}, c{8, 2};
  std::vector<std::vector<torch::Tensor>> layers() {
    return {a->parameters(), b->parameters(), c->parameters()};
  }
  std::vector<torch::Tensor> all() {
    std::vector<torch::Tensor> out;
    for (const auto& l : layers()) out.insert(out.end(), l.begin(), l.end());
    return out;
  }
};

std::vector<torch::Tensor> grads(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> out;
  for (const auto& p : params) out.push_back(p.grad().clone());
  return out;
}

// Bytes per layer as the simulator counts them (fp32 here): 160, 288 and 72.
const std::vector<double> kLayerBytes{160, 288, 72};

TEST(GradBuckets, GroupLayersFromTheLastAsTheSimulatorDoes) {
  ThreeLayers m;
  // From the last: 72 + 288 reach 100, then 160.
  EXPECT_EQ(GradBuckets(m.layers(), kLayerBytes, 100, one_rank_group()).count(), 2);
  EXPECT_EQ(GradBuckets(m.layers(), kLayerBytes, 1, one_rank_group()).count(), 3);
  EXPECT_EQ(GradBuckets(m.layers(), kLayerBytes, 25e6, one_rank_group()).count(), 1);
  // Counted at half the bytes (a 16-bit model), 72 + 288 + 160 stay below 400: one bucket.
  EXPECT_EQ(GradBuckets(m.layers(), {80, 144, 36}, 400, one_rank_group()).count(), 1);
}

TEST(GradBuckets, StartDuringTheLastPassAndLeaveTheSums) {
  torch::manual_seed(1);
  ThreeLayers m;
  GradBuckets buckets(m.layers(), kLayerBytes, 1, one_rank_group());
  const auto params = m.all();
  for (auto& p : params) p.mutable_grad() = torch::zeros_like(p);
  const auto x = torch::randn({5, 4});
  auto loss = [&] { return m.c(torch::relu(m.b(torch::relu(m.a(x))))).square().sum(); };
  loss().backward();  // an earlier micro-batch: no bucket starts
  buckets.set_active(true);
  loss().backward();
  buckets.set_active(false);
  const auto expected = grads(params);
  buckets.finish(std::chrono::milliseconds(10000));
  EXPECT_EQ(buckets.overlapped(), 3);
  for (std::size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(torch::allclose(params[i].grad(), expected[i], 0, 0)) << "parameter " << i;
  // A last pass that reaches only the last layer: finish starts the other buckets itself.
  buckets.set_active(true);
  m.c(x.narrow(1, 0, 4).repeat({1, 2})).sum().backward();
  buckets.set_active(false);
  const auto after = grads(params);
  buckets.finish(std::chrono::milliseconds(10000));
  EXPECT_EQ(buckets.overlapped(), 1);
  for (std::size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(torch::allclose(params[i].grad(), after[i], 0, 0)) << "parameter " << i;
}

}  // namespace
}  // namespace hetplan::runtime::detail

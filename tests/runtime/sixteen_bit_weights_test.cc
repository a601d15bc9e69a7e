// 16-bit weights beside an fp32 master: a model whose linear layers' weights are held in bf16
// computes under autocast exactly what it computes from fp32 weights (autocast rounds them to the
// same bf16 values), and its gradients, summed in fp32 over micro-batches, are the fp32 weights'
// to the bit; the gradient buckets' hooks keep working across steps.
#include "../../src/runtime/sixteen_bit_weights.h"

#include <gtest/gtest.h>

#include <functional>

#include "../../src/runtime/autocast_scope.h"
#include "../../src/runtime/grad_buckets.h"
#include "one_rank_group.h"

namespace hetplan::runtime::detail {
namespace {

using testing::one_rank_group;

torch::nn::Sequential three_layers() {
  torch::manual_seed(3);
  return torch::nn::Sequential(torch::nn::Linear(16, 32), torch::nn::ReLU(),
                               torch::nn::Linear(32, 32), torch::nn::ReLU(),
                               torch::nn::Linear(32, 4));
}

// Two micro-batches' forward and backward passes under bf16 autocast; their losses.
std::vector<double> two_passes(torch::nn::Sequential& m, const std::function<void(int)>& before) {
  std::vector<double> losses;
  for (int mb = 0; mb < 2; ++mb) {
    if (before) before(mb);
    torch::manual_seed(10 + mb);
    const torch::Tensor x = torch::randn({8, 16});
    torch::Tensor loss;
    {
      AutocastScope mixed(AutocastState::bf16(false));
      loss = m->forward(x).to(torch::kFloat).square().mean();
    }
    losses.push_back(loss.item<double>());
    loss.backward();
  }
  return losses;
}

TEST(SixteenBitWeights, ComputeAndSumGradientsAsAutocastDoesFromFp32Weights) {
  auto fp32 = three_layers();
  auto half = three_layers();
  const std::vector<torch::Tensor> a = fp32->parameters(), b = half->parameters();
  ASSERT_EQ(a.size(), 6u);
  // The three weights, not their biases.
  const std::vector<std::size_t> which = autocast_weights(*half, b);
  EXPECT_EQ(which, (std::vector<std::size_t>{0, 2, 4}));
  SixteenBitWeights sixteen(b, which, torch::kBFloat16);
  for (std::size_t i = 0; i < b.size(); ++i) {
    const bool held = i % 2 == 0;
    EXPECT_EQ(sixteen.holds(b[i]), held) << i;
    EXPECT_EQ(b[i].scalar_type(), held ? torch::kBFloat16 : torch::kFloat) << i;
  }
  // Buckets made after the weights turned 16-bit, each layer its own, the last pass's.
  GradBuckets buckets({{b[0], b[1]}, {b[2], b[3]}, {b[4], b[5]}}, {1, 1, 1}, 1, one_rank_group(),
                      [&](const torch::Tensor& t) { return sixteen.accumulated(t); });
  for (int step = 0; step < 2; ++step) {
    for (const auto& t : a) t.mutable_grad() = torch::Tensor();
    const auto expected = two_passes(fp32, {});
    const auto got = two_passes(half, [&](int mb) { buckets.set_active(mb == 1); });
    buckets.set_active(false);
    EXPECT_EQ(got, expected) << "step " << step;
    for (std::size_t i : which) EXPECT_FALSE(b[i].grad().defined()) << i;  // summed apart
    sixteen.lend_gradients();
    buckets.finish(std::chrono::milliseconds(10000));
    EXPECT_EQ(buckets.overlapped(), 3) << "step " << step;  // the hooks fired in the last pass
    for (std::size_t i = 0; i < b.size(); ++i) {
      EXPECT_EQ(b[i].scalar_type(), torch::kFloat) << i;
      ASSERT_TRUE(b[i].grad().defined()) << i;
      EXPECT_TRUE(torch::equal(b[i].grad(), a[i].grad())) << "step " << step << ", parameter " << i;
    }
    // A step by hand on both: the fp32 weights, and (as the ZeRO slices' gather writes them) the
    // 16-bit ones rounded from the same fp32 values.
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> updated;
    for (std::size_t i = 0; i < a.size(); ++i) {
      a[i].sub_(0.01 * a[i].grad());
      updated.push_back(a[i].clone());
    }
    sixteen.restore();
    for (std::size_t i : which) {
      EXPECT_EQ(b[i].scalar_type(), torch::kBFloat16) << i;
      EXPECT_FALSE(b[i].grad().defined()) << i;
    }
    for (std::size_t i = 0; i < b.size(); ++i) {
      if (!sixteen.holds(b[i])) b[i].mutable_grad() = torch::Tensor();
      b[i].copy_(updated[i]);
    }
  }
}

}  // namespace
}  // namespace hetplan::runtime::detail

// Dynamic loss scaling: gradients divided back by the scale and checked, a step with an inf or a
// NaN skipped and the scale halved, the scale doubled after the growth interval of clean steps.
#include "../../src/runtime/loss_scaler.h"

#include <gtest/gtest.h>

#include <limits>

namespace hetplan::runtime::detail {
namespace {

TEST(LossScaler, UnscalesExactlyAndFindsOverflow) {
  const LossScaler scaler(1024);
  torch::Tensor a = torch::tensor({1024.0f, -3072.0f, 0.5f});
  torch::Tensor b = torch::tensor({2048.0f});
  EXPECT_TRUE(scaler.unscale({a, b, torch::Tensor()}));  // an undefined gradient is left alone
  EXPECT_TRUE(torch::equal(a, torch::tensor({1.0f, -3.0f, 0.5f / 1024})));
  EXPECT_TRUE(torch::equal(b, torch::tensor({2.0f})));
  for (float bad :
       {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    torch::Tensor c = torch::tensor({1.0f, bad});
    EXPECT_FALSE(scaler.unscale({b, c})) << bad;
  }
}

TEST(LossScaler, SkipsAndHalvesOnOverflowAndGrowsAfterTheInterval) {
  LossScaler scaler(1024, 3);
  EXPECT_TRUE(scaler.update(true));
  EXPECT_TRUE(scaler.update(true));
  EXPECT_EQ(scaler.scale(), 1024);
  EXPECT_FALSE(scaler.update(false));  // skipped: halved, and the clean run starts again
  EXPECT_EQ(scaler.scale(), 512);
  EXPECT_EQ(scaler.skipped(), 1);
  EXPECT_TRUE(scaler.update(true));
  EXPECT_TRUE(scaler.update(true));
  EXPECT_EQ(scaler.scale(), 512);
  EXPECT_TRUE(scaler.update(true));  // the third clean step in a row: doubled
  EXPECT_EQ(scaler.scale(), 1024);
  EXPECT_FALSE(scaler.update(false));
  EXPECT_FALSE(scaler.update(false));
  EXPECT_EQ(scaler.scale(), 256);
  EXPECT_EQ(scaler.skipped(), 3);
}

}  // namespace
}  // namespace hetplan::runtime::detail

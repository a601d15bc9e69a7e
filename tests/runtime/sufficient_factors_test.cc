// Sufficient factors: a replica's factors over any features, cut from what its ranks gave.
#include "../../src/runtime/sufficient_factors.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace hetplan::runtime::detail {
namespace {

TEST(SufficientFactors, AReplicasFactorsComeFromTheRanksThatHoldEachFeature) {
  // Replica 0: two ranks of a column-split layer (4 inputs, 5 outputs), each holding all 4 input
  // features of the replica's 2 rows and outputs [0, 3) and [3, 5); replica 1: one rank holding
  // its 3 rows whole. What each gave is padded (a row and a column more).
  const torch::Tensor x0 = torch::arange(8, torch::kFloat).reshape({2, 4});
  const torch::Tensor dy0 = torch::arange(100, 110, torch::kFloat).reshape({2, 5});
  const torch::Tensor x1 = torch::arange(20, 32, torch::kFloat).reshape({3, 4});
  const torch::Tensor dy1 = torch::arange(200, 215, torch::kFloat).reshape({3, 5});
  auto padded = [](const torch::Tensor& t) {
    return torch::constant_pad_nd(t, {0, 1, 0, 1}, -1.0);
  };
  const std::vector<torch::Tensor> given{padded(torch::cat({x0, dy0.slice(1, 0, 3)}, 1)),
                                         padded(torch::cat({x0, dy0.slice(1, 3, 5)}, 1)),
                                         padded(torch::cat({x1, dy1}, 1))};
  const std::vector<FactorHolder> holders{
      {0, 2, {0, 4}, {0, 3}}, {0, 2, {0, 4}, {3, 5}}, {1, 3, {0, 4}, {0, 5}}};
  // Outputs [2, 5) of replica 0 span both of its ranks.
  auto [x, dy] = replica_factors(given, holders, 0, {1, 4}, {2, 5});
  EXPECT_TRUE(torch::equal(x, x0.slice(1, 1, 4)));
  EXPECT_TRUE(torch::equal(dy, dy0.slice(1, 2, 5)));
  std::tie(x, dy) = replica_factors(given, holders, 1, {0, 4}, {3, 5});
  EXPECT_TRUE(torch::equal(x, x1));
  EXPECT_TRUE(torch::equal(dy, dy1.slice(1, 3, 5)));
  // A row-split replica: its ranks hold input features [0, 1) and [1, 4), each all outputs.
  const std::vector<torch::Tensor> rows{torch::cat({x0.slice(1, 0, 1), dy0}, 1),
                                        torch::cat({x0.slice(1, 1, 4), dy0}, 1)};
  const std::vector<FactorHolder> row_holders{{0, 2, {0, 1}, {0, 5}}, {0, 2, {1, 4}, {0, 5}}};
  std::tie(x, dy) = replica_factors(rows, row_holders, 0, {0, 4}, {1, 2});
  EXPECT_TRUE(torch::equal(x, x0));
  EXPECT_TRUE(torch::equal(dy, dy0.slice(1, 1, 2)));
  // Features no rank of the replica holds.
  EXPECT_THROW(replica_factors(given, holders, 0, {0, 4}, {0, 6}), std::logic_error);
  EXPECT_THROW(replica_factors(given, holders, 2, {0, 4}, {0, 5}), std::logic_error);
}

}  // namespace
}  // namespace hetplan::runtime::detail

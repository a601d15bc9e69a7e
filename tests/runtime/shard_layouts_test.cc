// ShardLayouts: a rank's slices of a whole weight, recorded so that gradients can be summed in the
// whole layout and cut back.
#include "../../src/runtime/shard_layouts.h"

#include <gtest/gtest.h>

#include <thread>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

namespace hetplan::runtime::detail {
namespace {

TEST(ShardLayouts, KeepsSlicesAndMapsThemToTheWholeAndBack) {
  ShardLayouts layouts;
  torch::Tensor w = torch::arange(24, torch::kFloat).reshape({6, 4});
  torch::Tensor b = torch::arange(4, torch::kFloat);
  const torch::Tensor whole = w.clone();
  layouts.keep(w, 0, {{1, 2}, {4, 6}});  // rows 1, 4 and 5
  EXPECT_TRUE(layouts.split(w));
  EXPECT_FALSE(layouts.split(b));
  ASSERT_EQ(w.sizes(), (std::vector<std::int64_t>{3, 4}));
  EXPECT_TRUE(torch::equal(w, torch::cat({whole.slice(0, 1, 2), whole.slice(0, 4, 6)})));
  // The part in place, zeros elsewhere; and back.
  const torch::Tensor placed = layouts.to_whole(w, w);
  EXPECT_TRUE(torch::equal(placed.slice(0, 1, 2), whole.slice(0, 1, 2)));
  EXPECT_TRUE(torch::equal(placed.slice(0, 4, 6), whole.slice(0, 4, 6)));
  EXPECT_EQ(placed.slice(0, 0, 1).abs().sum().item<float>(), 0.0f);
  EXPECT_EQ(placed.slice(0, 2, 4).abs().sum().item<float>(), 0.0f);
  EXPECT_TRUE(torch::equal(layouts.to_part(w, whole), w));
  // A whole tensor maps to itself.
  EXPECT_TRUE(torch::equal(layouts.to_whole(b, b), b));
  // A copy of a sharded weight is cut alike.
  torch::Tensor copy = w.clone();
  layouts.same_as(w, copy);
  EXPECT_TRUE(torch::equal(layouts.to_part(copy, whole), w));
  // Columns.
  torch::Tensor v = whole.clone();
  layouts.keep(v, 1, {{2, 4}});
  EXPECT_TRUE(torch::equal(layouts.to_whole(v, v).slice(1, 2, 4), whole.slice(1, 2, 4)));
}

// Parameter servers 2 and 0 of three ranks (rank 1 serves nothing) sum the 11 elements of two
// tensors, server 0 elements 0-4 and server 2 elements 5-10: every rank ends with the sums.
TEST(ShardLayouts, SeveralServersSumTheirSlicesInTwoAllToAlls) {
  constexpr int kRanks = 3;
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::vector<torch::Tensor>> tensors(kRanks);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) {
    tensors[r] = {torch::arange(1, 6, torch::kFloat) * (r + 1),
                  torch::arange(6, 12, torch::kFloat).reshape({2, 3}) * (r + 1)};
    ranks.emplace_back([&, r] {
      auto options = c10d::ProcessGroupGloo::Options::create();
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
      c10d::ProcessGroupGloo pg(store, r, kRanks, options);
      serve_slices_flat(pg, tensors[r], {2, 0});
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < kRanks; ++r) {  // 1 + 2 + 3 times each element
    EXPECT_TRUE(torch::equal(tensors[r][0], torch::arange(1, 6, torch::kFloat) * 6)) << r;
    EXPECT_TRUE(
        torch::equal(tensors[r][1], torch::arange(6, 12, torch::kFloat).reshape({2, 3}) * 6))
        << r;
  }
}

}  // namespace
}  // namespace hetplan::runtime::detail

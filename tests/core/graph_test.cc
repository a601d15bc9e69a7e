#include "hetplan/core/graph.h"

#include <gtest/gtest.h>

#include "hetplan/core/hash.h"

namespace hetplan {
namespace {

TEST(Graph, TopologicalOrderIsStable) {
  // 0 -> 2, 1 -> 2, 2 -> 3
  std::vector<std::vector<int>> succ{{2}, {2}, {3}, {}};
  auto order = topological_order(succ);
  ASSERT_TRUE(order);
  EXPECT_EQ(*order, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_TRUE(find_cycle(succ).empty());
}

TEST(Graph, CycleIsFound) {
  std::vector<std::vector<int>> succ{{1}, {2}, {0}, {}};
  EXPECT_FALSE(topological_order(succ));
  auto cycle = find_cycle(succ);
  EXPECT_EQ(cycle, (std::vector<int>{0, 1, 2, 0}));
}

TEST(Hash, FingerprintIsStable) {
  EXPECT_EQ(fingerprint_hex(""), "cbf29ce484222325");
  EXPECT_EQ(fingerprint_hex("a"), "af63dc4c8601ec8c");
}

}  // namespace
}  // namespace hetplan

namespace hetplan {
namespace {

TEST(Graph, UpwardRanksAreLongestPathsToASink) {
  // 0 -> 1 -> 3, 0 -> 2 -> 3, 4 alone; costs 1, 5, 2, 3, 7.
  const std::vector<std::vector<int>> succ = {{1, 2}, {3}, {3}, {}, {}};
  const auto rank = upward_ranks(succ, {1, 5, 2, 3, 7});
  EXPECT_EQ(rank, (std::vector<double>{9, 8, 5, 3, 7}));
}

}  // namespace
}  // namespace hetplan

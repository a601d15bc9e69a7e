// The grouping of a stage's layers into gradient buckets that the simulator and the runtime share.
#include "hetplan/sim/gradient_buckets.h"

#include <gtest/gtest.h>

namespace hetplan::sim {
namespace {

using Buckets = std::vector<std::pair<int, int>>;

TEST(GradientBuckets, CloseFromTheLastLayerOnceTheyHoldTheBucketBytes) {
  const std::vector<double> bytes{160, 288, 72};
  EXPECT_EQ(gradient_buckets(bytes, 100), (Buckets{{1, 2}, {0, 1}}));  // 72 + 288, then 160
  EXPECT_EQ(gradient_buckets(bytes, 1), (Buckets{{2, 1}, {1, 1}, {0, 1}}));
  EXPECT_EQ(gradient_buckets(bytes, 25e6), (Buckets{{0, 3}}));  // the first layer closes it
  // A layer without gradient joins the bucket that is filling.
  EXPECT_EQ(gradient_buckets({100, 0, 100}, 100), (Buckets{{2, 1}, {0, 2}}));
  EXPECT_TRUE(gradient_buckets({}, 100).empty());
}

}  // namespace
}  // namespace hetplan::sim

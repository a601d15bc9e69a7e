#include "hetplan/sim/schedule_order.h"

#include <gtest/gtest.h>

namespace hetplan::sim {
namespace {

std::string show(const std::vector<PassRef>& order) {
  std::string s;
  for (const auto& p : order) {
    s += p.forward ? "F" : "B";
    s += std::to_string(p.microbatch);
    if (p.chunk) s += "c" + std::to_string(p.chunk);
    s += ' ';
  }
  return s;
}

TEST(PassOrder, OneFOneBWarmsUpByDistanceToTheLastStage) {
  EXPECT_EQ(show(pass_order(plan::Schedule::one_f_one_b, 1, 0, 3, 4)), "F0 F1 F2 B0 F3 B1 B2 B3 ");
  EXPECT_EQ(show(pass_order(plan::Schedule::one_f_one_b, 1, 2, 3, 4)), "F0 B0 F1 B1 F2 B2 F3 B3 ");
  EXPECT_EQ(show(pass_order(plan::Schedule::one_f_one_b, 1, 0, 4, 2)), "F0 F1 B0 B1 ");
}

TEST(PassOrder, GPipeRunsAllForwardsFirst) {
  EXPECT_EQ(show(pass_order(plan::Schedule::gpipe, 1, 0, 2, 3)), "F0 F1 F2 B0 B1 B2 ");
}

TEST(PassOrder, InterleavedFollowsMegatron) {
  // P = 2 positions, v = 2 chunks, m = 4: position 0 warms up (2-0-1)*2 + (2-1)*2 = 4 passes.
  EXPECT_EQ(show(pass_order(plan::Schedule::interleaved, 2, 0, 2, 4)),
            "F0 F1 F0c1 F1c1 F2 B0c1 F3 B1c1 F2c1 B0 F3c1 B1 B2c1 B3c1 B2 B3 ");
  EXPECT_EQ(show(pass_order(plan::Schedule::interleaved, 2, 1, 2, 4)),
            "F0 F1 F0c1 B0c1 F1c1 B1c1 F2 B0 F3 B1 F2c1 B2c1 F3c1 B3c1 B2 B3 ");
}

TEST(PassOrder, PeakInflight) {
  EXPECT_EQ(peak_inflight(pass_order(plan::Schedule::one_f_one_b, 1, 0, 4, 8), 1),
            std::vector<int>{4});
  EXPECT_EQ(peak_inflight(pass_order(plan::Schedule::one_f_one_b, 1, 3, 4, 8), 1),
            std::vector<int>{1});
  EXPECT_EQ(peak_inflight(pass_order(plan::Schedule::gpipe, 1, 0, 4, 8), 1), std::vector<int>{8});
}

}  // namespace
}  // namespace hetplan::sim

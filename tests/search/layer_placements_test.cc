// The pipeline planner's questions over layer placements, against going over every placement on
// random small cases: the least slowest stage, and whether some placement has every stage under
// a memory bar (with and without a tied table whose copy a stage sheds when it takes the table).
#include "../../src/search/layer_placements.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

namespace hetplan::search {
namespace {

// Every placement of L layers on S stages (stage s takes [cut[s], cut[s + 1]), at least one
// layer, within reach), each handed to visit.
void each_placement(int L, int S, const std::vector<std::vector<int>>& reach,
                    const std::function<void(const std::vector<int>&)>& visit) {
  std::vector<int> cut(S + 1, 0);
  std::function<void(int)> rec = [&](int s) {
    if (s == S) {
      if (cut[S] == L) visit(cut);
      return;
    }
    if (cut[s] == L) return;  // no layer left for stage s
    for (int b = cut[s] + 1; b <= reach[s][cut[s]]; ++b) {
      cut[s + 1] = b;
      rec(s + 1);
    }
  };
  rec(0);
}

struct Case {
  int L, S;
  std::vector<std::vector<int>> reach;
  std::vector<std::vector<double>> prefix;  // per stage, prefix sums of its layers' costs
  StageReach reach_ptrs() const {
    StageReach r;
    for (const auto& v : reach) r.push_back(&v);
    return r;
  }
};

Case random_case(std::mt19937& rng) {
  Case c;
  c.L = std::uniform_int_distribution<int>(1, 9)(rng);
  c.S = std::uniform_int_distribution<int>(1, std::min(c.L, 4))(rng);
  std::uniform_int_distribution<int> extra(0, 4);
  std::uniform_real_distribution<double> cost(0.1, 2.0);
  for (int s = 0; s < c.S; ++s) {
    std::vector<int> r(c.L);
    for (int a = 0; a < c.L; ++a)
      r[a] = std::min(c.L, std::max(a > 0 ? r[a - 1] : 0, a + extra(rng)));
    c.reach.push_back(r);
    std::vector<double> p(c.L + 1, 0);
    for (int l = 0; l < c.L; ++l) p[l + 1] = p[l] + cost(rng);
    c.prefix.push_back(p);
  }
  return c;
}

TEST(LayerPlacements, LeastSlowestIsTheBruteForceBottleneck) {
  std::mt19937 rng(7);
  int fitting = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const Case c = random_case(rng);
    auto time = [&](int s, int a, int b) { return c.prefix[s][b] - c.prefix[s][a]; };
    double brute = std::numeric_limits<double>::infinity();
    each_placement(c.L, c.S, c.reach, [&](const std::vector<int>& cut) {
      double slowest = 0;
      for (int s = 0; s < c.S; ++s) slowest = std::max(slowest, time(s, cut[s], cut[s + 1]));
      brute = std::min(brute, slowest);
    });
    fitting += brute < std::numeric_limits<double>::infinity();
    ASSERT_EQ(least_slowest(c.L, c.S, c.reach_ptrs(), time), brute) << "trial " << trial;
  }
  // Both answers occur: placements that fit and cases where none does.
  EXPECT_GT(fitting, 500);
  EXPECT_LT(fitting, 2900);
}

TEST(LayerPlacements, AnyPlacementUnderABarIsTheBruteForceAnswer) {
  std::mt19937 rng(11);
  int yes = 0, no = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const Case c = random_case(rng);
    // The last layer reads a table on layer `table` (or none), and a stage holding the last layer
    // but not the table holds a copy of it.
    const int table = std::uniform_int_distribution<int>(-1, c.L - 1)(rng);
    const double copy = std::uniform_real_distribution<double>(0, 3)(rng);
    auto memory = [&](int s, int a, int b) {
      const bool head = b == c.L, holds_table = a <= table && table < b;
      return c.prefix[s][b] - c.prefix[s][a] + (head && table >= 0 && !holds_table ? copy : 0);
    };
    const double bar = std::uniform_real_distribution<double>(0.5, 6)(rng);
    auto ok = [&](int s, int a, int b) { return memory(s, a, b) < bar; };
    bool brute = false;
    each_placement(c.L, c.S, c.reach, [&](const std::vector<int>& cut) {
      bool all = true;
      for (int s = 0; s < c.S; ++s) all = all && ok(s, cut[s], cut[s + 1]);
      brute = brute || all;
    });
    (brute ? yes : no)++;
    ASSERT_EQ(any_placement(c.L, c.S, c.reach_ptrs(), table, ok), brute)
        << "trial " << trial << ", table " << table;
  }
  EXPECT_GT(yes, 500);
  EXPECT_GT(no, 500);
}

}  // namespace
}  // namespace hetplan::search

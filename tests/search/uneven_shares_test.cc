#include "hetplan/search/uneven_shares.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>

namespace hetplan::search {
namespace {

// The integer optimum of min max_r t_r x_r by enumerating every split.
double brute_force(const ShareProblem& p) {
  const std::size_t n = p.per_sample_time.size();
  std::vector<std::int64_t> x(n, 0);
  double best = 1e300;
  std::function<void(std::size_t, std::int64_t)> rec = [&](std::size_t r, std::int64_t left) {
    if (r + 1 == n) {
      if (left > p.max_samples[r]) return;
      x[r] = left;
      double t = 0;
      for (std::size_t k = 0; k < n; ++k) t = std::max(t, p.per_sample_time[k] * x[k]);
      best = std::min(best, t);
      return;
    }
    for (std::int64_t v = 0; v <= std::min(left, p.max_samples[r]); ++v) {
      x[r] = v;
      rec(r + 1, left - v);
    }
  };
  rec(0, p.total);
  return best;
}

TEST(UnevenShares, HandWorkedCase) {
  // Two replicas, the second twice as fast: 3 samples go 1:2.
  auto s = solve_shares({{2.0, 1.0}, {100, 100}, 3});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->samples, (std::vector<std::int64_t>{1, 2}));
  EXPECT_DOUBLE_EQ(s->time, 2.0);
  EXPECT_NEAR(s->lp_time, 2.0, 1e-9);
}

TEST(UnevenShares, MemoryBoundsMoveSamplesToOthers) {
  auto s = solve_shares({{1.0, 1.0, 3.0}, {1, 2, 10}, 6});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->samples, (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_DOUBLE_EQ(s->time, 9.0);
}

TEST(UnevenShares, NotEnoughMemorySaysHowMuch) {
  auto s = solve_shares({{1.0, 1.0}, {2, 3}, 6});
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, "the replicas' memory holds 5 samples, 6 needed");
}

TEST(UnevenShares, MatchesTheIntegerOptimumAndStaysWithinOneSampleOfTheLp) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> speed(0.2, 3.0);
  std::uniform_int_distribution<int> count(2, 5), total(1, 14), bound(0, 12), pick(0, 1);
  for (int trial = 0; trial < 300; ++trial) {
    ShareProblem p;
    const int n = count(rng);
    // Every other trial draws from two kinds of replica, so alike replicas (one LP class) occur.
    const double speeds[2] = {speed(rng), speed(rng)};
    const std::int64_t bounds[2] = {bound(rng), bound(rng)};
    for (int r = 0; r < n; ++r) {
      const bool alike = trial % 2 == 1;
      p.per_sample_time.push_back(alike ? speeds[pick(rng)] : speed(rng));
      p.max_samples.push_back(alike ? bounds[pick(rng)] : bound(rng));
    }
    p.total = total(rng);
    std::int64_t room = 0;
    for (auto b : p.max_samples) room += b;
    auto s = solve_shares(p);
    if (room < p.total) {
      EXPECT_FALSE(s);
      continue;
    }
    ASSERT_TRUE(s) << s.error().message;
    std::int64_t sum = 0;
    for (int r = 0; r < n; ++r) {
      EXPECT_LE(s->samples[r], p.max_samples[r]);
      EXPECT_GE(s->samples[r], 0);
      sum += s->samples[r];
    }
    EXPECT_EQ(sum, p.total);
    const double opt = brute_force(p);
    EXPECT_NEAR(s->time, opt, 1e-9) << "trial " << trial;
    const double slowest = *std::max_element(p.per_sample_time.begin(), p.per_sample_time.end());
    EXPECT_LE(s->lp_time, opt + 1e-9);
    EXPECT_LE(s->time, s->lp_time + slowest + 1e-9);
  }
}

}  // namespace
}  // namespace hetplan::search

// FrontierPool's exclusion rule asked many times at once (PeakBars, which the pipeline planner's
// layer DP asks per cell) answers as the rule itself, at and around the kept plans' own figures.
#include <gtest/gtest.h>

#include "hetplan/search/planners.h"
#include "search_fixtures.h"

namespace hetplan::search {
namespace {

using testing::plan_of;

TEST(FrontierPool, PeakBarsAnswerAsTheRule) {
  const testing::PoolCase pc;
  const auto& m = pc.m;
  const auto& c = pc.c;
  FrontierPool pool(pc.ctx, 0.03);
  // Empty, the pool excludes nothing.
  EXPECT_EQ(pool.peak_bars()(1e9), std::numeric_limits<double>::infinity());
  EXPECT_FALSE(pool.excludes(1e9, 1e30));
  std::vector<double> times, peaks;
  for (const char* s : {"dp=8,tp=1,pp=1,mbs=8,gbs=64", "dp=4,tp=2,pp=1,mbs=4,gbs=64",
                        "dp=2,tp=4,pp=1,mbs=4,gbs=64", "dp=4,tp=1,pp=2,mbs=2,gbs=64",
                        "dp=1,tp=4,pp=2,mbs=4,gbs=64", "dp=2,tp=2,pp=2,mbs=1,gbs=64"}) {
    const plan::Plan p = plan_of(s, m, c);
    const Estimate e = pc.estimator.estimate(p);
    times.push_back(e.time_s);
    peaks.push_back(e.max_peak_bytes);
    EXPECT_TRUE(pool.offer(p));
  }
  const auto bars = pool.peak_bars();
  int excluded = 0, asked = 0;
  for (double t : times)
    for (double scale : {0.5, 0.9, 1 / 1.1, 1.0, 1.1, 1.1 / 1.03, 1.2, 3.0}) {
      const double at = t * scale;
      ASSERT_EQ(bars(at), pool.peak_bar(at)) << at;
      for (double p : peaks)
        for (double pscale : {0.5, 1 / 1.03, 1.0, 2.0}) {
          const bool ex = pool.excludes(at, p * pscale);
          EXPECT_EQ(pool.peak_excluded(bars(at), p * pscale), ex);
          excluded += ex;
          ++asked;
        }
    }
  // The fastest plan by estimate is kept (nothing is faster by the margin to refuse or drop it):
  // it excludes what is as large and slower by the margin, and nothing is faster than it.
  const auto fastest = std::min_element(times.begin(), times.end()) - times.begin();
  EXPECT_TRUE(pool.excludes(times[fastest] * (1.1 / 1.03) * (1 + 1e-9), peaks[fastest]));
  EXPECT_FALSE(pool.excludes(times[fastest] * (1.1 / 1.03) * (1 - 1e-9), peaks[fastest] * 0.9));
  EXPECT_FALSE(pool.excludes(times[fastest] * 0.999, 1e30));
  EXPECT_GT(excluded, 0);
  EXPECT_LT(excluded, asked);
}

}  // namespace
}  // namespace hetplan::search

// Uneven data parallelism's core: how many samples each replica takes so that the slowest one
// finishes first. A linear program (GLPK) gives the fractional optimum T* = min max_r t_r x_r
// subject to sum_r x_r = total and 0 <= x_r <= max_r; it is rounded to whole samples by flooring
// and then giving each remaining sample to the replica that would finish it soonest. The rounded
// time is within one sample's worth of T* (at most T* + max_r t_r), and equals the integer optimum.
#pragma once

#include <cstdint>
#include <vector>

#include "hetplan/core/error.h"

namespace hetplan::search {

struct ShareProblem {
  std::vector<double> per_sample_time;    // seconds per sample, > 0, per replica
  std::vector<std::int64_t> max_samples;  // memory bound per replica (>= 0)
  std::int64_t total = 0;                 // samples to place
};

struct ShareSolution {
  std::vector<std::int64_t> samples;  // per replica, summing to total
  double lp_time = 0;                 // T*, the fractional optimum
  double time = 0;                    // max_r t_r x_r of the rounded solution
};

// Error when the bounds cannot hold `total` samples, or the LP solution fails its check.
Result<ShareSolution> solve_shares(const ShareProblem& prob);

}  // namespace hetplan::search

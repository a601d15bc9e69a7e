// The planners. Each turns a Problem into candidate plans, ranks them with the Estimator,
// simulates the best few with the Evaluator and returns the best simulated plan. All produce the
// common plan format; all are deterministic for given inputs.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "hetplan/search/estimate.h"
#include "hetplan/search/evaluate.h"
#include "hetplan/search/problem.h"

namespace hetplan::search {

// What a planner works with: the problem, a judge, an estimator and the deadline.
struct Context {
  const model::Model& model;
  const cluster::Cluster& cluster;
  const SearchOptions& options;
  const Evaluator& evaluator;
  const Estimator& estimator;
  const Deadline& deadline;
};

// Under a time limit: whether a planner should stop looking and simulate what it has, keeping in
// hand the time of `1 + reserve` simulations (Evaluator::kept_for_simulation_s).
inline bool out_of_time(const Context& ctx, int reserve = 0) {
  const double remaining = ctx.deadline.remaining_s();
  return std::isfinite(remaining) &&
         remaining <= (1 + reserve) * ctx.evaluator.kept_for_simulation_s(ctx.deadline);
}

struct PlannerOutput {
  std::string name;
  Evaluation best;                    // best.ok == false when the planner found nothing to simulate
  std::vector<Evaluation> simulated;  // every plan it simulated, best first
  long long estimated = 0;            // candidates estimated
  bool timed_out = false;             // stopped by the deadline: best is the best so far
};

// Keeps the best candidates by estimate (fitting first, then the objective) as a planner offers
// them, then simulates the best SearchOptions::simulate_top of them.
class CandidatePool {
 public:
  CandidatePool(const Context& ctx, std::string name);
  // Estimates p and keeps it if it is among the best seen; false once out of time (out_of_time,
  // with the reserved simulations), never before something was offered. A plan
  // SearchOptions::executable refuses is not kept (the runtime would not run it): were the best by
  // estimate all such, simulating them would leave the planner with nothing. (The evaluator asks
  // again of those it simulates.)
  bool offer(plan::Plan p);
  // The estimate a candidate must beat to be kept (infinite until the pool is full).
  double threshold_s() const;
  // Whether a kept candidate fits by its estimate.
  bool any_fits() const { return !kept_.empty() && kept_.front().e.fits; }
  // Nothing offered yet that could be kept, or refused as not executable.
  bool empty() const { return kept_.empty() && refused_.empty(); }
  // Simulates the kept candidates: at least the best one, even past the deadline, unless the
  // search already holds a simulated plan then (Evaluator::stop_past).
  PlannerOutput finish();
  // Under a time limit, leaves time for n more simulations after this pool's (offers stop and
  // simulations do not start when they could not end in time for them).
  void reserve_simulations(int n) { reserve_ = n; }

 private:
  struct Kept {
    Estimate e;
    long long order;
    plan::Plan plan;
  };
  bool ahead(const Kept& a, const Kept& b) const;
  const Context& ctx_;
  std::string name_;
  std::size_t keep_;
  std::vector<Kept> kept_;  // sorted best first
  long long offered_ = 0;
  bool timed_out_ = false;
  int reserve_ = 0;
  std::string refused_;  // why the first plan refused as not executable was
};

// Frontier Tracking's pool: keeps an epsilon-Pareto set of candidates by estimated (time, peak
// memory), widened by the estimator's error: a candidate is dropped when a kept one needs at most
// (1 + epsilon) times its memory and is estimated faster by a margin of 10% less epsilon (how far
// the estimator misranks two plans' times), or has the same estimates. Within that margin every
// candidate is kept, so the set is larger than an epsilon-Pareto set (GPT-3 1.3B on hap-mixed:
// 240 simulated against 25). A plan SearchOptions::executable refuses is never kept. finish()
// simulates every kept candidate and returns the exact Pareto set of the simulated plans that fit,
// fastest first. Tested against a brute-force frontier (tests/search/pipeline_oracle_test.cc).
struct FrontierOutput {
  std::vector<Evaluation> points;  // non-dominated by (iteration time, max peak bytes), by time
  std::string refused;  // why the first plan refused as not executable was ("": none was)
  std::string none;     // where there are no points: why the time-optimal search found no plan
  long long estimated = 0;
  int simulated = 0;
  bool timed_out = false;
};

class FrontierPool {
 public:
  FrontierPool(const Context& ctx, double eps) : ctx_(ctx), epsilon(eps) {}
  bool offer(plan::Plan p);
  // Whether the pool would refuse, as it stands, every plan estimated at least time_s seconds
  // and max_peak_bytes at its peak (a kept plan better by the margins offer() asks). Split in two
  // for a caller asking of many peaks at one time: excludes(t, p) is
  // peak_excluded(peak_bar(t), p).
  bool excludes(double time_s, double max_peak_bytes) const {
    return peak_excluded(peak_bar(time_s), max_peak_bytes);
  }
  // The least peak of the kept plans faster than time_s by offer()'s margin (infinite if none).
  double peak_bar(double time_s) const;
  // Whether a plan at max_peak_bytes gives way to a kept plan faster by the margin, of peak bar.
  bool peak_excluded(double bar, double max_peak_bytes) const {
    return bar <= max_peak_bytes * (1 + epsilon);
  }
  // peak_bar() as the pool stands, for many times at once (kept until the pool changes).
  class PeakBars {
   public:
    double operator()(double time_s) const {
      // peak_bar's comparison, over the sorted copy.
      const auto end = std::upper_bound(times_.begin(), times_.end(), time_s * (1 + epsilon_));
      return end == times_.begin() ? std::numeric_limits<double>::infinity()
                                   : peaks_[static_cast<std::size_t>(end - times_.begin()) - 1];
    }

   private:
    friend class FrontierPool;
    std::vector<double> times_;  // the kept plans' times with offer()'s margin, ascending
    std::vector<double> peaks_;  // per kept plan, the least peak of those up to it
    double epsilon_ = 0;
  };
  const PeakBars& peak_bars() const;
  // A plan already simulated, joining the simulated candidates at finish() (the time-optimal
  // plan, which epsilon-pruning could otherwise leave out by up to epsilon).
  void include(Evaluation e) { included_.push_back(std::move(e)); }
  FrontierOutput finish();

 private:
  struct Kept {
    Estimate e;
    plan::Plan plan;
  };
  const Context& ctx_;
  std::vector<Kept> kept_;
  mutable PeakBars bars_;  // peak_bars(), of kept_ unless stale
  mutable bool bars_stale_ = true;
  std::vector<Evaluation> included_;
  std::string refused_;  // why the first plan refused as not executable was
  long long offered_ = 0;
  bool timed_out_ = false;

 public:
  const double epsilon;
};

// A pool offered every candidate, finished; under a time limit it leaves time for `reserve` more
// simulations after its own (CandidatePool::reserve_simulations).
PlannerOutput select_candidates(const Context& ctx, std::string name,
                                std::vector<plan::Plan> candidates, int reserve = 0);

// Baselines.
// Even data parallelism over every device: each device one replica with the same batch share;
// gradient accumulation (micro-batches) and recomputation (none or full) as a user would pick to
// fit. Fails (best.fits == false) when the model does not fit on some device.
PlannerOutput even_dp(const Context& ctx);
// Speed-proportional data parallelism: batch shares proportional to each device's peak FLOP/s.
PlannerOutput proportional_dp(const Context& ctx);
// The best uniform Megatron-LM grid (dp, tp, pp, micro-batch, recompute, ZeRO), chosen as if
// every device were the cluster's smallest-memory type (ties: the slowest), then simulated on the
// real cluster.
PlannerOutput megatron_grid(const Context& ctx);

// Heterogeneity-aware planners.
// Uneven data parallelism: per-replica batch shares from a linear program minimising the slowest
// replica's compute, with per-device memory bounds; tensor parallelism inside a node per device
// group; rounded to whole samples.
PlannerOutput uneven_dp(const Context& ctx);
// Pipeline partitioning over unlike device groups (see pipeline.cc).
PlannerOutput pipeline(const Context& ctx);
// Each weight gradient of p that sufficient factor broadcasting (sim/grad_sync.h) applies to
// synchronised the way the MILP of search/sync_milp.h chooses for all of them at once: all-reduce,
// a parameter server or sufficient factors. p itself when every op stays on all-reduce (or GLPK
// fails: a warning through SearchOptions::progress). Ops that a rule of p names keep it; rules for
// the switched ops are put in front, and the planner name gains "+sfb" and/or "+ps".
plan::Plan with_sufficient_factors(const Context& ctx, const plan::Plan& p);
// Frontier Tracking (TensorOpt) over the pipeline planner's decision space (shapes, micro-batches,
// recompute, ZeRO, layer placement): the layer DP keeps per state an epsilon-Pareto set of
// (time, memory) instead of one best, and every memory setting is explored.
FrontierOutput frontier(const Context& ctx, double epsilon = 0.03);

}  // namespace hetplan::search

#include <algorithm>
#include <limits>
#include <string>

#include "hetplan/search/planners.h"

namespace hetplan::search {
namespace {

// Whether SearchOptions::executable refuses p; the first reason a pool is given is kept in first.
bool runtime_refuses(const SearchOptions& opts, const plan::Plan& p, std::string& first) {
  if (!opts.executable) return false;
  std::string why = opts.executable(p);
  if (why.empty()) return false;
  if (first.empty()) first = std::move(why);
  return true;
}

}  // namespace

CandidatePool::CandidatePool(const Context& ctx, std::string name)
    : ctx_(ctx),
      name_(std::move(name)),
      keep_(static_cast<std::size_t>(std::max(1, ctx.options.simulate_top))) {}

bool CandidatePool::ahead(const Kept& a, const Kept& b) const {
  if (a.e.fits != b.e.fits) return a.e.fits;
  const bool by_memory = ctx_.options.objective == Objective::memory;
  if ((by_memory || !a.e.fits) && a.e.memory_ratio != b.e.memory_ratio)
    return a.e.memory_ratio < b.e.memory_ratio;
  if (a.e.time_s != b.e.time_s) return a.e.time_s < b.e.time_s;
  return a.order < b.order;
}

bool CandidatePool::offer(plan::Plan p) {
  // Under a time limit, the time one simulation takes is kept for the best one's (and the
  // reserved ones').
  if (!empty() && out_of_time(ctx_, reserve_)) {
    timed_out_ = true;
    return false;
  }
  Kept k{ctx_.estimator.estimate(p), offered_++, std::move(p)};
  auto pos = std::upper_bound(kept_.begin(), kept_.end(), k,
                              [&](const Kept& a, const Kept& b) { return ahead(a, b); });
  if (pos - kept_.begin() < static_cast<std::ptrdiff_t>(keep_)) {
    // Asked only of plans that would be kept: it costs more than an estimate.
    if (runtime_refuses(ctx_.options, k.plan, refused_)) return true;
    kept_.insert(pos, std::move(k));
    if (kept_.size() > keep_) kept_.pop_back();
  }
  return true;
}

double CandidatePool::threshold_s() const {
  if (kept_.size() < keep_ || !kept_.back().e.fits) return std::numeric_limits<double>::infinity();
  return kept_.back().e.time_s;
}

PlannerOutput CandidatePool::finish() {
  PlannerOutput out;
  out.name = name_;
  out.best.error = refused_.empty() ? "no candidate plan" : "not executable: " + refused_;
  out.estimated = offered_;
  std::vector<plan::Plan> top;
  for (auto& k : kept_) top.push_back(std::move(k.plan));
  kept_.clear();
  // Best first: past the deadline the rest are left unsimulated.
  out.simulated = ctx_.evaluator.evaluate_all(top, &ctx_.deadline, reserve_);
  if (out.simulated.size() < top.size()) timed_out_ = true;
  std::stable_sort(out.simulated.begin(), out.simulated.end(),
                   [&](const Evaluation& a, const Evaluation& b) {
                     return better(a, b, ctx_.options.objective);
                   });
  if (!out.simulated.empty()) out.best = out.simulated.front();
  out.timed_out = timed_out_;
  return out;
}

PlannerOutput select_candidates(const Context& ctx, std::string name,
                                std::vector<plan::Plan> candidates, int reserve) {
  CandidatePool pool(ctx, std::move(name));
  pool.reserve_simulations(reserve);
  for (auto& p : candidates)
    if (!pool.offer(std::move(p))) break;
  return pool.finish();
}

}  // namespace hetplan::search

namespace hetplan::search {

namespace {
constexpr double kEstimateSlack = 0.10;
}  // namespace

bool FrontierPool::offer(plan::Plan p) {
  if (!kept_.empty() && out_of_time(ctx_)) {
    timed_out_ = true;
    return false;
  }
  ++offered_;
  // A plan the kept ones exclude by its peak and least time needs no more working out.
  const auto estimated = ctx_.estimator.estimate_unless(
      p, [&](double time_s, double peak) { return excludes(time_s, peak); });
  if (!estimated || !estimated->fits) return true;
  const Estimate& e = *estimated;
  // The estimator ranks two plans' times wrongly by up to about 10% between them (measured on the
  // oracle tests; peak memory is the same model in both), so a candidate gives way only to a kept
  // one estimated faster by that margin, or it could be the one whose simulated point the
  // frontier needs. Candidates with the same estimates stand for each other: one is kept.
  if (excludes(e.time_s, e.max_peak_bytes)) return true;
  for (const auto& k : kept_)
    if (k.e.time_s == e.time_s && k.e.max_peak_bytes == e.max_peak_bytes) return true;
  // A plan the runtime would not run is not kept: it would push out plans it runs, then be
  // dropped itself when simulated (asked here, of plans that would be kept: it costs more than an
  // estimate).
  if (runtime_refuses(ctx_.options, p, refused_)) return true;
  std::erase_if(kept_, [&](const Kept& k) {
    return e.time_s * (1 + kEstimateSlack) <= k.e.time_s && e.max_peak_bytes <= k.e.max_peak_bytes;
  });
  kept_.push_back({e, std::move(p)});
  bars_stale_ = true;
  return true;
}

const FrontierPool::PeakBars& FrontierPool::peak_bars() const {
  if (!bars_stale_) return bars_;
  std::vector<std::pair<double, double>> by_time;
  for (const auto& k : kept_)
    by_time.emplace_back(k.e.time_s * (1 + kEstimateSlack), k.e.max_peak_bytes);
  std::sort(by_time.begin(), by_time.end());
  bars_ = PeakBars{};
  bars_.epsilon_ = epsilon;
  for (const auto& [t, peak] : by_time) {
    bars_.times_.push_back(t);
    bars_.peaks_.push_back(bars_.peaks_.empty() ? peak : std::min(bars_.peaks_.back(), peak));
  }
  bars_stale_ = false;
  return bars_;
}

double FrontierPool::peak_bar(double time_s) const {
  double bar = std::numeric_limits<double>::infinity();
  for (const auto& k : kept_)
    if (k.e.time_s * (1 + kEstimateSlack) <= time_s * (1 + epsilon))
      bar = std::min(bar, k.e.max_peak_bytes);
  return bar;
}

FrontierOutput FrontierPool::finish() {
  FrontierOutput out;
  out.estimated = offered_;
  out.refused = refused_;
  std::stable_sort(kept_.begin(), kept_.end(),
                   [](const Kept& a, const Kept& b) { return a.e.time_s < b.e.time_s; });
  std::vector<plan::Plan> plans;
  for (auto& k : kept_) plans.push_back(std::move(k.plan));
  kept_.clear();
  bars_stale_ = true;
  // Fastest first: past the deadline the rest are left unsimulated.
  auto evals = ctx_.evaluator.evaluate_all(plans, &ctx_.deadline);
  if (evals.size() < plans.size()) timed_out_ = true;
  out.simulated = static_cast<int>(
      std::count_if(evals.begin(), evals.end(), [](const Evaluation& e) { return !e.stopped; }));
  for (auto& e : included_) evals.push_back(std::move(e));
  included_.clear();
  std::erase_if(evals, [](const Evaluation& e) { return !e.ok || !e.fits; });
  std::stable_sort(evals.begin(), evals.end(), [](const Evaluation& a, const Evaluation& b) {
    if (a.iteration_time_s != b.iteration_time_s) return a.iteration_time_s < b.iteration_time_s;
    if (a.max_peak_bytes != b.max_peak_bytes) return a.max_peak_bytes < b.max_peak_bytes;
    return a.fingerprint < b.fingerprint;
  });
  double lowest = std::numeric_limits<double>::infinity();
  for (auto& e : evals)
    if (e.max_peak_bytes < lowest) {
      lowest = e.max_peak_bytes;
      out.points.push_back(std::move(e));
    }
  out.timed_out = timed_out_ || ctx_.deadline.expired();
  return out;
}

}  // namespace hetplan::search

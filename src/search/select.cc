#include <algorithm>
#include <limits>

#include "hetplan/search/planners.h"

namespace hetplan::search {

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
  if (ctx_.deadline.expired() && !kept_.empty()) {
    timed_out_ = true;
    return false;
  }
  Kept k{ctx_.estimator.estimate(p), offered_++, std::move(p)};
  auto pos = std::upper_bound(kept_.begin(), kept_.end(), k,
                              [&](const Kept& a, const Kept& b) { return ahead(a, b); });
  if (pos - kept_.begin() < static_cast<std::ptrdiff_t>(keep_)) {
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
  out.best.error = "no candidate plan";
  out.estimated = offered_;
  std::vector<plan::Plan> top;
  for (auto& k : kept_) top.push_back(std::move(k.plan));
  kept_.clear();
  if (!top.empty() && ctx_.deadline.expired()) {
    top.resize(1);
    timed_out_ = true;
  }
  out.simulated = ctx_.evaluator.evaluate_all(top);
  std::stable_sort(out.simulated.begin(), out.simulated.end(),
                   [&](const Evaluation& a, const Evaluation& b) {
                     return better(a, b, ctx_.options.objective);
                   });
  if (!out.simulated.empty()) out.best = out.simulated.front();
  out.timed_out = timed_out_;
  return out;
}

PlannerOutput select_candidates(const Context& ctx, std::string name,
                                std::vector<plan::Plan> candidates) {
  CandidatePool pool(ctx, std::move(name));
  for (auto& p : candidates)
    if (!pool.offer(std::move(p))) break;
  return pool.finish();
}

}  // namespace hetplan::search

#include "hetplan/search/evaluate.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <thread>

#include "hetplan/plan/plan_json.h"
#include "hetplan/plan/validate.h"

namespace hetplan::search {

bool better(const Evaluation& a, const Evaluation& b, Objective objective) {
  if (a.ok != b.ok) return a.ok;
  if (!a.ok) return a.fingerprint < b.fingerprint;
  if (a.fits != b.fits) return a.fits;
  if (!a.fits) {  // neither fits: the one that misses by less is more useful
    if (a.memory_ratio != b.memory_ratio) return a.memory_ratio < b.memory_ratio;
  } else if (objective == Objective::memory) {
    if (a.memory_ratio != b.memory_ratio) return a.memory_ratio < b.memory_ratio;
  }
  if (a.iteration_time_s != b.iteration_time_s) return a.iteration_time_s < b.iteration_time_s;
  return a.fingerprint < b.fingerprint;
}

Evaluator::Evaluator(const model::Model& m, const cluster::Cluster& c, const SearchOptions& opts)
    : m_(m), c_(c), opts_(opts) {
  opts_.sim.record_events = false;
  // A stop of the caller's own still applies.
  opts_.sim.stop = [this, own = std::move(opts_.sim.stop)] {
    return rule_->past_deadline_with_a_plan() || (own && own());
  };
}

Evaluation Evaluator::evaluate(const plan::Plan& p) const {
  Evaluation e;
  e.plan = p;
  e.fingerprint = plan::plan_fingerprint(p);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(e.fingerprint);
    if (it != cache_.end()) return it->second;
  }
  auto valid = plan::validate_plan(p, m_, c_, "plan");
  std::string refused;
  if (valid && opts_.executable) refused = opts_.executable(p);
  if (!valid) {
    e.error = valid.error().message;
  } else if (!refused.empty()) {
    e.error = "not executable: " + refused;
  } else if (auto r = timed_simulate(p); !r) {
    e.error = r.error().message;
    if (e.error == sim::kSimulationStopped) {
      e.stopped = true;
      e.error = "stopped: the time limit passed during its simulation";
      return e;
    }
  } else {
    has_plan_ = true;
    e.ok = true;
    e.iteration_time_s = r->iteration_time.value;
    e.samples_per_s = r->samples_per_s;
    e.max_peak_bytes = r->max_peak_memory.value;
    e.fits = r->fits;
    e.shortfall_bytes = -std::numeric_limits<double>::infinity();
    for (const auto& d : r->devices) {
      if (d.lane < 0 || d.capacity.value <= 0) continue;
      e.memory_ratio = std::max(e.memory_ratio, d.peak_memory.value / d.capacity.value);
      const double over = d.peak_memory.value - d.capacity.value;
      if (over > e.shortfall_bytes) {
        e.shortfall_bytes = over;
        e.shortfall_device = d.device;
      }
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  cache_.emplace(e.fingerprint, e);
  return e;
}

std::vector<Evaluation> Evaluator::evaluate_all(const std::vector<plan::Plan>& plans,
                                                const Deadline* deadline, int reserve) const {
  std::vector<Evaluation> out(plans.size());
  std::atomic<std::size_t> next{0};
  std::atomic<bool> succeeded{false};
  std::atomic<bool> stopped{false};  // the time limit stopped one: it would stop the rest
  auto take = [&]() -> std::size_t {
    if (stopped) return plans.size();
    if (deadline && succeeded && deadline->remaining_s() <= (1 + reserve) * longest_simulation_s())
      return plans.size();
    return next++;
  };
  const int threads = std::max(1, std::min<int>(opts_.threads, static_cast<int>(plans.size())));
  std::vector<char> done(plans.size(), 0);
  auto one = [&](std::size_t i) {
    out[i] = evaluate(plans[i]);
    done[i] = 1;
    if (out[i].ok) succeeded = true;
    if (out[i].stopped) stopped = true;
  };
  auto work = [&] {
    for (std::size_t i = take(); i < plans.size(); i = take()) one(i);
  };
  // Under a time limit the plans are simulated one at a time until one succeeds: the time the
  // first takes is what the limit must leave for, and two at once would each take longer.
  if (deadline && std::isfinite(deadline->remaining_s()))
    for (std::size_t i = 0; i < plans.size() && !succeeded && !stopped; i = ++next) one(i);
  if (threads == 1) {
    work();
  } else {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(work);
    for (auto& th : pool) th.join();
  }
  // Taken in order, so what was done is a prefix.
  const auto evaluated =
      static_cast<std::size_t>(std::find(done.begin(), done.end(), 0) - done.begin());
  out.resize(evaluated);
  return out;
}

Result<sim::SimResult> Evaluator::timed_simulate(const plan::Plan& p) const {
  const Deadline clock(0);
  auto r = sim::simulate(m_, c_, p, opts_.sim);
  const double seconds = clock.elapsed_s();
  if (!r && r.error().message == sim::kSimulationStopped) return r;  // only part of one
  std::lock_guard<std::mutex> lock(mu_);
  longest_simulation_s_ = std::max(longest_simulation_s_, seconds);
  return r;
}

double Evaluator::longest_simulation_s() const {
  std::lock_guard<std::mutex> lock(mu_);
  return longest_simulation_s_;
}

int Evaluator::simulated() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(cache_.size());
}

}  // namespace hetplan::search

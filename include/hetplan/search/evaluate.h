// The judge every planner shares: a candidate plan is validated and simulated, and candidates are
// ranked by the objective (plans that fit before plans that do not; ties broken by the plan's
// fingerprint, so rankings are deterministic).
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "hetplan/plan/plan.h"
#include "hetplan/search/problem.h"

namespace hetplan::search {

struct Evaluation {
  plan::Plan plan;
  bool ok = false;    // validated and simulated
  std::string error;  // why not, when !ok
  // Not ok because the time limit stopped its simulation (Evaluator::stop_past): no verdict on
  // the plan, which is not cached.
  bool stopped = false;
  double iteration_time_s = 0;
  double samples_per_s = 0;
  double max_peak_bytes = 0;
  double memory_ratio = 0;  // max over used devices of peak memory / capacity
  bool fits = false;
  double shortfall_bytes = 0;  // max over used devices of peak - capacity (> 0 when it misses)
  int shortfall_device = -1;   // the device with that largest overshoot
  std::string fingerprint;
};

// Strict weak order: a is a better plan than b under the objective.
bool better(const Evaluation& a, const Evaluation& b, Objective objective);

class Evaluator {
 public:
  Evaluator(const model::Model& m, const cluster::Cluster& c, const SearchOptions& opts);

  // Validates and simulates (cached by plan fingerprint).
  Evaluation evaluate(const plan::Plan& p) const;
  // The same for many plans, on SearchOptions::threads threads; results in input order. With a
  // deadline, once one has succeeded (Evaluation::ok) no evaluation starts that would not end in
  // time, going by the longest simulation so far, with time left for `reserve` more after them:
  // the results are then those of a prefix of `plans`, plans best first making it the best ones.
  std::vector<Evaluation> evaluate_all(const std::vector<plan::Plan>& plans,
                                       const Deadline* deadline = nullptr, int reserve = 0) const;

  // Past `deadline`, once this evaluator has judged some plan ok, a simulation stops where it is
  // (Evaluation::stopped): a search past its time limit that already holds an answer ends without
  // waiting for one it no longer needs. `deadline` must outlive the evaluator.
  void stop_past(const Deadline& deadline) { deadline_ = &deadline; }
  void stop_past(const Deadline&& deadline) = delete;
  // Simulations here stop under `other`'s rule (and what is judged ok here does not count for it):
  // Megatron-LM's choice on its alike cluster stops once the real search holds an answer.
  void stop_as(const Evaluator& other) { rule_ = &other; }

  int simulated() const;  // distinct plans simulated so far
  // The wall-clock seconds of the longest simulation so far (0 before the first): what a planner
  // under a time limit keeps in hand for the one it must still run.
  double longest_simulation_s() const;
  // What a planner under `deadline` keeps in hand for a simulation it must still run: the longest
  // so far, or before the first (whose time is not known until one has run) as long as it has
  // spent already, which leaves the second half of its time for it.
  double kept_for_simulation_s(const Deadline& deadline) const {
    const double longest = longest_simulation_s();
    return longest > 0 ? longest : deadline.elapsed_s();
  }
  const SearchOptions& options() const { return opts_; }
  const model::Model& model() const { return m_; }
  const cluster::Cluster& cluster() const { return c_; }

 private:
  const model::Model& m_;
  const cluster::Cluster& c_;
  SearchOptions opts_;
  Result<sim::SimResult> timed_simulate(const plan::Plan& p) const;
  bool past_deadline_with_a_plan() const { return deadline_ && has_plan_ && deadline_->expired(); }
  const Deadline* deadline_ = nullptr;
  const Evaluator* rule_ = this;
  mutable std::atomic<bool> has_plan_{false};
  mutable std::mutex mu_;
  mutable std::map<std::string, Evaluation> cache_;
  mutable double longest_simulation_s_ = 0;
};

}  // namespace hetplan::search

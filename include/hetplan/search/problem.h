// What every planner is asked: a model, a cluster, a global batch, and how to search.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>

#include "hetplan/cluster/cluster.h"
#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"
#include "hetplan/sim/simulate.h"

namespace hetplan::search {

class TagGuide;  // tag_features.h

enum class Objective {
  time,    // the fastest plan that fits
  memory,  // the plan with the smallest peak memory relative to capacity (then the fastest)
};

struct SearchOptions {
  std::int64_t global_batch = 512;  // samples per iteration
  Objective objective = Objective::time;
  double time_limit_s = 0;  // 0: none; otherwise planners return their best so far
  int threads = 1;          // plans simulated in parallel
  // The stage-level planners draw no random numbers (ties are broken by plan fingerprint); TAG's
  // op grouping (METIS) takes the seed. The same seed gives the same plan.
  std::uint64_t seed = 1;
  int simulate_top = 8;  // per planner, how many of the best estimates are simulated
  sim::SimOptions sim;
  // When set, a plan it gives a reason for (the runtime cannot execute it) is never chosen: the
  // evaluator rejects it before simulating, with that reason. Empty: every plan may be chosen.
  // It is called from several threads at once (planners side by side, parallel simulations), so
  // it must not change shared state.
  std::function<std::string(const plan::Plan&)> executable;
  // The learned guidance of TAG's tree search and HeteroG's decoder (tag_features.h); null: TAG
  // searches with a uniform prior and HeteroG does not run.
  std::shared_ptr<TagGuide> tag_guide;
  // TAG's tree-search simulations; 0: up to 1000, within a budget of simulated work (5e6 compute
  // tasks for --algo tag, 3e6 in auto). Set, the search runs exactly that many (or until the
  // whole tree is evaluated), whatever their work: equal budgets for comparing priors.
  int tag_simulations = 0;
  // DLCP's gradient transport (plan.h's GradPriority, Multipath): with `dlcp`, the best plan is
  // also simulated with layer priorities and, on a cluster with equal routes, with spraying, and
  // the fastest kept; with allow_lossy_sync > 0 (at most plan::kMaxLossBound; implies dlcp), also
  // with that loss bound and the magnitude order.
  bool dlcp = false;
  double allow_lossy_sync = 0;
  // The pipeline planner also tries stages that span device types (each stage a part of every
  // chosen group, batch shares by speed), as Sailor does; false: one device group per stage.
  bool mixed_stages = true;
  // How the stage planners' plans compute attention (plan::Plan::attention); TAG's and HeteroG's
  // op-level plans place the core's ops one by one (plain) whatever this says.
  cost::Attention attention = cost::Attention::plain;
  // Every plan's precision (plan::Plan::precision); the model searched must be built in it
  // (model::load_model's dtype), else find_plan and find_frontier refuse. Unset: plans leave it
  // to the model's dtype.
  std::optional<model::DType> precision;
  // How every plan's engine runs the Adam step (plan::Plan::adam): a property of the engine the
  // plans are for, which the planners price but do not choose.
  cost::AdamKernels adam = cost::AdamKernels::fused;
  // How every plan's engine computes the loss (plan::Plan::loss), likewise priced, not chosen.
  cost::Loss loss = cost::Loss::unfused;
  // Losses every plan's engine computes again per micro-batch for its training metrics
  // (plan::Plan::metrics), likewise priced, not chosen.
  int metrics = 0;
  // Called with one line of progress ("pipeline: 120 shapes, best 1.23 s"); may be empty.
  std::function<void(const std::string&)> progress;
};

struct Problem {
  const model::Model& model;
  const cluster::Cluster& cluster;
  SearchOptions options;
};

// A wall-clock deadline from SearchOptions::time_limit_s (never expires when the limit is 0).
class Deadline {
 public:
  explicit Deadline(double limit_s) : limit_s_(limit_s), start_(std::chrono::steady_clock::now()) {}
  bool expired() const { return limit_s_ > 0 && elapsed_s() >= limit_s_; }
  // Seconds left before it expires (0 once it has; infinite without a limit).
  double remaining_s() const {
    return limit_s_ > 0 ? std::max(0.0, limit_s_ - elapsed_s())
                        : std::numeric_limits<double>::infinity();
  }
  double elapsed_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  double limit_s_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace hetplan::search

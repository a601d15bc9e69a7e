// The planner's front door: run the baselines and the chosen planner (or, for `auto`, every
// planner that applies) and return the best simulated plan with the baselines beside it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hetplan/core/error.h"
#include "hetplan/search/planners.h"
#include "hetplan/search/problem.h"

namespace hetplan::search {

enum class Algo { automatic, dp, megatron, uneven_dp, hap, pipeline, ft, tag, heterog };
// "auto", "dp", "megatron", "uneven-dp", "hap", "pipeline", "ft", "tag", "heterog"
const char* to_string(Algo a);
std::optional<Algo> algo_from_string(std::string_view s);
std::string algo_names();  // "auto|dp|...": the ones find_plan runs (ft is `hetplan pareto`)
// Why find_plan (and the search over devices to rent) takes no Algo::ft.
inline constexpr const char* kFtIsPareto =
    "--algo: ft: use `hetplan pareto` for the Frontier Tracking planner";

// Whether TAG's op-level search (and HeteroG's decoder) applies: clusters of up to 64 devices and
// 20000 (op, device) pairs.
bool tag_applies(const model::Model& m, const cluster::Cluster& c);

// Whether find_plan with `algo` runs TAG's search or HeteroG's decoder, the two that read the
// learned policy (SearchOptions::tag_guide).
bool reads_policy(Algo algo, const model::Model& m, const cluster::Cluster& c);

struct SearchResult {
  Evaluation best;                       // the best plan found (check best.fits)
  std::string planner;                   // which planner produced it
  std::vector<PlannerOutput> baselines;  // even-dp, proportional-dp, megatron
  std::vector<PlannerOutput> planners;   // the planners run for the chosen algorithm
  double search_time_s = 0;              // wall-clock, baselines included
  bool timed_out = false;                // best is the best found before the time limit
  int plans_simulated = 0;
  // With SearchOptions::dlcp: the best plan before its gradient transport was chosen (ok == false
  // when the transport was not tried or nothing beat the plain one).
  Evaluation plain_transport;
};

// The interleaved variants of a 1F1B pipeline that find_plan tries (Megatron-LM's schedule, which
// shrinks the bubble by v at the cost of v times the boundary transfers): for v = 2, 3, 4, each
// stage's layers cut into v chunks of as even layer counts as they allow (the first chunks the
// larger), and stage k of the v P stages holds chunk k / P of stage k mod P on its replicas. None
// for op-level plans, other schedules, plans of one stage, plans whose stages share devices, and a
// v that leaves a chunk without a layer or does not divide the micro-batches by P.
std::vector<plan::Plan> interleaved_variants(const plan::Plan& p);

// The variants of p's gradient transport that find_plan tries with SearchOptions::dlcp: layer
// priority, spraying where c has equal routes, both, and with a loss bound the magnitude order
// at that bound (with and without spraying), each with ZeRO 0 (a ZeRO-1 plan's variants hold
// whole optimizer states, which the simulator checks against memory). None for op-level plans,
// plans without a stage of two replicas or more, ZeRO 2 or 3, or sufficient factors (what the
// chunked transport does not model).
std::vector<plan::Plan> grad_transport_variants(const plan::Plan& p, const cluster::Cluster& c,
                                                double loss_bound);

// Errors: an algorithm not implemented yet, or no plan at all could be built. A best plan that
// does not fit is returned (best.fits == false, with its shortfall) for the caller to report.
Result<SearchResult> find_plan(const model::Model& m, const cluster::Cluster& c, Algo algo,
                               const SearchOptions& opts);

struct FrontierResult {
  std::vector<Evaluation> points;  // the simulated Pareto frontier, fastest first
  double search_time_s = 0;
  bool timed_out = false;
  int plans_simulated = 0;
  long long estimated = 0;
};

// Frontier Tracking over the pipeline decision space; an error when no plan fits at all.
Result<FrontierResult> find_frontier(const model::Model& m, const cluster::Cluster& c,
                                     const SearchOptions& opts, double epsilon = 0.03);

// "does not fit: the closest plan needs X more on device D (peak P of capacity C)".
std::string shortfall_message(const cluster::Cluster& c, const Evaluation& e);

}  // namespace hetplan::search

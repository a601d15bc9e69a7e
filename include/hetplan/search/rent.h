// Which of a cluster's GPUs to rent: the planner run on subsets of the devices (whole node groups,
// a number of a group's nodes, or of a lone node's devices), each plan priced by the devices it
// uses (DeviceType::price_per_hour), and the subset chosen by time within a budget per hour or by
// money per iteration within an iteration-time limit, as Sailor's planner answers "what to rent".
#pragma once

#include <string>
#include <vector>

#include "hetplan/cluster/cluster.h"
#include "hetplan/core/error.h"
#include "hetplan/core/units.h"
#include "hetplan/model/model.h"
#include "hetplan/search/search.h"

namespace hetplan::search {

// time: the fastest plan within the budget per hour. cost: the fewest dollars per iteration within
// the iteration-time limit; with a fixed global batch this is also the most samples per dollar
// (samples/s per $/h), so `plan --objective throughput-per-dollar` asks the same question.
enum class RentObjective { time, cost };

// Plans within this fraction of the best by the objective count as equal to it, and the best of
// them by the other measure is chosen: a plan 0.1% dearer but four times faster is the better buy.
inline constexpr double kRentTolerance = 0.005;

struct RentOptions {
  RentObjective objective = RentObjective::cost;
  UsdPerHour budget_per_hour;  // 0: no budget
  Seconds max_iteration_time;  // 0: no limit
  int max_subsets = 64;        // subsets searched at most (the whole cluster always among them)
  // With a costly planner (auto, TAG, HeteroG), every subset is first searched by the pipeline
  // planner and the baselines, then this many of the best by the objective by the planner asked.
  int refine = 4;
};

// One subset of the cluster's devices and what the planner made of it.
struct SubsetPoint {
  std::vector<int> devices;  // ids in the whole cluster, ascending
  std::string label;         // "8 x H100-SXM5-80GB + 4 x L4"
  bool searched = false;     // false: skipped, for the reason in `note`
  bool fits = false;         // the search found a plan that fits
  std::string planner;       // the planner whose plan it is
  double iteration_time_s = 0;
  std::vector<int> used;  // the devices the plan uses (it may leave some of the subset idle)
  UsdPerHour price;       // of the devices the plan uses
  Usd per_iteration;      // price x iteration time
  std::string note;       // why skipped, why it does not fit, or why it misses a limit
};

struct RentResult {
  std::vector<SubsetPoint> subsets;  // in the order enumerated; the whole cluster first
  int chosen = -1;    // index of the subset whose plan is returned (see kRentTolerance)
  int fastest = -1;   // index of the fastest fitting plan (what --objective time picks)
  int cheapest = -1;  // index of the fitting plan of fewest $ per iteration
  SearchResult best;  // the chosen subset's search; plan devices in c's ids
};

// The subsets find_plan_to_rent searches: the whole cluster first, then for each node group (or,
// in the explicit form, each device type) every combination of 0, 1, 2, 4, ... and all of its
// nodes (of its devices, when the group has one node), the empty one excepted; thinned, when
// there are more than max_subsets, by dropping the middle counts of the groups with the most.
std::vector<std::vector<int>> device_subsets(const cluster::Cluster& c, int max_subsets);

// "8 x H100-SXM5-80GB + 4 x L4" for devices of c.
std::string subset_label(const cluster::Cluster& c, const std::vector<int>& devices);

// Runs find_plan (algo, opts) on each subset (or screens them first, see RentOptions::refine),
// each search with an even share of opts.time_limit_s. Errors: a device type without a price, no
// subset within the budget, or no fitting plan within the limits (the message says the closest).
Result<RentResult> find_plan_to_rent(const model::Model& m, const cluster::Cluster& c, Algo algo,
                                     const SearchOptions& opts, const RentOptions& ro);

}  // namespace hetplan::search

// The way each weight gradient is synchronised, chosen for all of them at once by a small MILP
// (TAG's "lossless gradient compression"; HeteroG's per-op parameter server or all-reduce):
// all-reduce, a parameter server, or sufficient factor broadcasting (sim/grad_sync.h), minimising
// the synchronisation time that the ways' loads on the shared links, their latencies and the
// sufficient factors' gradient rebuilds add up to.
//
// A request in, a choice out: sync_request prices an op's ways with the simulator's own costs,
// solve_sync_milp solves the program with GLPK (search/lp.h) and checks the answer against
// sync_objective, an evaluation of the same objective written independently of the program.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "hetplan/cluster/cluster.h"
#include "hetplan/cost/collective_cost.h"
#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"
#include "hetplan/sim/simulate.h"

namespace hetplan::search {

// The ways, in the order of SyncItem::ways; a choice is an index into this.
inline constexpr std::array<plan::SyncMethod, 3> kSyncWays = {plan::SyncMethod::all_reduce,
                                                              plan::SyncMethod::parameter_server,
                                                              plan::SyncMethod::sufficient_factor};
inline constexpr int kAllReduce = 0, kParameterServer = 1, kSufficientFactor = 2;

// One way to synchronise one item's gradient.
struct SyncWay {
  bool allowed = false;
  std::vector<cost::LinkLoad> loads;  // bytes on each link, ascending by link, each link once
  double latency_s = 0;               // the collectives' latency term
  std::vector<double> compute_s;      // seconds added per compute unit (SyncRequest::units)
};

// One op whose gradient's way is to be chosen.
struct SyncItem {
  std::string name;  // the op's name: what a plan::GradSync rule for it names
  std::array<SyncWay, 3> ways;
};

struct SyncRequest {
  std::vector<double> link_capacity;  // bytes/s per cluster link (bandwidth x efficiency)
  std::vector<cost::LinkLoad> fixed;  // bytes every choice leaves on the links (the gradients
                                      // that are not items), ascending by link
  int units = 0;                      // compute units: one per replica of a stage
  std::vector<SyncItem> items;
  double time_limit_s = 0;  // the solver's (LpRequest::time_limit_s); 0: kSyncMilpNodeLimit only
};

// Branch-and-cut nodes the program may take (LpRequest::node_limit): a few seconds at most.
inline constexpr int kSyncMilpNodeLimit = 2000;

enum class SyncStatus {
  optimal,   // the MILP's optimum, checked by sync_objective
  limited,   // the best choice found within kSyncMilpNodeLimit nodes, checked by sync_objective
  fallback,  // GLPK failed or its answer did not check: all-reduce everywhere (see warning)
};

struct SyncChoice {
  SyncStatus status = SyncStatus::fallback;
  std::vector<int> way;    // per item, an index into kSyncWays
  double objective_s = 0;  // sync_objective of `way`
  std::string warning;     // why the status is fallback
};

// The objective, evaluated directly: max over links of (fixed + chosen bytes) / capacity, plus
// max over units of the chosen ways' compute, plus the chosen ways' latencies. Every way chosen
// must be allowed (an assertion).
double sync_objective(const SyncRequest& req, const std::vector<int>& way);

// The choice minimising sync_objective; on ties all-reduce before the others (an item switches
// only when that strictly shortens the objective); where branch and cut reaches
// kSyncMilpNodeLimit nodes, the best choice it found (limited). Never throws: a failed solve is a
// fallback.
SyncChoice solve_sync_milp(const SyncRequest& req);

// The items of plan p: every op that sufficient factor broadcasting applies to
// (sim::gradient_sync_ways) in a stage with two or more replicas, which no grad_sync rule of p
// names. Parameter servers are allowed only without ZeRO (the push/pull returns whole parameters,
// not an optimizer shard). Link capacities as the simulator's (bandwidth x link_efficiency).
// Asked before each op, SimOptions::stop leaves the request without items once it says stop.
SyncRequest sync_request(const model::Model& m, const cluster::Cluster& c, const plan::Plan& p,
                         const sim::SimOptions& opts);

}  // namespace hetplan::search

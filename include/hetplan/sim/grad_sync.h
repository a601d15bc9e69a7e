// Gradient synchronisation choices, priced by the simulator's own costs for planners.
//
// Sufficient factor broadcasting (Poseidon; TAG's "lossless gradient compression"): the weight
// gradient of a matmul is a sum over the batch's rows of (input row) x (output-gradient row).
// Instead of all-reducing the k x n gradient, replicas all-gather every row's two factors (k + n
// values) and each rebuilds the whole gradient with one GEMM. It pays where the rows per
// iteration are few against k x n / (k + n): the wide fully connected layers of CNNs, not the
// token-rich layers of transformers.
#pragma once

#include <string>
#include <vector>

#include "hetplan/cluster/cluster.h"
#include "hetplan/cost/collective_cost.h"
#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"
#include "hetplan/sim/simulate.h"

namespace hetplan::sim {

// Whether sufficient factor broadcasting can synchronise the gradient of `op` split as `split`:
// a matmul with its own weights, not an expert FFN, not split by batch inside a replica.
bool sufficient_factor_applies(const model::Op& op, plan::SplitKind split);

// One op's gradient synchronised alone, both ways (seconds, standalone, no overlap).
struct FactorChoice {
  int op = 0;                      // Model::ops index
  double all_reduce_s = 0;         // all-reduce (ZeRO: reduce-scatter) of its weight gradient
  double sufficient_factor_s = 0;  // factor all-gather plus the slowest replica's rebuild
};

// Every op of every stage with two or more replicas where sufficient factor broadcasting applies,
// in op order.
std::vector<FactorChoice> sufficient_factor_choices(const model::Model& m,
                                                    const cluster::Cluster& c, const plan::Plan& p,
                                                    const SimOptions& opts);

// One op's gradient, priced every way the simulator can synchronise it, as it would run each:
// the collectives (run together, one per tensor-parallel rank index), and for sufficient factors
// each replica's seconds to rebuild the gradient.
struct OpSyncWays {
  int op = 0;     // Model::ops index
  int stage = 0;  // Plan::stages index
  std::vector<cost::CollectiveCost> all_reduce;  // ZeRO: reduce-scatter
  std::vector<cost::CollectiveCost> parameter_server;
  std::vector<cost::CollectiveCost> factor_gathers;
  std::vector<double> rebuild_s;  // per replica of the stage
};

struct GradSyncWays {
  // Every op of every stage with two or more replicas where sufficient factor broadcasting
  // applies and no grad_sync rule of the plan names the op, in op order.
  std::vector<OpSyncWays> ops;
  // Per stage with two or more replicas, the all-reduce (ZeRO: reduce-scatter) of the gradients
  // of its other ops with parameters that no rule names: what the simulator runs for them
  // whatever the ops above choose.
  std::vector<cost::CollectiveCost> fixed;
  bool stopped = false;  // SimOptions::stop said so before the end: ops and fixed are empty
};

// SimOptions::stop is asked before each op's ways are priced.
GradSyncWays gradient_sync_ways(const model::Model& m, const cluster::Cluster& c,
                                const plan::Plan& p, const SimOptions& opts);

}  // namespace hetplan::sim

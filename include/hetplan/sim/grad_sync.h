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

}  // namespace hetplan::sim

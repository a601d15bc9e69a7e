// The simulator's own per-layer costs, for planners that estimate many candidates before they
// simulate a few: the same compute times and tensor-parallel collectives the simulator charges
// for a replica's forward and backward passes, per layer, and the optimizer step per layer.
#pragma once

#include <memory>
#include <vector>

#include "hetplan/cluster/cluster.h"
#include "hetplan/cost/memory_cost.h"
#include "hetplan/cost/memory_table.h"
#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"
#include "hetplan/sim/simulate.h"

namespace hetplan::sim {

struct LayerCostTable {
  std::vector<double> forward;    // seconds per layer for one micro-batch of `samples`
  std::vector<double> backward;   // including recomputation
  std::vector<double> optimizer;  // the optimizer step of this replica's shard of each layer
};

class LayerCosts {
 public:
  // `settings` supplies recompute, sequence parallelism, ZeRO stage and op overrides; its stages
  // are ignored.
  LayerCosts(const model::Model& m, const cluster::Cluster& c, const plan::Plan& settings,
             const SimOptions& opts);
  ~LayerCosts();
  LayerCosts(const LayerCosts&) = delete;
  LayerCosts& operator=(const LayerCosts&) = delete;

  // Every layer of the model on replica r (its devices and tp_shares) running `samples` samples
  // per micro-batch, in a stage of `dp_replicas` replicas (the ZeRO split of the optimizer).
  LayerCostTable replica(const plan::Replica& r, double samples, int dp_replicas) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The memory model's view of device j of replica r in a stage of `dp_replicas` replicas holding
// layers [first, first + count), with `samples` per micro-batch and `inflight` micro-batches alive,
// under the plan's settings (recompute, ZeRO, sequence parallelism, op splits): as the simulator
// charges it.
cost::MemoryConfig memory_config(const model::Model& m, const plan::Plan& settings, int first,
                                 int count, const plan::Replica& r, int j, int dp_replicas,
                                 double samples, double inflight);
// The same device's memory over every layer range: at(first, count) is stage_memory of
// memory_config(m, settings, first, count, ...) up to rounding.
cost::StageMemoryTable memory_table(const model::Model& m, const plan::Plan& settings,
                                    const plan::Replica& r, int j, int dp_replicas, double samples,
                                    double inflight);

}  // namespace hetplan::sim

// Internal to the simulator: the compute time of one replica of one stage, per layer, including the
// tensor-parallel collectives that sit on its critical path.
#pragma once

#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "hetplan/cluster/cluster.h"
#include "hetplan/cost/collective_cost.h"
#include "hetplan/cost/compute_cost.h"
#include "hetplan/model/model.h"
#include "hetplan/model/training.h"
#include "hetplan/plan/plan.h"
#include "hetplan/sim/tensor_layout.h"

namespace hetplan::sim::detail {

// Tensor-parallel collectives of some part of a pass, merged into one flow: the simulator runs
// them after that part's compute, on links it shares with every other transfer. Alone on its
// links the flow takes exactly the sum of the collectives' times. An approximation under
// contention: the flow spreads each collective's bytes over the whole flow's duration, so a link
// that one short collective loads heavily shows a lower demand than it has while that one runs.
struct PassComm {
  double latency = 0;                 // the collectives' latencies, summed
  double transfer = 0;                // their bandwidth terms (each alone on its links), summed
  std::vector<cost::LinkLoad> loads;  // bytes per link, summed, ascending by link
  double time() const { return latency + transfer; }
  bool empty() const { return latency <= 0 && transfer <= 0; }
  // `load_share` of the collective's bytes on each link (a part of a collective that several
  // flows run together).
  void add(const cost::CollectiveCost& c, bool with_loads = true, double load_share = 1.0);
  void add(const PassComm& o);
};

struct LayerTimes {
  std::vector<double> forward;   // per layer of the stage, seconds for one micro-batch
  std::vector<double> backward;  // includes recomputation
  // The tensor-parallel collectives inside forward[k] and backward[k].
  std::vector<PassComm> forward_comm, backward_comm;
  double optimizer = 0;  // the optimizer step for this replica's parameter shard
  std::vector<double> layer_optimizer;  // its part for each layer, in order (summing to it)
  double forward_total = 0, backward_total = 0;
  // Layers [first, first + count): compute seconds, and their collectives.
  double compute(bool forward_pass, int first, int count) const;
  PassComm comm(bool forward_pass, int first, int count) const;
};

class StageCoster {
 public:
  // With `cpu_share_slows`, a device of a node with a cpu_share computes that much slower (the
  // planners' estimates); without, at full speed (the simulator applies the share as a quota).
  StageCoster(const model::Model& m, const cluster::Cluster& c, const plan::Plan& p,
              const cost::ComputeCostModel& compute, const cost::NetworkParams& net,
              bool cpu_share_slows = true);

  // Without `loads`, the PassComms carry times only (what the planners' estimates need).
  LayerTimes replica_times(const plan::Stage& s, const plan::Replica& r, double samples,
                           bool loads = true) const;

  // Device j's share of op `op`'s work in replica r.
  double op_share(int op, const plan::Replica& r, int j) const;
  // Parameters of layers [first, first + count) whose ops the plan splits by batch: every device
  // of a replica holds them whole and their gradients are all-reduced over the replica.
  double batch_split_params(int first, int count) const;
  // Collectives that synchronise `grad_bytes` of a stage's gradients over its replicas, run
  // together: one per tensor-parallel rank index of the smallest replica, over that rank's device
  // in every replica, each at the largest share of the gradient a replica holds at that rank (a
  // larger replica's ranks j, j + k, ... together, k the smallest replica's size).
  std::vector<cost::CollectiveCost> sync_parts(const plan::Stage& st, double grad_bytes,
                                               cost::Collective kind, cost::Algorithm algo) const;
  // Sufficient factor broadcasting (sim/grad_sync.h) of the weight gradients of `ops` over a
  // stage's replicas, for an iteration of `global_batch` samples: the all-gathers of the factors
  // (one per tensor-parallel rank index, or one over every device when the replicas' sizes
  // differ), and replica r's time to
  // rebuild its shards of the gradients from the other replicas' samples (its slowest device).
  std::vector<cost::CollectiveCost> factor_gathers(const plan::Stage& st,
                                                   const std::vector<int>& ops,
                                                   double global_batch) const;
  double rebuild_time(const plan::Stage& st, std::size_t r, const std::vector<int>& ops,
                      double global_batch) const;
  plan::SplitKind split(int op) const { return split_[op]; }
  // Cost of a collective, cached by (kind, algorithm, form, devices, bytes, shares).
  cost::CollectiveCost collective(cost::Collective kind, const std::vector<int>& devices,
                                  double bytes, const std::vector<double>& shares,
                                  cost::Algorithm algo = cost::Algorithm::automatic,
                                  std::optional<cost::UnevenForm> form = std::nullopt) const;

 private:
  // Seconds of one pass of `op` on `device` (its type's cost, slowed by its node's cpu_share when
  // cpu_share_slows_).
  double device_time(int device, const model::TrainOp& op, double samples, double shard) const;
  // Whether devices a and b compute at the same speed (one type, one CPU share).
  bool same_speed(int a, int b) const;
  // Bytes per sample of the factors device j of replica r holds for its shard of matmul `op`.
  double factor_bytes(int op, const plan::Replica& r, int j) const;

  const model::Model& m_;
  const cluster::Cluster& c_;
  const plan::Plan& p_;
  const cost::ComputeCostModel& compute_;
  const cost::NetworkParams& net_;
  model::TrainingGraph tg_;
  std::vector<int> backward_index_;     // op -> index in tg_.backward
  std::vector<int> optimizer_index_;    // op -> index in tg_.optimizer or -1
  std::vector<plan::SplitKind> split_;  // per op, as the plan says
  std::vector<OpLayout> layout_;        // per op, under its split
  std::vector<bool> whole_work_;        // every device of a replica computes all of the op
  std::vector<bool> whole_params_;      // every device of a replica holds all of its weights
  int tied_owner_;                      // the op whose table a tied LM head reads (model.h)
  bool cpu_share_slows_;
  std::optional<cost::UnevenForm> tp_form_;  // the plan's form for uneven shards, or the cheaper
  mutable std::map<std::tuple<int, std::vector<int>, double, std::vector<double>>,
                   cost::CollectiveCost>
      cache_;
};

}  // namespace hetplan::sim::detail

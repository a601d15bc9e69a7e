// A fast analytic estimate of a plan's iteration time and per-device peak memory, built from the
// simulator's own per-layer costs (sim::LayerCosts) and the cost layer's collectives and memory
// model. Planners rank thousands of candidates with it and simulate only the best few; the
// simulator, not the estimate, has the last word.
//
// Time (1F1B or GPipe, S stages, m micro-batches): per stage the slowest replica's forward plus
// backward time per micro-batch plus its boundary transfers, T_s; the pipeline takes
// sum_s T_s + (m - 1) max_s T_s; each stage's gradient synchronisation overlaps its last backward
// pass, and the iteration ends when the last stage to finish has synchronised and stepped.
// Memory: cost::stage_memory per device with the activations of min(m, S - s) micro-batches in
// flight under 1F1B (m under GPipe), as the simulator's pass order gives.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "hetplan/plan/plan.h"
#include "hetplan/search/problem.h"
#include "hetplan/sim/layer_costs.h"

namespace hetplan::search {

struct Estimate {
  double time_s = 0;
  double max_peak_bytes = 0;
  double memory_ratio = 0;  // max over used devices of peak / capacity
  bool fits = true;
};

// Not thread-safe (it caches).
class Estimator {
 public:
  Estimator(const model::Model& m, const cluster::Cluster& c, const SearchOptions& opts);
  ~Estimator();

  Estimate estimate(const plan::Plan& p) const;

  // The per-layer costs of a replica under the plan's settings (recompute, ZeRO, overrides).
  const sim::LayerCostTable& layer_costs(const plan::Plan& settings, const plan::Replica& r,
                                         double samples, int dp) const;
  // Peak memory of device j of replica r in a stage [first, first + count) with `inflight`
  // micro-batches alive, under the plan's settings.
  double device_memory(const plan::Plan& settings, int first, int count, const plan::Replica& r,
                       int j, int dp, double samples, double inflight) const;
  // Seconds to synchronise the gradients of layers [first, first + count) over a stage's replicas.
  double sync_time(const plan::Plan& settings, int first, int count,
                   const std::vector<plan::Replica>& replicas) const;
  // Seconds to send one micro-batch's activations across the boundary after `layer`.
  double boundary_time(int layer, double samples, const plan::Replica& from,
                       const plan::Replica& to) const;

 private:
  const model::Model& m_;
  const cluster::Cluster& c_;
  SearchOptions opts_;
  // By (recompute, sequence parallelism, ZeRO stage, op overrides).
  using SettingsKey =
      std::tuple<int, bool, int, plan::UnevenCollectives, std::vector<plan::OpOverride>>;
  mutable std::map<SettingsKey, std::unique_ptr<sim::LayerCosts>> costers_;
  mutable std::map<std::tuple<SettingsKey, std::vector<int>, std::vector<double>, double, int>,
                   sim::LayerCostTable>
      tables_;
  struct MemoryKey {
    int recompute, zero, first, count, tp, dp;
    bool sp;
    double share, samples, inflight;
    bool operator==(const MemoryKey&) const = default;
  };
  struct MemoryKeyHash {
    std::size_t operator()(const MemoryKey& k) const;
  };
  // A direct-mapped cache: a fixed number of slots, each holding the last key that hashed there.
  // Bounded memory and no rehashing; a search whose keys rarely repeat pays little for it.
  struct MemorySlot {
    MemoryKey key{};
    double bytes = -1;  // < 0: empty
  };
  static constexpr std::size_t kMemorySlots = std::size_t{1} << 16;
  mutable std::vector<MemorySlot> memory_;
  mutable std::map<std::tuple<std::vector<int>, double>, double> sync_;
  mutable std::map<std::tuple<int, int, double>, double> p2p_;
};

}  // namespace hetplan::search

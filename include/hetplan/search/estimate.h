// A fast analytic estimate of a plan's iteration time and per-device peak memory, built from the
// simulator's own per-layer costs (sim::LayerCosts) and the cost layer's collectives and memory
// model. Planners rank thousands of candidates with it and simulate only the best few; the
// simulator, not the estimate, has the last word.
//
// Time (S stages, m micro-batches): per stage the slowest replica's forward and backward time per
// micro-batch; per boundary the time its replicas' transfers of one micro-batch take together,
// sharing the links they cross. GPipe and 1F1B pipelines are replayed pass by pass in the
// simulator's order (pipeline_finish_times), with transfers overlapping computation; interleaved
// ones take sum_s (T_s + 2 C_s) + (m - 1) max_s max(T_s, C_s). Each stage's gradient
// synchronisation overlaps its last backward pass; a tied LM head away from its embedding then
// sums the two copies' gradients; the iteration ends when the last stage has stepped. Against the
// simulator over every pipeline plan of the oracle tests that fits (EstimateOracle: 40,068 on
// three-kinds-6, 11,712 on two-kinds-8): mean error 0.4% and 0.7%, from 8.5% under to 5.8% over.
// Before the replay (transfers added to the stages' times, sum + (m - 1) max) it was 4.5% on
// three-kinds-6, from 14% under to 30% over.
// Memory: cost::stage_memory per device with the activations of min(m, S - s) micro-batches in
// flight under 1F1B (m under GPipe), as the simulator's pass order gives.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "hetplan/cost/collective_cost.h"
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
  // The same, except that once the plan's peak memory is known and its time bounded below (by m
  // times its slowest stage's forward and backward passes), a plan `unwanted` says no to is left
  // there: nullopt, its time unworked.
  std::optional<Estimate> estimate_unless(
      const plan::Plan& p,
      const std::function<bool(double time_at_least_s, double max_peak_bytes)>& unwanted) const;

  // The per-layer costs of a replica under the plan's settings (recompute, ZeRO, overrides).
  const sim::LayerCostTable& layer_costs(const plan::Plan& settings, const plan::Replica& r,
                                         double samples, int dp) const;
  // Peak memory of device j of replica r in a stage [first, first + count) with `inflight`
  // micro-batches alive, under the plan's settings.
  double device_memory(const plan::Plan& settings, int first, int count, const plan::Replica& r,
                       int j, int dp, double samples, double inflight) const;
  // device_memory over every layer range [first, first + count) at once (memory_table's at).
  cost::StageMemoryTable memory_table(const plan::Plan& settings, const plan::Replica& r, int j,
                                      int dp, double samples, double inflight) const;
  // Seconds to synchronise the gradients of layers [first, first + count) over a stage's replicas:
  // the all-reduce (ZeRO >= 1: reduce-scatter) once the backward pass ends, and under ZeRO the
  // gather of the parameters (1 and 2: the updated ones, after the optimizer step; 3: before
  // every pass).
  struct SyncTime {
    double reduce = 0;
    double gather = 0;
  };
  SyncTime sync_time(const plan::Plan& settings, int first, int count,
                     const std::vector<plan::Replica>& replicas) const;
  // Seconds to send one micro-batch's activations across the boundary after `layer`.
  double boundary_time(int layer, double samples, const plan::Replica& from,
                       const plan::Replica& to) const;
  // Seconds the boundary after stage s of p takes to pass one micro-batch's activations one way:
  // every pair of replicas holding common samples sends their rows at once (split over their
  // tensor-parallel ranks, as the simulator does), sharing the links they cross (a node's NIC).
  double boundary_time(const plan::Plan& p, int s) const;

 private:
  const model::Model& m_;
  const cluster::Cluster& c_;
  SearchOptions opts_;
  // Per link, the bytes per second transfers reach on it (bandwidth x cost::link_efficiency).
  std::vector<double> link_rate_;
  // By (recompute, attention, sequence parallelism, ZeRO stage, op overrides).
  using SettingsKey =
      std::tuple<int, int, bool, int, plan::UnevenCollectives, std::vector<plan::OpOverride>>;
  mutable std::map<SettingsKey, std::unique_ptr<sim::LayerCosts>> costers_;
  mutable std::map<std::tuple<SettingsKey, std::vector<int>, std::vector<double>, double, int>,
                   sim::LayerCostTable>
      tables_;
  struct MemoryKey {
    int recompute, attention, zero, first, count, tp, dp;
    int overrides;  // the plan's op_overrides: 0 for none, else override_ids_'s
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
  // Each distinct list of op overrides seen (HAP's programs repeat a few), numbered from 1.
  mutable std::map<std::vector<plan::OpOverride>, int> override_ids_;
  // By (group, bytes, ZeRO stage): the stage chooses the collectives.
  mutable std::map<std::tuple<std::vector<int>, double, int>, SyncTime> sync_;
  mutable std::map<std::tuple<int, int, double>, cost::CollectiveCost> p2p_;
  mutable std::map<std::tuple<std::vector<int>, double>, double> tied_;
  // The stages of the word embedding and of the tied head that reads its table (equal when the
  // model has none, or one stage holds both).
  std::pair<int, int> tied_stages(const plan::Plan& p) const;
  // How many times longer one of tp parallel collectives over `group` (its first devices) takes
  // when the group crosses nodes and the tp collectives share their nodes' NICs.
  double nic_sharing(const std::vector<int>& group, std::size_t tp) const;
  // Seconds to sum the tied table's gradients over stages a's and b's replicas.
  double tied_sync_time(const plan::Plan& p, int a, int b) const;
  const cost::CollectiveCost& p2p(int from, int to, double bytes) const;
};

// When each stage of a GPipe or 1F1B pipeline of `microbatches` micro-batches ends its last pass
// (seconds from the start): stage s runs its passes in the simulator's order (sim::pass_order),
// a micro-batch's forward pass (fwd[s] seconds) once the stage before has sent its activations,
// its backward pass (bwd[s]) once the next stage has sent back their gradient; the boundary
// after stage s carries one transfer at a time each way (boundary[s] seconds each), while the
// stages compute. pass_gather (ZeRO-3; empty for none): stage s gathers its parameters before
// each pass, one gather after another from the start (pass_gather[s] seconds each), so its j-th
// pass starts no sooner than (j + 1) * pass_gather[s]. slice_reduce (ZeRO-2 and -3; empty for
// none): stage s reduce-scatters the gradients of every micro-batch but the last one after
// another, each once its backward pass ends (slice_reduce[s] seconds each); `reduced` then gets
// when each stage's last such reduce ends (0 for none).
std::vector<double> pipeline_finish_times(plan::Schedule schedule, int microbatches,
                                          const std::vector<double>& fwd,
                                          const std::vector<double>& bwd,
                                          const std::vector<double>& boundary,
                                          const std::vector<double>& pass_gather = {},
                                          const std::vector<double>& slice_reduce = {},
                                          std::vector<double>* reduced = nullptr);

}  // namespace hetplan::search

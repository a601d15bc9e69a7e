// Uneven data parallelism: one pipeline stage; each device group split into tensor-parallel
// replicas inside its nodes (a degree per group); batch shares per replica from the share LP
// (uneven_shares.h), with the per-sample cost re-measured at the resulting micro-batch sizes until
// the shares stop changing (at most a few rounds).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "hetplan/search/device_groups.h"
#include "hetplan/search/planners.h"
#include "hetplan/search/uneven_shares.h"
#include "search_space.h"

namespace hetplan::search {
namespace {

// Every choice of a tensor-parallel degree per device group (powers of two within a node that
// split the model's heads evenly).
std::vector<std::vector<int>> tp_choices(const std::vector<DeviceGroup>& groups,
                                         const model::Model& m) {
  std::vector<std::vector<int>> out{{}};
  for (const auto& g : groups) {
    std::vector<std::vector<int>> next;
    for (const auto& prefix : out)
      for (int tp : powers_of_two(std::min(8, g.devices_per_node))) {
        if (g.devices_per_node % tp || !even_tp_splits(m, tp)) continue;
        auto v = prefix;
        v.push_back(tp);
        next.push_back(std::move(v));
      }
    out = std::move(next);
  }
  return out;
}

// Samples per iteration replica r can hold in memory with m micro-batches (one in flight).
std::int64_t memory_bound(const Context& ctx, const plan::Plan& settings, const plan::Replica& r,
                          int dp, int m) {
  const int L = static_cast<int>(ctx.model.layers.size());
  double best = 1e18;
  for (std::size_t j = 0; j < r.devices.size(); ++j) {
    const double cap = ctx.cluster.type_of(r.devices[j]).memory.value;
    const double fixed =
        ctx.estimator.device_memory(settings, 0, L, r, static_cast<int>(j), dp, 0.0, 1.0);
    const double one =
        ctx.estimator.device_memory(settings, 0, L, r, static_cast<int>(j), dp, 1.0, 1.0) - fixed;
    if (fixed > cap) return 0;
    best = std::min(best, one > 0 ? (cap - fixed) / one : 1e18);
  }
  return static_cast<std::int64_t>(std::min(1e15, std::floor(best) * m));
}

}  // namespace

PlannerOutput uneven_dp(const Context& ctx) {
  const auto groups = device_groups(ctx.cluster);
  const std::int64_t B = ctx.options.global_batch;
  const int L = static_cast<int>(ctx.model.layers.size());
  std::vector<plan::Plan> candidates;
  // ZeRO stages 0 and 1 first; 2 and 3 (gradients, then parameters sharded too) only where no
  // candidate of those fits.
  auto add_candidates = [&](std::initializer_list<int> zeros) {
    for (const auto& tps : tp_choices(groups, ctx.model)) {
      std::vector<plan::Replica> reps;
      for (std::size_t g = 0; g < groups.size(); ++g) {
        auto r = tp_replicas(ctx.cluster, groups[g].devices(), tps[g]);
        reps.insert(reps.end(), r.begin(), r.end());
      }
      const int R = static_cast<int>(reps.size());
      if (R == 0 || B < 1) continue;
      // A replica like the one before it holds as many samples and takes as long.
      std::vector<char> like_last(static_cast<std::size_t>(R), 0);
      for (int r = 1; r < R; ++r)
        like_last[r] = same_replica_class(ctx.cluster, reps[r], reps[r - 1]);
      for (auto rc : recompute_modes(ctx.model))
        for (int zero : zeros) {
          if (zero && R == 1) continue;
          for (int m = 1; m <= B; m *= 2) {
            // Out of time: the best so far, at least one.
            if (out_of_time(ctx) && !candidates.empty()) break;
            plan::Plan p = base_plan(ctx, "uneven-dp");
            p.recompute = rc;
            p.zero_stage = zero;
            p.num_microbatches = m;
            ShareProblem prob;
            prob.total = B;
            for (int r = 0; r < R; ++r)
              prob.max_samples.push_back(like_last[r] ? prob.max_samples.back()
                                                      : memory_bound(ctx, p, reps[r], R, m));
            // Start from shares proportional to peak FLOP/s, then refine at the resulting sizes.
            std::vector<double> guess;
            for (const auto& r : reps) {
              double peak = 0;
              for (int d : r.devices) peak += device_peak(ctx.cluster, d, ctx.model.dtype);
              guess.push_back(peak);
            }
            std::vector<std::int64_t> samples = proportional_split(guess, B);
            bool ok = true;
            for (int round = 0; round < 3 && ok; ++round) {
              prob.per_sample_time.clear();
              for (int r = 0; r < R; ++r) {
                if (like_last[r] && samples[r] == samples[r - 1]) {
                  prob.per_sample_time.push_back(prob.per_sample_time.back());
                  continue;
                }
                const double s = std::max(1.0, static_cast<double>(samples[r]) / m);
                const auto& t = ctx.estimator.layer_costs(p, reps[r], s, R);
                double sum = 0;
                for (int li = 0; li < L; ++li) sum += t.forward[li] + t.backward[li];
                prob.per_sample_time.push_back(sum / s / m);
              }
              auto sol = solve_shares(prob);
              if (!sol) {
                ok = false;
                break;
              }
              if (sol->samples == samples) break;
              samples = sol->samples;
            }
            if (!ok) continue;
            // Skip a split that leaves every replica idle. (A replica with fewer than m samples
            // sits out some micro-batch rounds; the simulator charges what it does.)
            std::int64_t active = 0;
            for (auto s : samples) active += s > 0;
            if (active == 0) continue;
            plan::Stage st;
            st.num_layers = L;
            st.replicas = reps;
            set_batch_shares(st.replicas, samples);
            p.stages.push_back(std::move(st));
            candidates.push_back(std::move(p));
            if (B / m < R) break;  // fewer samples per round than replicas: stop adding rounds
          }
        }
    }
  };
  add_candidates({0, 1});
  if (std::none_of(candidates.begin(), candidates.end(),
                   [&](const plan::Plan& p) { return ctx.estimator.estimate(p).fits; }))
    add_candidates({2, 3});
  if (candidates.empty()) {
    PlannerOutput none;
    none.name = "uneven-dp";
    none.best.error = fmt::format(
        "no split of the {} samples fits: under every tensor-parallel degree within a node, "
        "recomputation and ZeRO stage, the replicas' memory holds fewer (each replica keeps "
        "the whole model's layers; pipelines split them: --algo pipeline or auto)",
        B);
    return none;
  }
  return select_candidates(ctx, "uneven-dp", std::move(candidates));
}

}  // namespace hetplan::search

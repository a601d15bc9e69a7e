// The three baselines a user would set up by hand.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "hetplan/plan/strategy.h"
#include "hetplan/search/device_groups.h"
#include "hetplan/search/planners.h"
#include "search_space.h"

namespace hetplan::search {
namespace {

// Data parallelism over every device with the given integer samples per device.
std::vector<plan::Plan> dp_candidates(const Context& ctx, const std::string& planner,
                                      const std::vector<std::int64_t>& samples) {
  const cluster::Cluster& c = ctx.cluster;
  const std::int64_t B = ctx.options.global_batch;
  std::int64_t smallest = B;
  for (auto s : samples) smallest = std::min(smallest, s);
  std::vector<plan::Plan> out;
  for (auto rc : {cost::Recompute::none, cost::Recompute::full})
    for (int m = 1; m <= smallest; m *= 2) {
      plan::Plan p = base_plan(ctx, planner);
      p.num_microbatches = m;
      p.recompute = rc;
      plan::Stage st;
      st.num_layers = static_cast<int>(ctx.model.layers.size());
      std::vector<plan::Replica> reps;
      for (int d = 0; d < c.num_devices(); ++d) reps.push_back(plan::Replica{{d}, {}, 0});
      set_batch_shares(reps, samples);
      st.replicas = std::move(reps);
      p.stages.push_back(std::move(st));
      out.push_back(std::move(p));
    }
  return out;
}

PlannerOutput data_parallel(const Context& ctx, const std::string& name,
                            const std::vector<double>& weights) {
  const std::int64_t B = ctx.options.global_batch;
  if (B < ctx.cluster.num_devices()) {
    PlannerOutput out;
    out.name = name;
    out.best.error = "the global batch is smaller than the number of devices";
    return out;
  }
  return select_candidates(ctx, name, dp_candidates(ctx, name, proportional_split(weights, B)));
}

}  // namespace

PlannerOutput even_dp(const Context& ctx) {
  return data_parallel(
      ctx, "even-dp",
      std::vector<double>(static_cast<std::size_t>(ctx.cluster.num_devices()), 1.0));
}

PlannerOutput proportional_dp(const Context& ctx) {
  std::vector<double> w;
  for (int d = 0; d < ctx.cluster.num_devices(); ++d)
    w.push_back(device_peak(ctx.cluster, d, ctx.model.dtype));
  return data_parallel(ctx, "proportional-dp", w);
}

PlannerOutput megatron_grid(const Context& ctx) {
  const cluster::Cluster& real = ctx.cluster;
  // The cluster as a user who treats every device alike sees it.
  cluster::Cluster alike = real;
  int pick = 0;
  for (int t = 1; t < static_cast<int>(real.device_types.size()); ++t) {
    const auto& a = real.device_types[t];
    const auto& b = real.device_types[pick];
    if (a.memory < b.memory ||
        (a.memory == b.memory && a.peak(ctx.model.dtype) < b.peak(ctx.model.dtype)))
      pick = t;
  }
  for (auto& t : alike.device_types) t = real.device_types[pick];

  const int N = real.num_devices();
  int node_size = N;
  for (const auto& n : real.nodes) node_size = std::min<int>(node_size, n.devices.size());
  const std::int64_t B = ctx.options.global_batch;
  const int blocks = block_count(ctx.model);
  std::vector<plan::Plan> candidates;
  std::string refused;  // the first layout plan_from_strategy refused, and why
  for (int tp = 1; tp <= node_size && tp <= 8; tp *= 2) {
    if (node_size % tp) continue;
    for (int pp = 1; pp * tp <= N && pp <= blocks; ++pp) {
      if (N % (tp * pp)) continue;
      const int dp = N / (tp * pp);
      for (int mbs = 1; mbs <= 8; mbs *= 2) {
        if (B % (static_cast<std::int64_t>(dp) * mbs)) continue;
        const std::int64_t m = B / (static_cast<std::int64_t>(dp) * mbs);
        if (pp > 1 && m < pp) continue;
        for (auto rc : {cost::Recompute::none, cost::Recompute::selective, cost::Recompute::full})
          for (int zero : {0, 1}) {
            if (zero && dp == 1) continue;
            plan::Strategy s;
            s.dp = dp;
            s.tp = tp;
            s.pp = pp;
            s.mbs = mbs;
            s.gbs = B;
            s.recompute = rc;
            s.attention = ctx.options.attention;
            s.precision = ctx.options.precision;
            s.adam = ctx.options.adam;
            s.loss = ctx.options.loss;
            s.metrics = ctx.options.metrics;
            s.zero = zero;
            auto p = plan::plan_from_strategy(s, ctx.model, alike);
            if (!p) {
              if (refused.empty())
                refused = fmt::format("; dp={},tp={},pp={}: {}", dp, tp, pp, p.error().message);
              continue;
            }
            p->planner = "megatron";
            p->model = ctx.model.name;
            p->cluster = real.reference_or_name();
            candidates.push_back(std::move(*p));
          }
      }
    }
  }
  // Choose on the alike cluster, then judge on the real one.
  Evaluator alike_eval(ctx.model, alike, ctx.options);
  alike_eval.stop_as(ctx.evaluator);
  Estimator alike_est(ctx.model, alike, ctx.options);
  Context alike_ctx{ctx.model, alike, ctx.options, alike_eval, alike_est, ctx.deadline};
  const bool none = candidates.empty();
  // The choice leaves time for judging it on the real cluster (a simulation as long as one of
  // its own: the same plan on as many devices).
  PlannerOutput chosen =
      select_candidates(alike_ctx, "megatron", std::move(candidates), /*reserve=*/1);
  PlannerOutput out;
  out.name = "megatron";
  if (none) {
    // Say which of Megatron-LM's rules left nothing, so that a user sees what to change.
    out.best.error = fmt::format(
        "no Megatron-LM layout of the {} devices: tp a power of two up to 8 dividing the smallest "
        "node's {} devices, pp up to the model's {} blocks, dp = {}/(tp*pp), dp*mbs (mbs 1 to "
        "8) dividing the global batch {}, and with pp > 1 at least pp micro-batches "
        "({}/(dp*mbs) >= pp){}",
        N, node_size, blocks, N, B, B, refused);
    return out;
  }
  out.estimated = chosen.estimated;
  out.timed_out = chosen.timed_out;
  if (!chosen.best.ok) {
    out.best = chosen.best;
    return out;
  }
  out.best = ctx.evaluator.evaluate(chosen.best.plan);
  out.simulated = {out.best};
  return out;
}

}  // namespace hetplan::search

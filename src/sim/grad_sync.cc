#include "hetplan/sim/grad_sync.h"

#include <algorithm>

#include "stage_costs.h"

namespace hetplan::sim {

bool sufficient_factor_applies(const model::Op& op, plan::SplitKind split) {
  return op.kind == model::OpKind::matmul && op.params > 0 && op.gemm.m > 0 &&
         op.gemm.batch_count > 0 && op.shard != model::ShardKind::expert &&
         split != plan::SplitKind::batch && split != plan::SplitKind::batch_sharded;
}

// The network the per-op ways are priced on: the simulator runs an op's gradient sync in the
// stage's buckets (simulate.cc), whose sizes NCCL sends with the Simple protocol; priced op by op
// at the op's own size the collectives would take LL or LL128 and their flags, which the buckets
// do not pay.
namespace {
cost::NetworkParams bucketed(cost::NetworkParams net) {
  net.protocols = false;
  return net;
}
}  // namespace

std::vector<FactorChoice> sufficient_factor_choices(const model::Model& m,
                                                    const cluster::Cluster& c, const plan::Plan& p,
                                                    const SimOptions& opts) {
  const cost::ComputeCostModel compute(opts.compute, opts.profile);
  const cost::NetworkParams network = bucketed(opts.network);
  const detail::StageCoster coster(m, c, p, compute, network);
  const double batch = static_cast<double>(p.global_batch);
  const cost::Collective kind =
      p.zero_stage >= 1 ? cost::Collective::reduce_scatter : cost::Collective::all_reduce;
  auto slowest = [](const std::vector<cost::CollectiveCost>& parts) {
    double t = 0;
    for (const auto& part : parts) t = std::max(t, part.time.value);
    return t;
  };
  std::vector<FactorChoice> out;
  for (std::size_t s = 0; s < p.stages.size(); ++s) {
    const plan::Stage& st = p.stages[s];
    if (st.replicas.size() < 2) continue;
    for (int li = st.first_layer; li < st.first_layer + st.num_layers; ++li) {
      const model::Layer& layer = m.layers[li];
      for (int op = layer.first_op; op < layer.first_op + layer.num_ops; ++op) {
        if (!sufficient_factor_applies(m.ops[op], coster.split(op))) continue;
        FactorChoice f;
        f.op = op;
        f.all_reduce_s = slowest(coster.sync_parts(
            st, static_cast<double>(m.ops[op].params) * model::dtype_bytes(m.dtype), kind,
            cost::Algorithm::automatic));
        double rebuild = 0;
        for (std::size_t r = 0; r < st.replicas.size(); ++r)
          rebuild = std::max(rebuild, coster.rebuild_time(st, r, {op}, batch));
        f.sufficient_factor_s = slowest(coster.factor_gathers(st, {op}, batch)) + rebuild;
        out.push_back(f);
      }
    }
  }
  return out;
}

GradSyncWays gradient_sync_ways(const model::Model& m, const cluster::Cluster& c,
                                const plan::Plan& p, const SimOptions& opts) {
  const cost::ComputeCostModel compute(opts.compute, opts.profile);
  const cost::NetworkParams network = bucketed(opts.network);
  const detail::StageCoster coster(m, c, p, compute, network);
  const double batch = static_cast<double>(p.global_batch);
  const double bytes_per_param = model::dtype_bytes(m.dtype);
  const cost::Collective kind =
      p.zero_stage >= 1 ? cost::Collective::reduce_scatter : cost::Collective::all_reduce;
  auto named = [&](const model::Op& op) {
    for (const auto& rule : p.grad_sync)
      if (plan::op_pattern_matches(rule.ops, op.name)) return true;
    return false;
  };
  GradSyncWays out;
  for (std::size_t s = 0; s < p.stages.size(); ++s) {
    const plan::Stage& st = p.stages[s];
    if (st.replicas.size() < 2) continue;
    double fixed_params = 0;
    for (int li = st.first_layer; li < st.first_layer + st.num_layers; ++li) {
      const model::Layer& layer = m.layers[li];
      for (int op = layer.first_op; op < layer.first_op + layer.num_ops; ++op) {
        const model::Op& o = m.ops[op];
        if (o.params == 0 || named(o)) continue;
        if (opts.stop && opts.stop()) return GradSyncWays{{}, {}, true};
        if (!sufficient_factor_applies(o, coster.split(op))) {
          fixed_params += static_cast<double>(o.params);
          continue;
        }
        const double bytes = static_cast<double>(o.params) * bytes_per_param;
        OpSyncWays w;
        w.op = op;
        w.stage = static_cast<int>(s);
        w.all_reduce = coster.sync_parts(st, bytes, kind, cost::Algorithm::automatic);
        w.parameter_server = coster.sync_parts(st, bytes, cost::Collective::ps_push_pull,
                                               cost::Algorithm::parameter_server);
        w.factor_gathers = coster.factor_gathers(st, {op}, batch);
        for (std::size_t r = 0; r < st.replicas.size(); ++r)
          w.rebuild_s.push_back(coster.rebuild_time(st, r, {op}, batch));
        out.ops.push_back(std::move(w));
      }
    }
    if (fixed_params > 0) {
      auto parts = coster.sync_parts(st, fixed_params * bytes_per_param, kind,
                                     cost::Algorithm::automatic);
      out.fixed.insert(out.fixed.end(), parts.begin(), parts.end());
    }
  }
  return out;
}

}  // namespace hetplan::sim

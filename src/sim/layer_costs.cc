#include "hetplan/sim/layer_costs.h"

#include "hetplan/sim/tensor_layout.h"
#include "stage_costs.h"

namespace hetplan::sim {

struct LayerCosts::Impl {
  const model::Model& m;
  plan::Plan settings;
  cost::ComputeCostModel compute;
  cost::NetworkParams net;
  detail::StageCoster coster;
  Impl(const model::Model& mm, const cluster::Cluster& c, const plan::Plan& p,
       const SimOptions& opts)
      : m(mm),
        settings(p),
        compute(opts.compute, opts.profile),
        net(opts.network),
        coster(mm, c, settings, compute, net) {}
};

LayerCosts::LayerCosts(const model::Model& m, const cluster::Cluster& c, const plan::Plan& settings,
                       const SimOptions& opts)
    : impl_(std::make_unique<Impl>(m, c, settings, opts)) {}

LayerCosts::~LayerCosts() = default;

LayerCostTable LayerCosts::replica(const plan::Replica& r, double samples, int dp_replicas) const {
  plan::Stage st;
  st.first_layer = 0;
  st.num_layers = static_cast<int>(impl_->m.layers.size());
  st.replicas.assign(static_cast<std::size_t>(std::max(1, dp_replicas)), r);
  const auto all = impl_->coster.replica_times(st, r, samples, false);
  LayerCostTable out;
  out.forward = all.forward;
  out.backward = all.backward;
  out.optimizer = all.layer_optimizer;
  return out;
}

namespace {

// The rest of op's weights and gradient a device holding `shard` of them gathers for a pass when
// the plan splits it batch_sharded; nothing otherwise.
Bytes gathered_bytes(const model::Model& m, const model::Op& op, plan::SplitKind split,
                     double shard) {
  if (split != plan::SplitKind::batch_sharded) return Bytes(0);
  return Bytes(static_cast<double>(op.params) * (1 - shard) * 2 * model::dtype_bytes(m.dtype));
}

}  // namespace

namespace {

// memory_config, and where by_layer is given, per layer the largest gathered_bytes of its ops
// (all 0 unless the plan splits ops other than by their kind).
cost::MemoryConfig config_of(const model::Model& m, const plan::Plan& settings, int first,
                             int count, const plan::Replica& r, int j, int dp_replicas,
                             double samples, double inflight, std::vector<Bytes>* by_layer) {
  cost::MemoryConfig cfg;
  cfg.first_layer = first;
  cfg.num_layers = count;
  const int tp = static_cast<int>(r.devices.size());
  cfg.param_shard = r.tp_shares.empty() ? 1.0 / tp : r.tp_shares[static_cast<std::size_t>(j)];
  cfg.activation_shard = cfg.param_shard;
  cfg.zero_stage = settings.zero_stage;
  cfg.zero_group = dp_replicas;
  cfg.recompute = settings.recompute;
  cfg.attention = settings.attention;
  cfg.loss = settings.loss;
  cfg.sequence_parallel = settings.sequence_parallel;
  cfg.tensor_parallel = tp;
  cfg.micro_batch = samples;
  cfg.inflight_microbatches = inflight;
  if (!settings.op_overrides.empty() && tp > 1) {
    cfg.whole_params.resize(m.ops.size());
    cfg.whole_activations.resize(m.ops.size());
    cfg.split_inputs.resize(m.ops.size());
    if (by_layer) by_layer->assign(m.layers.size(), Bytes(0));
    for (std::size_t i = 0; i < m.ops.size(); ++i) {
      const plan::SplitKind split = plan::split_of(settings, m.ops[i].name);
      cfg.whole_params[i] = holds_whole_weights(m.ops[i], split);
      cfg.whole_activations[i] = computes_whole(m.ops[i], split, settings.sequence_parallel);
      const Layout in = op_layout(m.ops[i], split, settings.sequence_parallel).input;
      cfg.split_inputs[i] = in == Layout::batch || in == Layout::sequence;
      const int layer = m.ops[i].layer;
      const Bytes gathered = gathered_bytes(m, m.ops[i], split, cfg.param_shard);
      if (layer >= first && layer < first + count)
        cfg.gathered_weights = max(cfg.gathered_weights, gathered);
      if (by_layer && layer >= 0 && layer < static_cast<int>(by_layer->size()))
        (*by_layer)[layer] = max((*by_layer)[layer], gathered);
    }
  }
  return cfg;
}

}  // namespace

cost::MemoryConfig memory_config(const model::Model& m, const plan::Plan& settings, int first,
                                 int count, const plan::Replica& r, int j, int dp_replicas,
                                 double samples, double inflight) {
  return config_of(m, settings, first, count, r, j, dp_replicas, samples, inflight, nullptr);
}

cost::StageMemoryTable memory_table(const model::Model& m, const plan::Plan& settings,
                                    const plan::Replica& r, int j, int dp_replicas, double samples,
                                    double inflight) {
  std::vector<Bytes> gathered;
  const cost::MemoryConfig cfg = config_of(m, settings, 0, static_cast<int>(m.layers.size()), r, j,
                                           dp_replicas, samples, inflight, &gathered);
  return cost::StageMemoryTable(m, cfg, gathered);
}

}  // namespace hetplan::sim

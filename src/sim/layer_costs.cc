#include "hetplan/sim/layer_costs.h"

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
  const auto all = impl_->coster.replica_times(st, r, samples);
  LayerCostTable out;
  out.forward = all.forward;
  out.backward = all.backward;
  out.optimizer.resize(out.forward.size());
  for (int li = 0; li < st.num_layers; ++li) {
    plan::Stage one = st;
    one.first_layer = li;
    one.num_layers = 1;
    out.optimizer[li] = impl_->coster.replica_times(one, r, samples).optimizer;
  }
  return out;
}

}  // namespace hetplan::sim

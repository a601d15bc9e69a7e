#include "stage_costs.h"

#include <algorithm>
#include <string_view>

namespace hetplan::sim::detail {
StageCoster::StageCoster(const model::Model& m, const cluster::Cluster& c, const plan::Plan& p,
                         const cost::ComputeCostModel& compute, const cost::NetworkParams& net)
    : m_(m), c_(c), p_(p), compute_(compute), net_(net), tg_(model::derive_training_graph(m)) {
  const std::size_t n = m.ops.size();
  backward_index_.assign(n, -1);
  optimizer_index_.assign(n, -1);
  for (std::size_t i = 0; i < tg_.backward.size(); ++i)
    backward_index_[tg_.backward[i].op] = static_cast<int>(i);
  for (std::size_t i = 0; i < tg_.optimizer.size(); ++i)
    optimizer_index_[tg_.optimizer[i].op] = static_cast<int>(i);
  replicated_.assign(n, false);
  for (std::size_t i = 0; i < n; ++i) {
    bool rep = m.ops[i].shard == model::ShardKind::replicated;
    for (const auto& o : p.op_overrides)
      if (plan::op_pattern_matches(o.ops, m.ops[i].name)) {
        rep = o.split == plan::SplitKind::replicate;
        break;
      }
    replicated_[i] = rep;
  }
}

double StageCoster::op_share(int op, const plan::Replica& r, int j) const {
  const int tp = static_cast<int>(r.devices.size());
  if (tp == 1) return 1.0;
  // Sequence parallelism splits the replicated ops (norms, dropout, residual) along the sequence.
  if (replicated_[op] &&
      !(p_.sequence_parallel && m_.ops[op].shard == model::ShardKind::replicated))
    return 1.0;
  return r.tp_shares.empty() ? 1.0 / tp : r.tp_shares[j];
}

cost::CollectiveCost StageCoster::collective(cost::Collective kind, const std::vector<int>& devices,
                                             double bytes, const std::vector<double>& shares,
                                             cost::Algorithm algo) const {
  auto key =
      std::make_tuple(static_cast<int>(kind) * 16 + static_cast<int>(algo), devices, bytes, shares);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  cost::CollectiveRequest req;
  req.kind = kind;
  req.devices = devices;
  req.bytes = Bytes(bytes);
  req.shares = shares;
  req.algorithm = algo;
  auto res = cost::collective_cost(c_, req, net_);
  cache_.emplace(std::move(key), res);
  return res;
}

LayerTimes StageCoster::replica_times(const plan::Stage& s, const plan::Replica& r,
                                      double samples) const {
  LayerTimes out;
  const int tp = static_cast<int>(r.devices.size());
  const model::DType dt = m_.dtype;
  auto tp_collective = [&](cost::Collective kind, double bytes) {
    if (tp == 1 || bytes <= 0) return 0.0;
    return collective(kind, r.devices, bytes, r.tp_shares).time.value;
  };
  for (int li = s.first_layer; li < s.first_layer + s.num_layers; ++li) {
    const model::Layer& layer = m_.layers[li];
    double fwd = 0, bwd = 0, recompute = 0;
    for (int op = layer.first_op; op < layer.first_op + layer.num_ops; ++op) {
      const model::Op& o = m_.ops[op];
      double tf = 0, tb = 0;
      for (int j = 0; j < tp; ++j) {
        const auto& type = c_.type_of(r.devices[j]);
        const double share = op_share(op, r, j);
        tf = std::max(tf, compute_.op_time(type, tg_.forward[op], samples, share, dt).value);
        if (backward_index_[op] >= 0)
          tb = std::max(
              tb,
              compute_.op_time(type, tg_.backward[backward_index_[op]], samples, share, dt).value);
      }
      // Tensor-parallel communication on the critical path (Megatron-LM: the row-parallel output
      // and the column-parallel input gradient are all-reduced; with sequence parallelism the same
      // volume moves as reduce-scatter plus all-gather). Experts move tokens by all-to-all.
      if (tp > 1 && !replicated_[op]) {
        switch (o.shard) {
          case model::ShardKind::row:
          case model::ShardKind::vocab:
            if (o.kind != model::OpKind::cross_entropy)
              tf += tp_collective(cost::Collective::all_reduce, o.bytes_written * samples);
            break;
          case model::ShardKind::column:
            tb += tp_collective(cost::Collective::all_reduce, o.bytes_read * samples);
            break;
          case model::ShardKind::expert:
            tf += 2 * tp_collective(cost::Collective::all_to_all, o.bytes_read * samples);
            tb += 2 * tp_collective(cost::Collective::all_to_all, o.bytes_read * samples);
            break;
          default:
            break;
        }
      }
      fwd += tf;
      bwd += tb;
      if (p_.recompute == cost::Recompute::full ||
          (p_.recompute == cost::Recompute::selective && o.attention_core))
        recompute += tf;
    }
    out.forward.push_back(fwd);
    out.backward.push_back(bwd + recompute);
    out.forward_total += fwd;
    out.backward_total += bwd + recompute;
  }
  // Optimizer: this replica's parameter shard, further split by ZeRO over the stage's replicas.
  const double zero_split = p_.zero_stage >= 1 ? static_cast<double>(s.replicas.size()) : 1.0;
  for (int li = s.first_layer; li < s.first_layer + s.num_layers; ++li) {
    const model::Layer& layer = m_.layers[li];
    for (int op = layer.first_op; op < layer.first_op + layer.num_ops; ++op) {
      if (optimizer_index_[op] < 0) continue;
      double t = 0;
      for (int j = 0; j < tp; ++j) {
        const double share =
            replicated_[op] ? 1.0 : (r.tp_shares.empty() ? 1.0 / tp : r.tp_shares[j]);
        t = std::max(t, compute_
                            .op_time(c_.type_of(r.devices[j]), tg_.optimizer[optimizer_index_[op]],
                                     1.0, share / zero_split, dt)
                            .value);
      }
      out.optimizer += t;
    }
  }
  return out;
}

}  // namespace hetplan::sim::detail

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
  split_.resize(n);
  layout_.resize(n);
  whole_work_.resize(n);
  whole_params_.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const model::Op& o = m.ops[i];
    split_[i] = p.op_overrides.empty() ? plan::SplitKind::tensor : plan::split_of(p, o.name);
    layout_[i] = op_layout(o, split_[i], p.sequence_parallel);
    // Sequence parallelism splits the replicated ops (norms, dropout, residual) along the sequence.
    whole_work_[i] = computes_whole(o, split_[i], p.sequence_parallel);
    whole_params_[i] = holds_whole_weights(o, split_[i]);
  }
}

double StageCoster::op_share(int op, const plan::Replica& r, int j) const {
  const int tp = static_cast<int>(r.devices.size());
  if (tp == 1 || whole_work_[op]) return 1.0;
  return r.tp_shares.empty() ? 1.0 / tp : r.tp_shares[j];
}

double StageCoster::batch_split_params(int first, int count) const {
  double params = 0;
  for (int li = first; li < first + count; ++li) {
    const model::Layer& layer = m_.layers[li];
    for (int op = layer.first_op; op < layer.first_op + layer.num_ops; ++op)
      if (split_[op] == plan::SplitKind::batch) params += static_cast<double>(m_.ops[op].params);
  }
  return params;
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
      // Tensor-parallel communication on the critical path: each input edge whose producer's
      // layout differs from what this op reads is converted in the forward pass, and this op's
      // input gradient into what the producer needs in the backward pass (tensor_layout.h). A
      // producer in an earlier stage arrives whole. Under Megatron-LM's splits this is the
      // row-parallel output's all-reduce and the column-parallel input gradient's (with sequence
      // parallelism: reduce-scatter and all-gather). Experts also move tokens by all-to-all, and a
      // vocabulary-split loss all-reduces its per-token maxima and sums.
      if (tp > 1) {
        const OpLayout& mine = layout_[op];
        for (int in : o.inputs) {
          const bool local = in >= m_.layers[s.first_layer].first_op;
          const Layout from = local ? layout_[in].output : Layout::replicated;
          const double bytes = m_.output_bytes(in) * samples;
          if (auto c = conversion(from, mine.input)) tf += tp_collective(*c, bytes);
          if (auto c = conversion(mine.input_grad, gradient_layout(from)))
            tb += tp_collective(*c, bytes);
        }
        if (split_[op] == plan::SplitKind::tensor) {
          if (o.shard == model::ShardKind::expert) {
            tf += 2 * tp_collective(cost::Collective::all_to_all, o.bytes_read * samples);
            tb += 2 * tp_collective(cost::Collective::all_to_all, o.bytes_read * samples);
          } else if (o.shard == model::ShardKind::vocab && o.kind == model::OpKind::cross_entropy) {
            tf += tp_collective(cost::Collective::all_reduce, 2 * o.bytes_written * samples);
          }
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
            whole_params_[op] ? 1.0 : (r.tp_shares.empty() ? 1.0 / tp : r.tp_shares[j]);
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

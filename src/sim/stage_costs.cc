#include "stage_costs.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "hetplan/cost/memory_cost.h"
#include "hetplan/plan/replica_slots.h"
#include "lowering_common.h"

namespace hetplan::sim::detail {
StageCoster::StageCoster(const model::Model& m, const cluster::Cluster& c, const plan::Plan& p,
                         const cost::ComputeCostModel& compute, const cost::NetworkParams& net,
                         bool cpu_share_slows)
    : m_(m),
      c_(c),
      p_(p),
      compute_(compute),
      net_(net),
      tg_(model::derive_training_graph(m)),
      tied_owner_(m.tied_owner()),
      cpu_share_slows_(cpu_share_slows) {
  const std::size_t n = m.ops.size();
  backward_index_.assign(n, -1);
  optimizer_index_.assign(n, -1);
  for (std::size_t i = 0; i < tg_.backward.size(); ++i)
    backward_index_[tg_.backward[i].op] = static_cast<int>(i);
  for (std::size_t i = 0; i < tg_.optimizer.size(); ++i)
    optimizer_index_[tg_.optimizer[i].op] = static_cast<int>(i);
  if (p.uneven_collectives == plan::UnevenCollectives::padded) tp_form_ = cost::UnevenForm::padded;
  if (p.uneven_collectives == plan::UnevenCollectives::grouped)
    tp_form_ = cost::UnevenForm::grouped;
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

namespace {

// Adds `more` (ascending by link) into `into` (ascending by link), summing the bytes of a link.
void merge_loads(std::vector<cost::LinkLoad>& into, const std::vector<cost::LinkLoad>& more) {
  std::vector<cost::LinkLoad> merged;
  merged.reserve(into.size() + more.size());
  std::size_t i = 0, j = 0;
  while (i < into.size() || j < more.size()) {
    if (j == more.size() || (i < into.size() && into[i].link < more[j].link)) {
      merged.push_back(into[i++]);
    } else if (i == into.size() || more[j].link < into[i].link) {
      merged.push_back(more[j++]);
    } else {
      merged.push_back({into[i].link, into[i].bytes + more[j].bytes});
      ++i;
      ++j;
    }
  }
  into = std::move(merged);
}

}  // namespace

void PassComm::add(const cost::CollectiveCost& c, bool with_loads, double load_share) {
  latency += c.latency.value;
  transfer += (c.time - c.latency).value;
  if (!with_loads) return;
  std::vector<cost::LinkLoad> sorted = c.loads;
  for (cost::LinkLoad& l : sorted) l.bytes *= load_share;
  auto by_link = [](const cost::LinkLoad& a, const cost::LinkLoad& b) { return a.link < b.link; };
  if (!std::is_sorted(sorted.begin(), sorted.end(), by_link))
    std::sort(sorted.begin(), sorted.end(), by_link);
  merge_loads(loads, sorted);
}

void PassComm::add(const PassComm& o) {
  latency += o.latency;
  transfer += o.transfer;
  merge_loads(loads, o.loads);
}

double LayerTimes::compute(bool forward_pass, int first, int count) const {
  const auto& total = forward_pass ? forward : backward;
  const auto& comms = forward_pass ? forward_comm : backward_comm;
  double t = 0;
  for (int k = first; k < first + count; ++k) t += std::max(0.0, total[k] - comms[k].time());
  return t;
}

PassComm LayerTimes::comm(bool forward_pass, int first, int count) const {
  const auto& comms = forward_pass ? forward_comm : backward_comm;
  PassComm out;
  for (int k = first; k < first + count; ++k) out.add(comms[k]);
  return out;
}

double StageCoster::device_time(int device, const model::TrainOp& op, double samples,
                                double shard) const {
  // A node limited to a share of its CPU (cluster files' cpu_share, emulated clusters) runs
  // everything proportionally slower, on average.
  const double cpu_share = cpu_share_slows_ ? c_.nodes[c_.devices[device].node].cpu_share : 1.0;
  if (cost::fused(p_.attention) && m_.ops[static_cast<std::size_t>(op.op)].attention_core)
    return compute_
               .fused_attention_time(c_.type_of(device), op, samples, shard, m_.dtype,
                                     m_.causal_attention(), p_.attention)
               .value /
           cpu_share;
  return engine_pass_time(compute_, c_.type_of(device), op, samples, shard, m_.dtype, p_) /
         cpu_share;
}

bool StageCoster::same_speed(int a, int b) const {
  const auto& da = c_.devices[a];
  const auto& db = c_.devices[b];
  return da.type == db.type &&
         (!cpu_share_slows_ || c_.nodes[da.node].cpu_share == c_.nodes[db.node].cpu_share);
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

namespace {

// Whether every replica of the stage has as many devices as its first (tensor-parallel rank j
// then means the same position in each).
bool replicas_alike(const plan::Stage& st) {
  for (const auto& r : st.replicas)
    if (r.devices.size() != st.replicas[0].devices.size()) return false;
  return true;
}

}  // namespace

std::vector<cost::CollectiveCost> StageCoster::sync_parts(const plan::Stage& st, double grad_bytes,
                                                          cost::Collective kind,
                                                          cost::Algorithm algo) const {
  // k slots, as many as the smallest replica has devices: slot j gathers, in each replica, its
  // devices j, j + k, j + 2k, ..., and one collective per slot runs over one device per replica
  // (the slot's first) with the largest share of the gradient any replica puts in the slot. Every
  // replica's whole gradient thus crosses between replicas once per slot set, as it must: the sum
  // is over replicas, not over devices. (A replica of more devices first reduces its slot's shards
  // onto the slot's first device and last spreads the result back, on its own links.)
  std::size_t k = st.replicas[0].devices.size();
  for (const auto& r : st.replicas) k = std::min(k, r.devices.size());
  std::vector<cost::CollectiveCost> parts;
  for (std::size_t j = 0; j < k; ++j) {
    std::vector<int> group;
    double share = 0;
    for (const auto& r : st.replicas) {
      group.push_back(r.devices[j]);
      share = std::max(share, plan::slot_share(r, j, k));
    }
    parts.push_back(collective(kind, group, grad_bytes * share, {}, algo));
  }
  return parts;
}

std::vector<cost::CollectiveCost> StageCoster::factor_gathers(const plan::Stage& st,
                                                              const std::vector<int>& ops,
                                                              double global_batch) const {
  std::vector<cost::CollectiveCost> parts;
  const std::size_t tp = st.replicas[0].devices.size();
  auto per_sample = [&](const plan::Replica& r, std::size_t j) {
    double bytes = 0;
    for (int op : ops) bytes += factor_bytes(op, r, static_cast<int>(j));
    return bytes;
  };
  if (!replicas_alike(st)) {
    // Replicas shard differently: one gather over every device, each contributing the factors of
    // its shard for its replica's samples (a device receives more than its shard needs).
    std::vector<int> group;
    std::vector<double> contribution;
    double total = 0;
    for (const auto& r : st.replicas)
      for (std::size_t j = 0; j < r.devices.size(); ++j) {
        group.push_back(r.devices[j]);
        contribution.push_back(per_sample(r, j) * global_batch * r.batch_share);
        total += contribution.back();
      }
    for (double& x : contribution) x /= total;
    parts.push_back(collective(cost::Collective::all_gather, group, total, contribution,
                               cost::Algorithm::automatic));
    return parts;
  }
  // One gather per tensor-parallel rank index: every sample of the iteration contributes its
  // factors and replica r holds batch_share of them. Device j's bytes per sample differ between
  // replicas only through uneven tp shares; the gather moves the largest.
  std::vector<double> shares;
  for (const auto& r : st.replicas) shares.push_back(r.batch_share);
  for (std::size_t j = 0; j < tp; ++j) {
    std::vector<int> group;
    double most = 0;
    for (const auto& r : st.replicas) {
      group.push_back(r.devices[j]);
      most = std::max(most, per_sample(r, j));
    }
    parts.push_back(collective(cost::Collective::all_gather, group, most * global_batch, shares,
                               cost::Algorithm::automatic));
  }
  return parts;
}

double StageCoster::factor_bytes(int op, const plan::Replica& r, int j) const {
  const model::Op& o = m_.ops[op];
  const double share = op_share(op, r, j);
  // The weight is k x n; a column-like split holds a slice of its n output features, a row split
  // a slice of its k input features. Each sample contributes m rows of both factors.
  double k = static_cast<double>(o.gemm.k), n = static_cast<double>(o.gemm.n);
  if (share < 1.0) {
    if (o.shard == model::ShardKind::row)
      k *= share;
    else
      n *= share;
  }
  return static_cast<double>(o.gemm.batch_count * o.gemm.m) * (k + n) *
         model::dtype_bytes(m_.dtype);
}

double StageCoster::rebuild_time(const plan::Stage& st, std::size_t r, const std::vector<int>& ops,
                                 double global_batch) const {
  // Rebuilding a weight gradient is the backward pass's weight-gradient GEMM, which has the
  // forward GEMM's volume, over the samples of the other replicas (its own it computed already).
  const plan::Replica& rep = st.replicas[r];
  const double samples = global_batch * (1.0 - rep.batch_share);
  double slowest = 0;
  for (std::size_t j = 0; j < rep.devices.size(); ++j) {
    double t = 0;
    for (int op : ops)
      t += device_time(rep.devices[j], tg_.forward[op], samples,
                       op_share(op, rep, static_cast<int>(j)));
    slowest = std::max(slowest, t);
  }
  return slowest;
}

cost::CollectiveCost StageCoster::collective(cost::Collective kind, const std::vector<int>& devices,
                                             double bytes, const std::vector<double>& shares,
                                             cost::Algorithm algo,
                                             std::optional<cost::UnevenForm> form) const {
  auto key = std::make_tuple((static_cast<int>(kind) * 16 + static_cast<int>(algo)) * 4 +
                                 (form ? 1 + static_cast<int>(*form) : 0),
                             devices, bytes, shares);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  cost::CollectiveRequest req;
  req.kind = kind;
  req.devices = devices;
  req.bytes = Bytes(bytes);
  req.shares = shares;
  req.algorithm = algo;
  req.uneven_form = form;
  auto res = cost::collective_cost(c_, req, net_);
  cache_.emplace(std::move(key), res);
  return res;
}

LayerTimes StageCoster::replica_times(const plan::Stage& s, const plan::Replica& r, double samples,
                                      bool loads) const {
  LayerTimes out;
  const int tp = static_cast<int>(r.devices.size());
  // Adds a tensor-parallel collective's time to `t` and the collective to `comm`.
  auto tp_collective = [&](cost::Collective kind, double bytes, double& t, PassComm& comm) {
    if (tp == 1 || bytes <= 0) return;
    const auto c =
        collective(kind, r.devices, bytes, r.tp_shares, cost::Algorithm::automatic, tp_form_);
    t += c.time.value;
    comm.add(c, loads);
  };
  // Synced batch normalisation all-reduces over the devices that split each micro-batch between
  // them: one device of each replica (the stage's replicas must differ; the planners' layer costs,
  // which repeat one replica, leave it out).
  std::vector<int> batch_group;
  if (p_.batch_norm == plan::BatchNormStats::synced)
    for (const plan::Replica& q : s.replicas)
      if (std::find(batch_group.begin(), batch_group.end(), q.devices.front()) == batch_group.end())
        batch_group.push_back(q.devices.front());
  // The host issues each op of a pass; the device runs their kernels behind it, so a layer's
  // pass takes at least the host's time for its ops (eager frameworks' floor: small models and
  // micro-batches). The slowest host of the replica's devices paces it.
  double host_forward = 0, host_backward = 0;
  for (int dev : r.devices) {
    host_forward = std::max(host_forward, compute_.host_op_time(c_.type_of(dev), true).value);
    host_backward = std::max(host_backward, compute_.host_op_time(c_.type_of(dev), false).value);
  }
  for (int li = s.first_layer; li < s.first_layer + s.num_layers; ++li) {
    const model::Layer& layer = m_.layers[li];
    double fwd = 0, bwd = 0, recompute = 0;
    // The layer's kernels alone, and how many ops issue them, per pass.
    double fwd_kernels = 0, bwd_kernels = 0, recompute_kernels = 0;
    int fwd_ops = 0, bwd_ops = 0, recompute_ops = 0;
    PassComm fwd_comm, bwd_comm, recompute_comm;
    for (int op = layer.first_op; op < layer.first_op + layer.num_ops; ++op) {
      const model::Op& o = m_.ops[op];
      double tf = 0, tb = 0;
      PassComm op_fwd_comm;
      for (int j = 0; j < tp; ++j) {
        const double share = op_share(op, r, j);
        // A device like the one before it, with the same share, takes the same time.
        if (j > 0 && share == op_share(op, r, j - 1) && same_speed(r.devices[j], r.devices[j - 1]))
          continue;
        tf = std::max(tf, device_time(r.devices[j], tg_.forward[op], samples, share));
        if (backward_index_[op] >= 0)
          tb = std::max(
              tb, device_time(r.devices[j], tg_.backward[backward_index_[op]], samples, share));
      }
      const bool recomputed = cost::recomputes(p_.recompute, m_, o);
      if (tf > 0) {
        fwd_kernels += tf;
        ++fwd_ops;
        if (recomputed) {
          recompute_kernels += tf;
          ++recompute_ops;
        }
      }
      if (tb > 0) {
        bwd_kernels += tb;
        ++bwd_ops;
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
          if (auto c = conversion(from, mine.input)) tp_collective(*c, bytes, tf, op_fwd_comm);
          if (auto c = conversion(mine.input_grad, gradient_layout(from)))
            tp_collective(*c, bytes, tb, bwd_comm);
        }
        // An op split by batch that reads a tied table split by vocabulary rows elsewhere (the
        // LM head of a batch program whose word embedding is split by tensor) gathers it as it
        // would its own sharded weights.
        const bool gathers_tied =
            o.tied_params > 0 && tied_owner_ >= 0 &&
            split_[tied_owner_] == plan::SplitKind::tensor &&
            (split_[op] == plan::SplitKind::batch || split_[op] == plan::SplitKind::batch_sharded);
        if ((split_[op] == plan::SplitKind::batch_sharded && o.params > 0) || gathers_tied) {
          // The weights gathered before each pass, and the gradients reduce-scattered after the
          // backward one, over the replica at its shares.
          const double bytes = static_cast<double>(o.params + (gathers_tied ? o.tied_params : 0)) *
                               model::dtype_bytes(m_.dtype);
          tp_collective(cost::Collective::all_gather, bytes, tf, op_fwd_comm);
          // A recomputed forward pass gathers them again, for the backward pass too.
          if (!cost::recomputes(p_.recompute, m_, o))
            tp_collective(cost::Collective::all_gather, bytes, tb, bwd_comm);
          tp_collective(cost::Collective::reduce_scatter, bytes, tb, bwd_comm);
        }
        if (split_[op] == plan::SplitKind::tensor) {
          if (o.shard == model::ShardKind::expert) {
            // Tokens to their experts and back, in each pass.
            for (int k = 0; k < 2; ++k) {
              tp_collective(cost::Collective::all_to_all, o.bytes_read * samples, tf, op_fwd_comm);
              tp_collective(cost::Collective::all_to_all, o.bytes_read * samples, tb, bwd_comm);
            }
          } else if (o.shard == model::ShardKind::vocab && o.kind == model::OpKind::cross_entropy) {
            tp_collective(cost::Collective::all_reduce, 2 * o.bytes_written * samples, tf,
                          op_fwd_comm);
          }
        }
      }
      if (o.kind == model::OpKind::batchnorm && batch_group.size() > 1 && o.params > 0) {
        // SyncBatchNorm: the forward pass sums each channel's values and squares and the sample
        // count, the backward pass each channel's two gradient sums; 8-byte sums, as the
        // runtime's (weight and bias: params = 2 x channels).
        const double channels = static_cast<double>(o.params) / 2;
        const auto stats =
            collective(cost::Collective::all_reduce, batch_group, 8 * (2 * channels + 1), {});
        // Every replica's pass runs its part of the one collective: its flow carries that share
        // of the links' bytes.
        const double part = 1.0 / static_cast<double>(batch_group.size());
        tf += stats.time.value;
        op_fwd_comm.add(stats, loads, part);
        const auto sums =
            collective(cost::Collective::all_reduce, batch_group, 8 * 2 * channels, {});
        tb += sums.time.value;
        bwd_comm.add(sums, loads, part);
      }
      fwd += tf;
      bwd += tb;
      fwd_comm.add(op_fwd_comm);
      if (recomputed) {
        recompute += tf;
        recompute_comm.add(op_fwd_comm);
      }
    }
    // What the host's issuing adds where it outlasts the kernels (HostOpTimes).
    fwd += host_paced(fwd_kernels, fwd_ops, host_forward) - fwd_kernels;
    recompute += host_paced(recompute_kernels, recompute_ops, host_forward) - recompute_kernels;
    bwd += host_paced(bwd_kernels, bwd_ops, host_backward) - bwd_kernels;
    bwd_comm.add(recompute_comm);
    out.forward_comm.push_back(std::move(fwd_comm));
    out.backward_comm.push_back(std::move(bwd_comm));
    out.forward.push_back(fwd);
    out.backward.push_back(bwd + recompute);
    out.forward_total += fwd;
    out.backward_total += bwd + recompute;
  }
  // Optimizer: this replica's parameter shard, further split by ZeRO over the stage's replicas.
  const double zero_split = p_.zero_stage >= 1 ? static_cast<double>(s.replicas.size()) : 1.0;
  for (int li = s.first_layer; li < s.first_layer + s.num_layers; ++li) {
    const model::Layer& layer = m_.layers[li];
    double in_layer = 0;
    for (int op = layer.first_op; op < layer.first_op + layer.num_ops; ++op) {
      if (optimizer_index_[op] < 0) continue;
      double t = 0;
      // ZeRO spreads the op's parameter tensors over the replicas (a tensor-parallel rank holds a
      // slice of each): a loop over tensors visits its share of them.
      model::TrainOp step = tg_.optimizer[optimizer_index_[op]];
      step.tensors = static_cast<int>(std::ceil(step.tensors / zero_split));
      for (int j = 0; j < tp; ++j) {
        const double share =
            whole_params_[op] ? 1.0 : (r.tp_shares.empty() ? 1.0 / tp : r.tp_shares[j]);
        t = std::max(t, device_time(r.devices[j], step, 1.0, share / zero_split));
      }
      out.optimizer += t;
      in_layer += t;
    }
    out.layer_optimizer.push_back(in_layer);
  }
  return out;
}

}  // namespace hetplan::sim::detail

#include "tensor_parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

namespace hetplan::runtime::detail {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Gloo has no bf16 collectives: a bf16 tensor (mixed precision's activations and their
// gradients) travels and is summed in fp32, then rounded back once.
bool narrow(const torch::Tensor& x) { return x.scalar_type() == torch::kBFloat16; }

torch::Tensor all_reduce(const torch::Tensor& x, Collectives* pg, c10d::ReduceOp op) {
  std::vector<torch::Tensor> t{narrow(x) ? x.to(torch::kFloat).contiguous()
                                         : x.contiguous().clone()};
  c10d::AllreduceOptions o;
  o.reduceOp = op;
  pg->allreduce(t, o)->wait();
  return t[0].to(x.scalar_type());
}

Collectives* group_of(AutogradContext* ctx) {
  return reinterpret_cast<Collectives*>(ctx->saved_data["pg"].toInt());
}

// How a tensor is split into the group's shards: along `dim`, rank i holding counts[i] of it.
struct Shards {
  std::int64_t dim = 1;
  std::vector<std::int64_t> counts;
  std::int64_t offset(int i) const {
    return std::accumulate(counts.begin(), counts.begin() + i, std::int64_t{0});
  }
  std::int64_t most() const { return *std::max_element(counts.begin(), counts.end()); }
  // x's shape with `n` along dim.
  std::vector<std::int64_t> shape(const torch::Tensor& x, std::int64_t n) const {
    auto out = x.sizes().vec();
    out[dim] = n;
    return out;
  }
};

// This rank's shard -> the whole tensor: the shards of every rank, in rank order.
torch::Tensor all_gather(const torch::Tensor& x, const TensorParallel& tp, const Shards& sh) {
  std::vector<torch::Tensor> parts;
  if (tp.grouped) {
    for (int i = 0; i < tp.size; ++i) {
      if (sh.counts[i] == 0) continue;  // every rank knows the counts: all skip it
      std::vector<torch::Tensor> t{i == tp.rank
                                       ? x.contiguous().clone()
                                       : torch::empty(sh.shape(x, sh.counts[i]), x.options())};
      c10d::BroadcastOptions o;
      o.rootRank = i;
      tp.group->broadcast(t, o)->wait();
      parts.push_back(t[0]);
    }
  } else {
    std::vector<torch::Tensor> in{
        torch::cat({x, torch::zeros(sh.shape(x, sh.most() - x.size(sh.dim)), x.options())}, sh.dim)
            .contiguous()};
    std::vector<std::vector<torch::Tensor>> out(1);
    for (int i = 0; i < tp.size; ++i) out[0].push_back(torch::empty_like(in[0]));
    tp.group->allgather(out, in)->wait();
    for (int i = 0; i < tp.size; ++i) parts.push_back(out[0][i].slice(sh.dim, 0, sh.counts[i]));
  }
  return torch::cat(parts, sh.dim);
}

// Partial sums of the whole tensor -> this rank's shard of their sum.
torch::Tensor reduce_scatter(const torch::Tensor& x, const TensorParallel& tp, const Shards& sh) {
  auto part = [&](int i) { return x.slice(sh.dim, sh.offset(i), sh.offset(i) + sh.counts[i]); };
  if (tp.grouped) {
    torch::Tensor mine = part(tp.rank).clone();  // an empty shard stays empty
    for (int i = 0; i < tp.size; ++i) {
      if (sh.counts[i] == 0) continue;
      std::vector<torch::Tensor> t{part(i).contiguous().clone()};
      c10d::ReduceOptions o;
      o.rootRank = i;
      o.reduceOp = c10d::ReduceOp::SUM;
      tp.group->reduce(t, o)->wait();
      if (i == tp.rank) mine = t[0];
    }
    return mine;
  }
  // Padded: every rank's slice padded to the largest, sent to its rank by an all-to-all, then
  // the received partial sums added up (Gloo has no reduce-scatter).
  std::vector<torch::Tensor> chunks;
  for (int i = 0; i < tp.size; ++i)
    chunks.push_back(torch::cat(
        {part(i), torch::zeros(sh.shape(x, sh.most() - sh.counts[i]), x.options())}, sh.dim));
  torch::Tensor in = torch::stack(chunks).contiguous(), out = torch::empty_like(in);
  std::vector<std::int64_t> even;
  c10d::AllToAllOptions o;
  tp.group->alltoall_base(out, in, even, even, o)->wait();
  return out.sum(0).slice(sh.dim, 0, sh.counts[tp.rank]);
}

// This rank's shard of a tensor every rank holds whole.
torch::Tensor own_shard(const torch::Tensor& x, const TensorParallel& tp, const Shards& sh) {
  return x.slice(sh.dim, sh.offset(tp.rank), sh.offset(tp.rank) + sh.counts[tp.rank]).clone();
}

const TensorParallel& tp_of(AutogradContext* ctx) {
  return *reinterpret_cast<const TensorParallel*>(ctx->saved_data["tp"].toInt());
}

// A step between shards and wholes as an autograd operation: Forward on the way in, Backward on
// the gradient (the four uses below pair a collective or a slice with its adjoint). The shards'
// dimension and counts are kept for the backward pass, as they may differ from call to call.
using ShardFn = torch::Tensor (*)(const torch::Tensor&, const TensorParallel&, const Shards&);

template <ShardFn Forward, ShardFn Backward>
class ShardStep : public torch::autograd::Function<ShardStep<Forward, Backward>> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, const TensorParallel* tp,
                               std::int64_t dim, std::vector<std::int64_t> counts) {
    ctx->saved_data["tp"] = reinterpret_cast<std::int64_t>(tp);
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["counts"] = counts;
    return in_fp32<Forward>(x, *tp, Shards{dim, std::move(counts)});
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const Shards sh{ctx->saved_data["dim"].toInt(), ctx->saved_data["counts"].toIntVector()};
    return {in_fp32<Backward>(grad[0], tp_of(ctx), sh), torch::Tensor(), torch::Tensor(),
            torch::Tensor()};
  }

 private:
  // F over x, a bf16 x widened for the collective (see narrow) and the result narrowed back.
  template <ShardFn F>
  static torch::Tensor in_fp32(const torch::Tensor& x, const TensorParallel& tp, const Shards& sh) {
    return narrow(x) ? F(x.to(torch::kFloat), tp, sh).to(x.scalar_type()) : F(x, tp, sh);
  }
};

using GatherShards = ShardStep<all_gather, reduce_scatter>;
using ReduceScatterShards = ShardStep<reduce_scatter, all_gather>;
using ScatterShards = ShardStep<own_shard, all_gather>;
using GatherShardsWhole = ShardStep<all_gather, own_shard>;

// Identity forward, zero gradient.
class GradientDropped : public torch::autograd::Function<GradientDropped> {
 public:
  static torch::Tensor forward(AutogradContext*, torch::Tensor x) { return x.view_as(x); }
  static variable_list backward(AutogradContext*, variable_list grad) {
    return {torch::zeros_like(grad[0])};
  }
};

class CopyToGroup : public torch::autograd::Function<CopyToGroup> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, Collectives* pg) {
    ctx->saved_data["pg"] = reinterpret_cast<std::int64_t>(pg);
    return x.clone();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {all_reduce(grad[0], group_of(ctx), c10d::ReduceOp::SUM), torch::Tensor()};
  }
};

class ReduceFromGroup : public torch::autograd::Function<ReduceFromGroup> {
 public:
  static torch::Tensor forward(AutogradContext*, torch::Tensor x, Collectives* pg) {
    return all_reduce(x, pg, c10d::ReduceOp::SUM);
  }
  static variable_list backward(AutogradContext*, variable_list grad) {
    return {grad[0], torch::Tensor()};
  }
};

// Batch normalisation with the statistics of the whole batch, when its samples are split over
// the group's ranks: per-channel sums, sums of squares and counts are summed over the group in the
// forward pass, and the two sums the input's gradient needs in the backward pass. The weight's and
// bias's gradients stay this rank's part (the replicas' gradient all-reduce sums them).
class BatchNormOverGroup : public torch::autograd::Function<BatchNormOverGroup> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, torch::Tensor weight,
                               torch::Tensor bias, Collectives* pg, double eps, bool count) {
    const std::int64_t c = x.size(1);
    const std::vector<std::int64_t> dims{0, 2, 3}, channel{1, c, 1, 1};
    // In double: the variance is a difference of sums, and the ranks' partial sums must add up to
    // the whole batch's whatever the split.
    const torch::Tensor xd = x.to(torch::kDouble);
    torch::Tensor stats =
        torch::cat({xd.sum(dims), (xd * xd).sum(dims),
                    torch::full({1}, static_cast<double>(x.numel() / c), xd.options())});
    if (pg) stats = all_reduce(count ? stats : torch::zeros_like(stats), pg, c10d::ReduceOp::SUM);
    const torch::Tensor n = stats.slice(0, 2 * c, 2 * c + 1);
    const torch::Tensor mean = stats.slice(0, 0, c) / n;
    const torch::Tensor var = stats.slice(0, c, 2 * c) / n - mean * mean;
    const torch::Tensor invstd = (var + eps).rsqrt().to(x.scalar_type());
    const torch::Tensor xhat = (x - mean.to(x.scalar_type()).view(channel)) * invstd.view(channel);
    ctx->save_for_backward({xhat, weight, invstd, n});
    ctx->saved_data["pg"] = reinterpret_cast<std::int64_t>(pg);
    ctx->saved_data["count"] = count;
    return xhat * weight.view(channel) + bias.view(channel);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &xhat = saved[0], &weight = saved[1], &invstd = saved[2], &n = saved[3];
    const torch::Tensor& gy = grad[0];
    const std::int64_t c = xhat.size(1);
    const std::vector<std::int64_t> dims{0, 2, 3}, channel{1, c, 1, 1};
    torch::Tensor sums = torch::cat(
        {gy.sum(dims, false, torch::kDouble), (gy * xhat).sum(dims, false, torch::kDouble)});
    const torch::Tensor dbias = sums.slice(0, 0, c).to(gy.scalar_type());
    const torch::Tensor dweight = sums.slice(0, c, 2 * c).to(gy.scalar_type());
    if (auto* pg = group_of(ctx))
      sums = all_reduce(ctx->saved_data["count"].toBool() ? sums : torch::zeros_like(sums), pg,
                        c10d::ReduceOp::SUM);
    const torch::Tensor mean_dy = (sums.slice(0, 0, c) / n).to(gy.scalar_type()).view(channel);
    const torch::Tensor mean_dy_xhat =
        (sums.slice(0, c, 2 * c) / n).to(gy.scalar_type()).view(channel);
    const torch::Tensor dx = (weight * invstd).view(channel) * (gy - mean_dy - xhat * mean_dy_xhat);
    return {dx, dweight, dbias, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor batch_norm_over_group(const torch::Tensor& x, const torch::Tensor& weight,
                                    const torch::Tensor& bias, Collectives* group, double eps,
                                    bool count) {
  return BatchNormOverGroup::apply(x, weight, bias, group, eps, count);
}

torch::Tensor copy_to_group(const torch::Tensor& x, const TensorParallel& tp) {
  return tp.active() ? CopyToGroup::apply(x, tp.group) : x;
}

torch::Tensor reduce_from_group(const torch::Tensor& x, const TensorParallel& tp) {
  return tp.active() ? ReduceFromGroup::apply(x, tp.group) : x;
}

torch::Tensor max_over_group(const torch::Tensor& x, const TensorParallel& tp) {
  return tp.active() ? all_reduce(x.detach(), tp.group, c10d::ReduceOp::MAX) : x.detach();
}

torch::Tensor gather_sequence(const torch::Tensor& x, const TensorParallel& tp) {
  return tp.sequence_parallel() ? GatherShards::apply(x, &tp, 1, tp.sequence) : x;
}

torch::Tensor reduce_scatter_sequence(const torch::Tensor& x, const TensorParallel& tp) {
  return tp.sequence_parallel() ? ReduceScatterShards::apply(x, &tp, 1, tp.sequence) : x;
}

torch::Tensor scatter_sequence(const torch::Tensor& x, const TensorParallel& tp) {
  return tp.sequence_parallel() ? ScatterShards::apply(x, &tp, 1, tp.sequence) : x;
}

torch::Tensor gather_sequence_whole(const torch::Tensor& x, const TensorParallel& tp) {
  return tp.sequence_parallel() ? GatherShardsWhole::apply(x, &tp, 1, tp.sequence) : x;
}

torch::Tensor gather_shards(const torch::Tensor& x, const TensorParallel& tp, std::int64_t dim,
                            const std::vector<std::int64_t>& counts) {
  return tp.active() ? GatherShards::apply(x, &tp, dim, counts) : x;
}

torch::Tensor reduce_scatter_shards(const torch::Tensor& x, const TensorParallel& tp,
                                    std::int64_t dim, const std::vector<std::int64_t>& counts) {
  return tp.active() ? ReduceScatterShards::apply(x, &tp, dim, counts) : x;
}

torch::Tensor scatter_shards(const torch::Tensor& x, const TensorParallel& tp, std::int64_t dim,
                             const std::vector<std::int64_t>& counts) {
  return tp.active() ? ScatterShards::apply(x, &tp, dim, counts) : x;
}

torch::Tensor gradient_on_first_rank(const torch::Tensor& x, const TensorParallel& tp) {
  return tp.active() && tp.rank != 0 ? GradientDropped::apply(x) : x;
}

}  // namespace hetplan::runtime::detail

#include "batch_program.h"

namespace hetplan::runtime::detail {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// x W^T for a weight W held in shards along `dim` (rank i holding counts[i], W's shape `shape`):
// W is gathered for the forward pass and again for the backward one, so that no pass keeps it
// between them, and W's gradient is reduce-scattered to the shards (FSDP's way, and the
// simulator's price of a batch_sharded op: a gather in each pass, a reduce-scatter).
class GatheredMatmul : public torch::autograd::Function<GatheredMatmul> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, torch::Tensor shard,
                               const TensorParallel* group, std::int64_t dim,
                               std::vector<std::int64_t> counts, std::vector<std::int64_t> shape) {
    ctx->save_for_backward({x, shard});
    ctx->saved_data["group"] = reinterpret_cast<std::int64_t>(group);
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["counts"] = counts;
    ctx->saved_data["shape"] = shape;
    return torch::matmul(x, gather_shards(shard, *group, dim, counts).view(shape).t());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &shard = saved[1];
    const auto& group = *reinterpret_cast<const TensorParallel*>(ctx->saved_data["group"].toInt());
    const std::int64_t dim = ctx->saved_data["dim"].toInt();
    const auto counts = ctx->saved_data["counts"].toIntVector();
    const auto shape = ctx->saved_data["shape"].toIntVector();
    const torch::Tensor gathered = gather_shards(shard, group, dim, counts);
    const torch::Tensor& dy = grad[0];
    torch::Tensor dx;
    if (ctx->needs_input_grad(0)) dx = torch::matmul(dy, gathered.view(shape));
    // dW = dy^T x over every row, laid out as the gathered shards are, then each rank's summed.
    const torch::Tensor dw =
        torch::matmul(dy.reshape({-1, dy.size(-1)}).t(), x.reshape({-1, x.size(-1)}));
    const torch::Tensor dshard =
        reduce_scatter_shards(dw.reshape(gathered.sizes()), group, dim, counts);
    return {dx, dshard, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

void ShardedWeights::shard(torch::Tensor& p) {
  // A weight smaller than the group leaves some ranks an empty shard.
  Entry e{p.sizes().vec(), share_counts(p.numel(), *group_)};
  std::int64_t begin = 0;
  for (int i = 0; i < group_->rank; ++i) begin += e.counts[i];
  {
    torch::NoGradGuard no_grad;
    p.set_data(p.reshape({-1}).slice(0, begin, begin + e.counts[group_->rank]).clone());
  }
  entries_[p.unsafeGetTensorImpl()] = std::move(e);
}

torch::Tensor ShardedWeights::whole(const torch::Tensor& p) const {
  if (!p.defined()) return p;
  auto it = entries_.find(p.unsafeGetTensorImpl());
  if (it == entries_.end()) return p;
  return gather_shards(p, *group_, 0, it->second.counts).view(it->second.shape);
}

torch::Tensor ShardedWeights::linear(const torch::Tensor& x, const torch::Tensor& w,
                                     const torch::Tensor& b) const {
  auto it = entries_.find(w.unsafeGetTensorImpl());
  if (it == entries_.end()) return torch::nn::functional::linear(x, w, b);
  const torch::Tensor y =
      GatheredMatmul::apply(x, w, group_, 0, it->second.counts, it->second.shape);
  return b.defined() ? y + whole(b) : y;
}

torch::Tensor linear_by_rows(const torch::Tensor& x, const torch::Tensor& rows,
                             const TensorParallel& group, const std::vector<std::int64_t>& counts,
                             std::int64_t total) {
  if (!group.active()) return torch::matmul(x, rows.t());
  return GatheredMatmul::apply(x, rows, &group, 0, counts,
                               std::vector<std::int64_t>{total, rows.size(1)});
}

bool ShardedWeights::holds(const torch::Tensor& p) const {
  return p.defined() && entries_.count(p.unsafeGetTensorImpl()) > 0;
}

}  // namespace hetplan::runtime::detail

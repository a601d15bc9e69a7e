#include "batch_program.h"

namespace hetplan::runtime::detail {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// x W^T (+ b) for a weight W held in shards along its first dimension (rank i holding wc[i] of
// it; W's shape `shape`) and, when bc is not empty, a bias held in flat shards (bc[i]). W is
// gathered for the forward pass and again for the backward one, so that no pass keeps it between
// them, and W's gradient is reduce-scattered to the shards (FSDP's way, and the simulator's price
// of a batch_sharded op: a gather in each pass, a reduce-scatter). A bias moves with W, in the
// same collectives (the simulator prices an op's weights as one tensor).
class GatheredLinear : public torch::autograd::Function<GatheredLinear> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, torch::Tensor w_shard,
                               torch::Tensor b_shard, const TensorParallel* group,
                               std::vector<std::int64_t> wc, std::vector<std::int64_t> bc,
                               std::vector<std::int64_t> shape) {
    ctx->save_for_backward({x, w_shard, b_shard});
    ctx->saved_data["group"] = reinterpret_cast<std::int64_t>(group);
    ctx->saved_data["wc"] = wc;
    ctx->saved_data["bc"] = bc;
    ctx->saved_data["shape"] = shape;
    const auto [w, b] = gather(w_shard, b_shard, *group, wc, bc);
    const torch::Tensor y = torch::matmul(x, w.view(shape).t());
    return b.defined() ? y + b : y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &w_shard = saved[1], &b_shard = saved[2];
    const auto& group = *reinterpret_cast<const TensorParallel*>(ctx->saved_data["group"].toInt());
    const auto wc = ctx->saved_data["wc"].toIntVector();
    const auto bc = ctx->saved_data["bc"].toIntVector();
    const auto shape = ctx->saved_data["shape"].toIntVector();
    const torch::Tensor w = gather(w_shard, b_shard, group, wc, bc).first;
    const torch::Tensor& dy = grad[0];
    torch::Tensor dx;
    if (ctx->needs_input_grad(0)) dx = torch::matmul(dy, w.view(shape));
    // dW = dy^T x over every row, laid out as the gathered shards are, then each rank's summed.
    const torch::Tensor dy2 = dy.reshape({-1, dy.size(-1)});
    const torch::Tensor dw = torch::matmul(dy2.t(), x.reshape({-1, x.size(-1)})).reshape_as(w);
    std::vector<torch::Tensor> out{dx,
                                   torch::Tensor(),
                                   torch::Tensor(),
                                   torch::Tensor(),
                                   torch::Tensor(),
                                   torch::Tensor(),
                                   torch::Tensor()};
    if (bc.empty()) {
      out[1] = reduce_scatter_shards(dw, group, 0, wc);
      return out;
    }
    const torch::Tensor mine =
        reduce_scatter_shards(interleave({dw, dy2.sum(0)}, {wc, bc}), group, 0, combined(wc, bc));
    const auto r = static_cast<std::size_t>(group.active() ? group.rank : 0);
    out[1] = mine.slice(0, 0, wc[r]);
    out[2] = mine.slice(0, wc[r]);
    return out;
  }

 private:
  static std::vector<std::int64_t> combined(const std::vector<std::int64_t>& wc,
                                            const std::vector<std::int64_t>& bc) {
    std::vector<std::int64_t> c(wc.size());
    for (std::size_t i = 0; i < wc.size(); ++i) c[i] = wc[i] + bc[i];
    return c;
  }
  // The whole W (as its shards lie) and b (flat; undefined without a bias), in one all-gather.
  // (Without a bias, b_shard is an empty tensor: libtorch's functions take no undefined inputs.)
  static std::pair<torch::Tensor, torch::Tensor> gather(const torch::Tensor& w_shard,
                                                        const torch::Tensor& b_shard,
                                                        const TensorParallel& group,
                                                        const std::vector<std::int64_t>& wc,
                                                        const std::vector<std::int64_t>& bc) {
    if (bc.empty()) return {gather_shards(w_shard, group, 0, wc), torch::Tensor()};
    const torch::Tensor all =
        gather_shards(torch::cat({w_shard, b_shard}), group, 0, combined(wc, bc));
    auto parts = deinterleave(all, {wc, bc});
    return {parts[0], parts[1]};
  }
};

}  // namespace

torch::Tensor interleave(const std::vector<torch::Tensor>& flats,
                         const std::vector<std::vector<std::int64_t>>& counts) {
  std::vector<torch::Tensor> pieces;
  std::vector<std::int64_t> at(flats.size(), 0);
  for (std::size_t i = 0; i < counts.front().size(); ++i)
    for (std::size_t k = 0; k < flats.size(); ++k) {
      pieces.push_back(flats[k].slice(0, at[k], at[k] + counts[k][i]));
      at[k] += counts[k][i];
    }
  return torch::cat(pieces);
}

std::vector<torch::Tensor> deinterleave(const torch::Tensor& flat,
                                        const std::vector<std::vector<std::int64_t>>& counts) {
  std::vector<std::vector<torch::Tensor>> pieces(counts.size());
  std::int64_t at = 0;
  for (std::size_t i = 0; i < counts.front().size(); ++i)
    for (std::size_t k = 0; k < counts.size(); ++k) {
      pieces[k].push_back(flat.slice(0, at, at + counts[k][i]));
      at += counts[k][i];
    }
  std::vector<torch::Tensor> out;
  for (const auto& p : pieces) out.push_back(torch::cat(p));
  return out;
}

SliceLayout ShardedWeights::shard(torch::Tensor& p) {
  // A weight smaller than the group leaves some ranks an empty shard.
  Entry e{p.sizes().vec(), share_counts(p.numel(), *group_)};
  std::int64_t begin = 0;
  for (int i = 0; i < group_->rank; ++i) begin += e.counts[i];
  const std::int64_t end = begin + e.counts[group_->rank], whole = p.numel();
  {
    torch::NoGradGuard no_grad;
    p.set_data(p.reshape({-1}).slice(0, begin, end).clone());
  }
  entries_[p.unsafeGetTensorImpl()] = std::move(e);
  return SliceLayout{0, whole, {{begin, end}}};
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
  if (it == entries_.end()) return torch::nn::functional::linear(x, w, whole(b));
  if (auto bias = b.defined() ? entries_.find(b.unsafeGetTensorImpl()) : entries_.end();
      bias != entries_.end())
    return GatheredLinear::apply(x, w, b, group_, it->second.counts, bias->second.counts,
                                 it->second.shape);
  const torch::Tensor y = GatheredLinear::apply(x, w, w.new_empty({0}), group_, it->second.counts,
                                                std::vector<std::int64_t>{}, it->second.shape);
  return b.defined() ? y + b : y;
}

torch::Tensor linear_by_rows(const torch::Tensor& x, const torch::Tensor& rows,
                             const TensorParallel& group, const std::vector<std::int64_t>& counts,
                             std::int64_t total) {
  if (!group.active()) return torch::matmul(x, rows.t());
  return GatheredLinear::apply(x, rows, rows.new_empty({0}), &group, counts,
                               std::vector<std::int64_t>{},
                               std::vector<std::int64_t>{total, rows.size(1)});
}

bool ShardedWeights::holds(const torch::Tensor& p) const {
  return p.defined() && entries_.count(p.unsafeGetTensorImpl()) > 0;
}

}  // namespace hetplan::runtime::detail

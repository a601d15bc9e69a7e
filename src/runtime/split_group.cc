#include "split_group.h"

#include <fmt/format.h>

#include <limits>
#include <numeric>
#include <stdexcept>

#include "batches.h"

namespace hetplan::runtime::detail {
namespace {

using model::OpFn;
using model::ShardKind;
using sim::Layout;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::int64_t offset_of(const std::vector<std::int64_t>& counts, int rank) {
  return std::accumulate(counts.begin(), counts.begin() + rank, std::int64_t{0});
}

// A relayout as an autograd operation: `convert` forward, and backward from the reader's gradient
// layout into the writer's.
class Relayout : public torch::autograd::Function<Relayout> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, std::int64_t from,
                               std::int64_t to, std::int64_t grad_from, std::int64_t grad_to,
                               const TensorParallel* tp, std::int64_t dim,
                               std::vector<std::int64_t> counts) {
    ctx->saved_data["grad_from"] = grad_from;
    ctx->saved_data["grad_to"] = grad_to;
    ctx->saved_data["tp"] = reinterpret_cast<std::int64_t>(tp);
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["counts"] = counts;
    const torch::Tensor y =
        convert(x, static_cast<Layout>(from), static_cast<Layout>(to), *tp, dim, counts);
    return y.is_same(x) ? y.view_as(y) : y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto* tp = reinterpret_cast<const TensorParallel*>(ctx->saved_data["tp"].toInt());
    return {convert(grad[0], static_cast<Layout>(ctx->saved_data["grad_from"].toInt()),
                    static_cast<Layout>(ctx->saved_data["grad_to"].toInt()), *tp,
                    ctx->saved_data["dim"].toInt(), ctx->saved_data["counts"].toIntVector()),
            {},
            {},
            {},
            {},
            {},
            {},
            {}};
  }
};

// Summed cross-entropy of rows of logits whose classes are split over `tp` (this rank's `counts`
// share from `first`): the rows' maxima, sums of exponentials and target logits are combined over
// the ranks (Megatron-LM's vocabulary-parallel loss), so that every rank gets the whole loss.
torch::Tensor split_cross_entropy(const torch::Tensor& x, const torch::Tensor& targets,
                                  const TensorParallel& tp, std::int64_t first) {
  const std::int64_t C = x.size(-1);
  const torch::Tensor logits = x.reshape({-1, C}).to(torch::kFloat);  // (bf16 logits: in fp32)
  const torch::Tensor t = loss_targets(x, targets);
  const std::int64_t rows = logits.size(0);
  const torch::Tensor local_max =
      C > 0 ? std::get<0>(logits.detach().max(1))
            : torch::full({rows}, -std::numeric_limits<float>::infinity(), logits.options());
  const torch::Tensor most = max_over_group(local_max, tp);
  const torch::Tensor sums =
      reduce_from_group((logits - most.unsqueeze(1)).exp().sum(1), tp);  // of all classes
  const torch::Tensor mine = (t >= first) & (t < first + C);
  torch::Tensor target_logit = torch::zeros({rows}, logits.options());
  if (C > 0)
    target_logit = logits.gather(1, (t - first).clamp(0, C - 1).unsqueeze(1)).squeeze(1) *
                   mine.to(logits.dtype());
  const torch::Tensor loss = sums.log() + most - reduce_from_group(target_logit, tp);  // per row
  const torch::Tensor scored = (t != kIgnoredLabel).to(logits.dtype());
  return (loss * scored).sum() / static_cast<double>(x.dim() == 3 ? x.size(1) : 1);
}

}  // namespace

torch::Tensor convert(const torch::Tensor& x, Layout from, Layout to, const TensorParallel& tp,
                      std::int64_t dim, const std::vector<std::int64_t>& counts) {
  if (from == to || !tp.active()) return x;
  if (counts.size() != static_cast<std::size_t>(tp.size))
    throw std::logic_error(fmt::format("split group: no shard counts to convert {} to {}",
                                       sim::to_string(from), sim::to_string(to)));
  const std::int64_t first = offset_of(counts, tp.rank), n = counts[tp.rank];
  if (from == Layout::replicated && to == Layout::feature)
    return x.slice(dim, first, first + n).contiguous();
  if (from == Layout::replicated && to == Layout::partial)  // rank 0 holds it, the others zeros
    return tp.rank == 0 ? x : torch::zeros_like(x);
  if (from == Layout::feature && to == Layout::replicated) return gather_shards(x, tp, dim, counts);
  if (from == Layout::feature && to == Layout::partial) {  // a shard padded with zeros
    std::vector<std::int64_t> shape = x.sizes().vec();
    shape[static_cast<std::size_t>(dim)] =
        std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
    torch::Tensor whole = torch::zeros(shape, x.options());
    whole.slice(dim, first, first + n).copy_(x);
    return whole;
  }
  if (from == Layout::partial && to == Layout::replicated) return reduce_from_group(x, tp);
  if (from == Layout::partial && to == Layout::feature)
    return reduce_scatter_shards(x, tp, dim, counts);
  throw std::logic_error(fmt::format("split group: no conversion from {} to {}",
                                     sim::to_string(from), sim::to_string(to)));
}

torch::Tensor relayout(const torch::Tensor& x, Layout from, Layout to, Layout grad_from,
                       Layout grad_to, const TensorParallel& tp, std::int64_t dim,
                       const std::vector<std::int64_t>& counts) {
  if (!tp.active() || (from == to && grad_from == grad_to)) return x;
  return Relayout::apply(x, static_cast<std::int64_t>(from), static_cast<std::int64_t>(to),
                         static_cast<std::int64_t>(grad_from), static_cast<std::int64_t>(grad_to),
                         &tp, dim, counts);
}

std::vector<std::int64_t> cut_counts(std::int64_t features, FeatureCut cut, const SharePlace& tp) {
  if (cut.sections != 1)
    throw std::logic_error(
        "split group: the shards of a tensor cut in sections are not contiguous");
  std::vector<std::int64_t> counts = share_counts(features / cut.unit, tp);
  for (auto& c : counts) c *= cut.unit;
  return counts;
}

Ranges cut_ranges(std::int64_t features, FeatureCut cut, const SharePlace& tp) {
  const std::int64_t part = features / cut.sections;
  const auto counts = cut_counts(part, FeatureCut{cut.unit, 1}, tp);
  const std::int64_t first = offset_of(counts, tp.rank);
  Ranges out;
  for (std::int64_t s = 0; s < cut.sections; ++s)
    out.emplace_back(s * part + first,
                     s * part + first + counts[static_cast<std::size_t>(tp.rank)]);
  return out;
}

void shard_split_op(const OpGraph& graph, const model::Op& op, int index, const TensorParallel& tp,
                    FeatureCut cut, ShardLayouts& layouts) {
  std::vector<torch::Tensor> w = graph.op_parameters(index);  // the graph's tensors, cut in place
  if (w.empty() || !tp.active()) return;
  if ((op.compute.fn == OpFn::conv2d && op.shard == ShardKind::channel) ||
      (op.compute.fn == OpFn::linear &&
       (op.shard == ShardKind::column || op.shard == ShardKind::vocab)) ||
      (op.compute.fn == OpFn::embedding && op.shard == ShardKind::vocab)) {
    // (A tied head's table that its embedding in the same group has cut already keeps its rows.)
    const auto r = cut_ranges(layouts.whole_size(w[0], 0), cut, tp);
    for (auto& t : w)
      if (!layouts.split(t)) layouts.keep(t, 0, r);
  } else if (op.compute.fn == OpFn::linear && op.shard == ShardKind::row) {
    layouts.keep(w[0], 1, cut_ranges(w[0].size(1), cut, tp));
  }
}

torch::Tensor linear_rows(const OpGraph& graph, const model::Op& op, int index,
                          const torch::Tensor& x, const TensorParallel& tp) {
  if (tp.active() && op.shard == ShardKind::row) return x.reshape({-1, x.size(-1)});
  return graph.linear_input(index, x);
}

torch::Tensor apply_split(const OpGraph& graph, const model::Op& op, int index,
                          const std::vector<torch::Tensor>& in, const torch::Tensor& targets,
                          const torch::Tensor& mask, const TensorParallel& tp,
                          Collectives* batch_group, bool batch_counts) {
  const OpFn fn = op.compute.fn;
  const torch::Tensor& x = in.front();
  if (op.shard == ShardKind::replicated || fn == OpFn::conv2d || !tp.active())
    return graph.apply(index, in, targets, batch_group, mask, batch_counts);
  const auto& w = graph.op_parameters(index);
  const std::int64_t n = x.size(0);
  if (fn == OpFn::linear) {
    std::vector<std::int64_t> shape = graph.output_shape(index, n);
    if (op.shard == ShardKind::column || op.shard == ShardKind::vocab) {  // its output features
      shape.back() = w[0].size(0);
      return torch::linear(linear_rows(graph, op, index, x, tp), w[0],
                           op.compute.bias ? w[1] : torch::Tensor())
          .view(shape);
    }
    // Row: this rank's input features; a partial sum, with the bias on rank 0 only.
    const torch::Tensor bias = op.compute.bias && tp.rank == 0 ? w[1] : torch::Tensor();
    return torch::linear(linear_rows(graph, op, index, x, tp), w[0], bias).view(shape);
  }
  if (fn == OpFn::embedding) {
    // This rank's rows of the table (the vocabulary's shards in rank order): the tokens it holds
    // looked up, zeros for the others, a partial sum over the ranks (Megatron-LM's
    // vocabulary-parallel embedding).
    const std::int64_t vocab = op.params / op.compute.shape.back();
    const std::int64_t first = offset_of(share_counts(vocab, tp), tp.rank);
    const torch::Tensor held = (x >= first) & (x < first + w[0].size(0));
    const torch::Tensor rows = torch::where(held, x - first, torch::zeros_like(x));
    return torch::embedding(w[0], rows) * held.unsqueeze(-1).to(w[0].dtype());
  }
  if (fn == OpFn::cross_entropy) {
    // This rank's classes follow the ranks' before it (the logits' feature shards).
    const std::int64_t classes = graph.output_shape(op.inputs.front(), 1).back();
    return split_cross_entropy(x, targets, tp, offset_of(share_counts(classes, tp), tp.rank));
  }
  // Elementwise ops and dropout on this rank's features.
  if (fn == OpFn::dropout) {
    if (!mask.defined()) return x;
    std::vector<std::int64_t> whole = graph.output_shape(index, n);
    const std::int64_t dim = feature_dim(whole.size());
    const auto counts = share_counts(whole[static_cast<std::size_t>(dim)], tp);
    const std::int64_t first = offset_of(counts, tp.rank);
    return x *
           mask.view(whole).slice(dim, first, first + counts[static_cast<std::size_t>(tp.rank)]);
  }
  return graph.apply(index, in, targets, nullptr, mask);
}

}  // namespace hetplan::runtime::detail

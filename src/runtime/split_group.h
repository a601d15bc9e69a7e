// Internal to the runtime: the ops of an op-level plan's split groups, as the simulator lowers them
// (sim/op_level.cc): every device of the group runs every row of a micro-batch through its share
// of each op (a convolution's output channels, a linear layer's output or input features, a
// loss's classes); activations move between the layouts the ops read and write (sim::op_layout)
// by collectives in the forward pass, and their gradients by the matching ones in the backward.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "check/split_rules.h"
#include "hetplan/core/error.h"
#include "hetplan/model/model.h"
#include "hetplan/sim/tensor_layout.h"
#include "op_graph.h"
#include "shard_layouts.h"
#include "tensor_parallel.h"

namespace hetplan::runtime::detail {

// This rank's ranges of `features` cut as `cut`.
Ranges cut_ranges(std::int64_t features, FeatureCut cut, const SharePlace& tp);
// Each rank's count of `features` cut as `cut` in one section (shards that are contiguous).
std::vector<std::int64_t> cut_counts(std::int64_t features, FeatureCut cut, const SharePlace& tp);

// The dimension features lie along in a tensor of `rank` dimensions (the batch's included):
// channels of [n, c, h, w], else the last.
inline std::int64_t feature_dim(std::size_t rank) {
  return rank == 4 ? 1 : static_cast<std::int64_t>(rank) - 1;
}

// `x`, laid out as `from` over the ranks of `tp`, in layout `to` (feature shards: `counts` along
// `dim`), as an autograd operation whose backward pass turns the gradient from layout `grad_from`
// (what the reader gives back) into `grad_to` (what the writer needs). `tp` must outlive the
// backward pass.
torch::Tensor relayout(const torch::Tensor& x, sim::Layout from, sim::Layout to,
                       sim::Layout grad_from, sim::Layout grad_to, const TensorParallel& tp,
                       std::int64_t dim, const std::vector<std::int64_t>& counts);
// The same conversion outside autograd.
torch::Tensor convert(const torch::Tensor& x, sim::Layout from, sim::Layout to,
                      const TensorParallel& tp, std::int64_t dim,
                      const std::vector<std::int64_t>& counts);

// Cuts op `op`'s weights to this rank's share (recorded in `layouts`) as `cut` says: a
// convolution's and a column-split layer's output rows, a row-split layer's input columns (its
// bias stays whole and only rank 0 adds it), an LM head's classes (rows of a tied table, which
// no other op of this rank reads). Other ops' weights stay whole.
void shard_split_op(const OpGraph& graph, const model::Op& op, int index, const TensorParallel& tp,
                    FeatureCut cut, ShardLayouts& layouts);

// The rows linear layer `op` (at `index`) multiplies on this rank: its input x as
// OpGraph::linear_input shapes it, or, split by row over an active `tp`, x's feature shard
// flattened per token.
torch::Tensor linear_rows(const OpGraph& graph, const model::Op& op, int index,
                          const torch::Tensor& x, const TensorParallel& tp);

// Op `index`'s output on this rank's share, from inputs already in the layouts it reads (whole for
// ops computed whole); `mask` is a dropout op's whole mask of these rows; `batch_group`, when not
// null, the ranks over whose rows a batch norm computed whole takes its statistics, this rank's
// rows counted when `batch_counts` (OpGraph::apply).
torch::Tensor apply_split(const OpGraph& graph, const model::Op& op, int index,
                          const std::vector<torch::Tensor>& in, const torch::Tensor& targets,
                          const torch::Tensor& mask, const TensorParallel& tp,
                          Collectives* batch_group = nullptr, bool batch_counts = true);

}  // namespace hetplan::runtime::detail

// Internal to the runtime: the collectives of tensor parallelism as autograd operations
// (Megatron-LM's f and g), batch normalisation over a batch split between ranks, and how uneven
// shares split heads, columns and vocabulary rows.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "check/shares.h"
#include "collectives.h"
#include "hetplan/core/error.h"

namespace hetplan::runtime::detail {

// This rank's place in its replica's tensor-parallel group; inactive without a group of 2 or more.
// (rank, size and shares: SharePlace's.)
struct TensorParallel : SharePlace {
  Collectives* group = nullptr;
  // Sequence parallelism: each rank's number of sequence positions (by the shares), empty when
  // off; and how shards of unlike sizes move: grouped (a broadcast or a reduce per rank, each
  // moving that rank's shard) or padded (every shard padded to the largest, one collective).
  std::vector<std::int64_t> sequence;
  bool grouped = false;
  bool active() const { return group != nullptr && size > 1; }
  bool sequence_parallel() const { return active() && !sequence.empty(); }
};

// f: identity forward; the gradient is summed over the group in the backward pass. Where a
// replicated activation enters a tensor-split op.
torch::Tensor copy_to_group(const torch::Tensor& x, const TensorParallel& tp);
// g: summed over the group forward; identity backward. Where partial results leave.
torch::Tensor reduce_from_group(const torch::Tensor& x, const TensorParallel& tp);
// Elementwise maximum over the group (no gradient).
torch::Tensor max_over_group(const torch::Tensor& x, const TensorParallel& tp);

// Sequence parallelism (Megatron-LM's, over tp.sequence's uneven shards of dim 1), as autograd
// operations. `tp` must outlive the backward pass.
// All-gather of the shards [n, s_j, h] into [n, S, h] where a tensor-split op reads them; its
// gradient is reduce-scattered (the ranks' partial gradients summed, each keeping its shard).
torch::Tensor gather_sequence(const torch::Tensor& x, const TensorParallel& tp);
// Reduce-scatter of partial sums [n, S, h] into this rank's summed shard; its gradient is
// all-gathered. Where a row-split op's output leaves.
torch::Tensor reduce_scatter_sequence(const torch::Tensor& x, const TensorParallel& tp);
// This rank's shard of a whole activation that every rank holds (a stage's input); its gradient
// is all-gathered, so every rank passes back the whole gradient.
torch::Tensor scatter_sequence(const torch::Tensor& x, const TensorParallel& tp);
// All-gather into a whole activation that the ranks then hold alike (a stage's output); its
// gradient, alike on every rank, is sliced to this rank's shard.
torch::Tensor gather_sequence_whole(const torch::Tensor& x, const TensorParallel& tp);

// Shards of unlike sizes along `dim` (rank i holding counts[i]; tp.grouped picks how they move),
// as autograd operations; identities without an active group. `tp` must outlive the backward
// pass. gather_shards all-gathers this rank's shard into the whole tensor, and reduce-scatters
// the whole gradient (each rank's partial gradient summed, each keeping its shard): a weight
// sharded over a batch-split replica (HAP's batch_sharded), or a vocabulary-split table read
// whole. reduce_scatter_shards sums partial wholes into this rank's shard and all-gathers the
// gradient: a vocabulary-split embedding's partial sums into each rank's samples.
torch::Tensor gather_shards(const torch::Tensor& x, const TensorParallel& tp, std::int64_t dim,
                            const std::vector<std::int64_t>& counts);
torch::Tensor reduce_scatter_shards(const torch::Tensor& x, const TensorParallel& tp,
                                    std::int64_t dim, const std::vector<std::int64_t>& counts);
// This rank's shard of a tensor every rank holds whole; its gradient is all-gathered, so every
// rank passes back the whole gradient (a replicated op's output going on split by batch).
torch::Tensor scatter_shards(const torch::Tensor& x, const TensorParallel& tp, std::int64_t dim,
                             const std::vector<std::int64_t>& counts);
// Identity forward; the gradient is kept on the group's rank 0 and zero on the others: a weight
// whose gradient every rank forms whole enters a sum over the ranks once.
torch::Tensor gradient_on_first_rank(const torch::Tensor& x, const TensorParallel& tp);

// Training-mode batch normalisation of x [n, c, h, w] with the statistics of the samples of every
// rank of `group` (null: this rank's alone), so that a batch split over replicas, evenly or not,
// normalises as the whole batch does; a rank that does not `count` adds none of its samples to
// the statistics (nor their gradients' sums), as where another rank of the group holds the same
// samples (tensor-parallel ranks of one replica). Keeps no running statistics.
constexpr double kBatchNormEps = 1e-5;
torch::Tensor batch_norm_over_group(const torch::Tensor& x, const torch::Tensor& weight,
                                    const torch::Tensor& bias, Collectives* group,
                                    double eps = kBatchNormEps, bool count = true);

}  // namespace hetplan::runtime::detail

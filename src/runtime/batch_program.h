// Internal to the runtime: HAP's batch programs. The ranks of a replica split each micro-batch's
// samples in the ratio of their shares instead of splitting ops by a tensor dimension. The weights
// of ops split batch_sharded are sharded over them: each rank keeps its share of the flattened
// weight, gathers it whole for each use and gets its part of the gradient by reduce-scatter (as
// the simulator prices them, sim/stage_costs.cc). A word embedding split by tensor looks up the
// replica's samples in this rank's vocabulary rows, and the partial sums are reduce-scattered to
// the ranks' samples; an LM head split by tensor gathers the ranks' samples and computes their
// logits for this rank's vocabulary rows, with Megatron-LM's vocabulary-parallel loss.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "check/stage_plan.h"
#include "shard_layouts.h"
#include "tensor_parallel.h"

namespace hetplan::runtime::detail {

// What a module needs to run a batch program: the splits (stage_plan.h) and the replica's group
// (active).
struct BatchProgram : BatchSplits {
  TensorParallel group;
};

// Weights sharded over a group, each kept as this rank's slice of the flattened weight (in the
// tensor itself, so that the module's parameters are the shards).
class ShardedWeights {
 public:
  // `group` must outlive the weights' use.
  explicit ShardedWeights(const TensorParallel* group) : group_(group) {}
  // Keeps this rank's share of p's elements in place of p (share_counts: possibly none); returns
  // which of the flattened elements it keeps.
  SliceLayout shard(torch::Tensor& p);
  // The whole weight of a shard (gathered; its gradient reduce-scattered to the shard), or p itself
  // when p is not sharded.
  torch::Tensor whole(const torch::Tensor& p) const;
  bool holds(const torch::Tensor& p) const;
  // x w^T + b. For a sharded w the whole weight is gathered in the forward pass and again in the
  // backward one (none kept between them), its gradient reduce-scattered to the shard; a sharded
  // b moves with it, in the same collectives (three per linear op, as the simulator prices a
  // batch_sharded op). Otherwise torch's linear, with whole(b).
  torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w,
                       const torch::Tensor& b) const;

 private:
  struct Entry {
    std::vector<std::int64_t> shape;
    std::vector<std::int64_t> counts;
  };
  const TensorParallel* group_;
  std::map<const void*, Entry> entries_;  // by the parameter's TensorImpl
};

// Flat tensors' rank slices laid out rank by rank: rank i's slice of each of `flats` in turn
// (counts[k][i] elements of flats[k]), as one buffer; and back.
torch::Tensor interleave(const std::vector<torch::Tensor>& flats,
                         const std::vector<std::vector<std::int64_t>>& counts);
std::vector<torch::Tensor> deinterleave(const torch::Tensor& flat,
                                        const std::vector<std::vector<std::int64_t>>& counts);

// x W^T for a table W of `total` rows split by rows over `group` (rank i holding counts[i];
// `rows` this rank's), gathered the same way; x rows^T without an active group.
torch::Tensor linear_by_rows(const torch::Tensor& x, const torch::Tensor& rows,
                             const TensorParallel& group, const std::vector<std::int64_t>& counts,
                             std::int64_t total);

}  // namespace hetplan::runtime::detail

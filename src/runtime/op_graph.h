// Internal to the runtime: a model executed op by op, from what each op computes
// (model::OpCompute), as op-level plans need: each op's output is its own tensor, so that ops can
// run on different devices and on different parts of a micro-batch.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "check/op_graph_check.h"
#include "collectives.h"
#include "hetplan/core/error.h"
#include "hetplan/model/model.h"

namespace hetplan::runtime::detail {

// The targets a cross-entropy op's rows of logits ([n, C] or [n, t, C]) are scored against, one
// per row of logits.reshape({-1, C}): a class per sample (the last column of a 2-D target: BERT's
// next-sentence label), or a label per token (kIgnoredLabel: none).
torch::Tensor loss_targets(const torch::Tensor& logits, const torch::Tensor& targets);

// Op `op`'s dropout mask for the `samples` samples of step `step`'s global batch (the op's index
// `index`): per sample, from the seed, the step and the op, so that every split of the batch draws
// the rows the whole batch would. Scaled by 1 / (1 - drop); on the CPU.
torch::Tensor dropout_mask(const model::Op& op, std::uint64_t seed, int step, int index,
                           std::int64_t samples);

// The weights of every op, created in op order from the current torch seed as libtorch's modules
// initialise them (Conv2d, Linear: Kaiming-uniform; batchnorm: scale 1, shift 0), so that a
// ResNet's ops start from the weights the ResNet module (resnet_module.h) gets from the same seed.
class OpGraph : public torch::nn::Module {
 public:
  // m must pass check_op_graph.
  explicit OpGraph(const model::Model& m);

  // The weights op `op` reads (none for most), in a fixed order.
  const std::vector<torch::Tensor>& op_parameters(int op) const {
    return params_[static_cast<std::size_t>(op)];
  }
  // Op `op`'s output on `inputs` (one per Op::inputs, in order; for an op without inputs, the
  // images). cross_entropy returns the summed loss of its rows against `targets`; batchnorm's
  // statistics cover `batch_group`'s ranks (null: these rows only; a rank that does not
  // `batch_counts` adds none of its own: batch_norm_over_group); dropout multiplies by `mask`
  // (already scaled by 1 / (1 - drop)), or passes its input on when there is none.
  torch::Tensor apply(int op, const std::vector<torch::Tensor>& inputs,
                      const torch::Tensor& targets, Collectives* batch_group,
                      const torch::Tensor& mask, bool batch_counts = true) const;
  // The [rows, in] matrix linear op `op` multiplies, from its input x of n samples: x flattened
  // per sample, its first token, or its tokens (n * tokens rows).
  torch::Tensor linear_input(int op, const torch::Tensor& x) const;
  // Shape of op `op`'s output for n samples.
  std::vector<std::int64_t> output_shape(int op, std::int64_t n) const;
  // Empties the weights of every op o without held[o] that no held op reads too (a rank keeps its
  // ops' only). The emptied tensors keep their identity but no values; those ops must not run.
  void release_ops_except(const std::vector<bool>& held);

 private:
  const model::Model* m_;
  std::vector<std::vector<torch::Tensor>> params_;
};

}  // namespace hetplan::runtime::detail

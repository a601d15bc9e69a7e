// Internal to the runtime: libtorch modules built from a model description, each able to compute
// the summed loss of a batch.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "hetplan/core/error.h"
#include "hetplan/model/model.h"

namespace hetplan::runtime::detail {

// A batch of samples: for language models token ids [n, seq] and next-token targets [n, seq];
// for MLPs features [n, in] and class targets [n].
struct Batch {
  torch::Tensor inputs;
  torch::Tensor targets;
  std::int64_t size() const { return inputs.size(0); }
  Batch slice(std::int64_t begin, std::int64_t end) const {
    return Batch{inputs.slice(0, begin, end), targets.slice(0, begin, end)};
  }
};

class TrainModule : public torch::nn::Module {
 public:
  // Sum over the batch's samples of each sample's loss (a language model's is the mean over its
  // tokens), so that a split batch's sums add up to the whole batch's.
  virtual torch::Tensor loss_sum(const Batch& b) = 0;
};

// The module for `m`, initialised from the current torch seed. Supported: Family::mlp and GPT-style
// decoder language models (pre-norm LayerNorm, GELU MLP, learned positions, biases, tied or untied
// head); the module's parameter count must equal the description's, else the model is refused.
Result<std::shared_ptr<TrainModule>> build_module(const model::Model& m);

}  // namespace hetplan::runtime::detail

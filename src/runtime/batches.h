// Internal to the runtime: the training data, as whole global batches that every rank generates
// identically and then slices by its batch share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hetplan/core/error.h"
#include "hetplan/model/model.h"
#include "torch_modules.h"

namespace hetplan::runtime::detail {

class BatchSource {
 public:
  // Language models read `text_file` tokenised at byte level (needs a vocabulary of at least 256)
  // or, when it is empty, a synthetic stream: each token follows from the one before by a fixed
  // rule, except one in ten drawn at random, so there is something to learn. MLPs classify
  // Gaussian features by a fixed random linear teacher; CNNs Gaussian images by a teacher on their
  // 4x4 average-pooled pixels. Everything derives from `seed`.
  static Result<BatchSource> create(const model::Model& m, std::uint64_t seed,
                                    const std::string& text_file);
  // The global batch of `samples` samples for step `step`.
  Batch global(int step, std::int64_t samples) const;

 private:
  const model::Model* m_ = nullptr;
  std::uint64_t seed_ = 0;
  torch::Tensor text_;     // bytes of the text file (uint8 as int64), or undefined
  torch::Tensor teacher_;  // MLP: [in, classes]; CNN: [3 * 4 * 4, classes]
  std::int64_t in_ = 0;
};

}  // namespace hetplan::runtime::detail

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

// A token's label that no loss counts (masked language modelling labels only masked tokens).
inline constexpr std::int64_t kIgnoredLabel = -100;

class BatchSource {
 public:
  // Language models read `text_file` tokenised at byte level (needs a vocabulary of at least 256)
  // or, when it is empty, a synthetic stream: each token follows from the one before by a fixed
  // rule, except one in ten drawn at random, so there is something to learn. MLPs classify
  // Gaussian features by a fixed random linear teacher; CNNs Gaussian images by a teacher on their
  // 4x4 average-pooled pixels. Encoders (BERT) read such token streams, with the second half of
  // each sequence replaced by another stream's for half the samples and 15% of the tokens masked
  // (the last token id); their targets are [n, s + 1]: each token's label (the original token
  // where masked, kIgnoredLabel elsewhere), then the next-sentence label (1: another stream).
  // Everything derives from `seed`.
  static Result<BatchSource> create(const model::Model& m, std::uint64_t seed,
                                    const std::string& text_file);
  // The global batch of `samples` samples for step `step`.
  Batch global(int step, std::int64_t samples) const;

 private:
  const model::Model* m_ = nullptr;
  std::uint64_t seed_ = 0;
  // `samples` token sequences of `length`: from the text file or the synthetic stream.
  torch::Tensor stream(std::int64_t samples, std::int64_t length, at::Generator& gen) const;

  torch::Tensor text_;     // bytes of the text file (uint8 as int64), or undefined
  torch::Tensor teacher_;  // MLP: [in, classes]; CNN: [3 * 4 * 4, classes]
  std::int64_t in_ = 0;
};

}  // namespace hetplan::runtime::detail

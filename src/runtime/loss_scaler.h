// Dynamic loss scaling, fp16 mixed precision's guard against gradients too small for fp16
// (Micikevicius et al., "Mixed Precision Training", 2018; torch.cuda.amp's GradScaler does the
// same): the loss is multiplied by the scale before the backward pass, so that small gradients
// stay above fp16's least normal number; before the optimizer step the gradients are divided by it
// and checked. A step whose gradients hold an inf or a NaN on any rank is skipped and the scale
// halved; after `growth_interval` steps in a row without one the scale doubles.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "hetplan/runtime/run.h"

namespace hetplan::runtime::detail {

class LossScaler {
 public:
  static constexpr int kDefaultGrowthInterval = 2000;

  explicit LossScaler(double initial_scale = kDefaultLossScale,
                      int growth_interval = kDefaultGrowthInterval);
  // Resumed where a checkpoint left it (its scale, clean steps in a row and steps skipped).
  LossScaler(double scale, int clean, int skipped, int growth_interval = kDefaultGrowthInterval);

  double scale() const { return scale_; }
  // Divides every defined gradient by the scale in place; whether all of them are finite.
  bool unscale(const std::vector<torch::Tensor>& grads) const;
  // With every rank's verdict (all finite, or not): whether the optimizer steps; the scale halves
  // on a skipped step and doubles after growth_interval clean steps in a row.
  bool update(bool finite_everywhere);
  int skipped() const { return skipped_; }  // steps skipped so far
  int clean() const { return clean_; }      // clean steps since the scale last changed

 private:
  double scale_;
  int growth_interval_;
  int clean_ = 0;  // clean steps since the scale last changed
  int skipped_ = 0;
};

}  // namespace hetplan::runtime::detail

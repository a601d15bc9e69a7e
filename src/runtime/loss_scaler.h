// Dynamic loss scaling, fp16 mixed precision's guard against gradients too small for fp16
// (Micikevicius et al., "Mixed Precision Training", 2018; torch.cuda.amp's GradScaler does the
// same): the loss is multiplied by the scale before the backward pass, so that small gradients
// stay above fp16's least normal number; before the optimizer step the gradients are divided by it
// and checked. A step whose gradients hold an inf or a NaN on any rank is skipped and the scale
// halved; after `growth_interval` steps in a row without one the scale doubles.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <optional>
#include <vector>

#include "checkpoint.h"
#include "collectives.h"
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

// The loss scaling a run goes on with, the stage runtime's and the op-by-op one's alike: none
// without an `initial` scale above 0; else where a checkpoint's state `was` left it (its scale,
// clean steps in a row and steps skipped), or from `initial` where the run that wrote it did not
// scale (or none wrote any: `was` empty).
std::optional<LossScaler> resumed_scaler(double initial, const ScalerState& was);
// What a checkpoint keeps of `scaler`; without one, the steps `was` (the run's start) had skipped.
ScalerState scaler_state(const std::optional<LossScaler>& scaler, const ScalerState& was);
// Unscales `grads` (this rank's part of what the optimizer steps) and sets every rank's verdict
// over `world` (null: this rank alone): whether all found them finite. Whether the optimizer
// steps (LossScaler::update of that verdict).
bool steps_everywhere(LossScaler& scaler, const std::vector<torch::Tensor>& grads,
                      Collectives* world, const torch::Device& device,
                      std::chrono::milliseconds timeout);

}  // namespace hetplan::runtime::detail

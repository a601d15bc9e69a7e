#include "loss_scaler.h"

#include "shard_layouts.h"

namespace hetplan::runtime::detail {

LossScaler::LossScaler(double initial_scale, int growth_interval)
    : scale_(initial_scale), growth_interval_(growth_interval) {}

LossScaler::LossScaler(double scale, int clean, int skipped, int growth_interval)
    : scale_(scale), growth_interval_(growth_interval), clean_(clean), skipped_(skipped) {}

bool LossScaler::unscale(const std::vector<torch::Tensor>& grads) const {
  torch::NoGradGuard no_grad;
  torch::Tensor bad;  // non-finite elements, counted on the gradients' device: one read at the end
  for (const torch::Tensor& g : grads) {
    if (!g.defined()) continue;
    g.div_(scale_);
    const torch::Tensor here = torch::logical_not(torch::isfinite(g)).sum();
    bad = bad.defined() ? bad + here : here;
  }
  return !bad.defined() || bad.item<std::int64_t>() == 0;
}

bool LossScaler::update(bool finite_everywhere) {
  if (!finite_everywhere) {
    scale_ /= 2;
    clean_ = 0;
    ++skipped_;
    return false;
  }
  if (++clean_ >= growth_interval_) {
    scale_ *= 2;
    clean_ = 0;
  }
  return true;
}

std::optional<LossScaler> resumed_scaler(double initial, const ScalerState& was) {
  if (!(initial > 0)) return std::nullopt;
  return LossScaler(was.scale > 0 ? was.scale : initial,
                    was.scale > 0 ? static_cast<int>(was.clean) : 0, static_cast<int>(was.skipped));
}

ScalerState scaler_state(const std::optional<LossScaler>& scaler, const ScalerState& was) {
  if (!scaler) return ScalerState{was.skipped, 0, 0};
  return ScalerState{scaler->skipped(), scaler->scale(), scaler->clean()};
}

bool steps_everywhere(LossScaler& scaler, const std::vector<torch::Tensor>& grads,
                      Collectives* world, const torch::Device& device,
                      std::chrono::milliseconds timeout) {
  const bool finite = scaler.unscale(grads);
  torch::Tensor overflowed =
      torch::full({1}, finite ? 0.0 : 1.0, torch::TensorOptions().device(device));
  if (world) all_reduce_flat(*world, {overflowed}, timeout);
  return scaler.update(overflowed.item<double>() == 0);
}

}  // namespace hetplan::runtime::detail

#include "loss_scaler.h"

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

}  // namespace hetplan::runtime::detail

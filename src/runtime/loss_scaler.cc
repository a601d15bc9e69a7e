#include "loss_scaler.h"

namespace hetplan::runtime::detail {

LossScaler::LossScaler(double initial_scale, int growth_interval)
    : scale_(initial_scale), growth_interval_(growth_interval) {}

bool LossScaler::unscale(const std::vector<torch::Tensor>& grads) const {
  torch::NoGradGuard no_grad;
  bool finite = true;
  for (const torch::Tensor& g : grads) {
    if (!g.defined()) continue;
    g.div_(scale_);
    finite = finite && torch::isfinite(g).all().item<bool>();
  }
  return finite;
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

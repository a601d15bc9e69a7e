// Mixed precision in the runtime: autocast's state as a value, and a scope that sets it.
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include "hetplan/model/model.h"

namespace hetplan::runtime::detail {

// Which devices' autocast is on, and in which dtype: what a forward pass ran under, so that a
// recomputation in the backward pass (torch_modules' Recomputed) runs the same ops in the same
// dtypes.
struct AutocastState {
  bool cpu = false;
  bool cuda = false;
  at::ScalarType cpu_dtype = at::kBFloat16;
  at::ScalarType cuda_dtype = at::kHalf;

  static AutocastState current() {
    return {at::autocast::is_cpu_enabled(), at::autocast::is_enabled(),
            at::autocast::get_autocast_cpu_dtype(), at::autocast::get_autocast_gpu_dtype()};
  }
  // bf16 mixed precision on the given device: GEMMs, convolutions and attention's products in
  // bf16, reductions, softmaxes and losses as autocast's fp32 list says; parameters, gradients and
  // Adam's state stay fp32 (the master weights the memory model counts).
  static AutocastState bf16(bool on_cuda) {
    AutocastState s;
    (on_cuda ? s.cuda : s.cpu) = true;
    s.cpu_dtype = s.cuda_dtype = at::kBFloat16;
    return s;
  }
  // fp16 mixed precision on CUDA (the CPU's autocast has no fp16): as bf16 in fp16, under
  // dynamic loss scaling (loss_scaler.h).
  static AutocastState fp16_cuda() {
    AutocastState s;
    s.cuda = true;
    s.cuda_dtype = at::kHalf;
    return s;
  }
  // The state of mixed precision in `precision` on the device: off for fp32.
  static AutocastState of(model::DType precision, bool on_cuda) {
    if (precision == model::DType::bf16) return bf16(on_cuda);
    if (precision == model::DType::fp16 && on_cuda) return fp16_cuda();
    return AutocastState{};
  }
};

// Sets `state` for the scope's lifetime, then restores the one before and drops autocast's cache
// of cast weights (they change at every optimizer step).
class AutocastScope {
 public:
  explicit AutocastScope(const AutocastState& state) : before_(AutocastState::current()) {
    set(state);
  }
  ~AutocastScope() {
    set(before_);
    if (!before_.cpu && !before_.cuda) at::autocast::clear_cache();
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  static void set(const AutocastState& s) {
    at::autocast::set_autocast_cpu_dtype(s.cpu_dtype);
    at::autocast::set_autocast_gpu_dtype(s.cuda_dtype);
    at::autocast::set_cpu_enabled(s.cpu);
    at::autocast::set_enabled(s.cuda);
  }
  AutocastState before_;
};

}  // namespace hetplan::runtime::detail

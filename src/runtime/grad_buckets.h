// Gradient buckets that all-reduce while the last backward pass of a step still runs, as
// PyTorch's DistributedDataParallel does and as the simulator prices a plan's grad_bucket_bytes.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <functional>
#include <memory>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <vector>

#include "collectives.h"

namespace hetplan::runtime::detail {

// The tensors end to end, as one new flat tensor.
torch::Tensor flatten(const std::vector<torch::Tensor>& tensors);

// Copies consecutive slices of `flat` into `tensors`, in order (the inverse of flatten).
void unflatten_into(const torch::Tensor& flat, const std::vector<torch::Tensor>& tensors);

// The gradients of `params`, in order.
std::vector<torch::Tensor> grads_of(const std::vector<torch::Tensor>& params);

// Buckets of a stage's parameters, grouped by the simulator's rule (sim::gradient_buckets: layers
// from the last one back, a bucket closing once it holds `bucket_bytes` of gradients, or at the
// first layer) over the bytes the caller gives each layer (the simulator's count: the model's
// dtype, every weight divided by the tensor-parallel degree, so that the runtime's buckets are
// the ones it prices). While active (the last micro-batch's
// backward pass), a hook on each parameter sees its gradient arrive; once all of a bucket's have,
// the bucket's sums (what the gradients will hold once this pass has added its part) are
// all-reduced over `group` without waiting, bucket after bucket in order on every rank. finish()
// all-reduces what the pass left (parameters that got no gradient in it, or no last pass on this
// rank), waits for every bucket and writes the sums into the gradients: the same sums as one
// all-reduce of them all. A gradient may be undefined before the passes (the hooks then take the
// pass's own); every parameter's must be defined (dense) when finish() is called. Where the
// gradients summed so far are kept elsewhere than in .grad() (SixteenBitWeights' fp32 sums),
// `accumulated` gives them; a bucket sums in fp32 whatever the gradients' type.
class GradBuckets {
 public:
  // `layers`: the stage's parameters by layer, first layer first, every parameter once;
  // `layer_bytes`: each layer's gradient bytes as the buckets count them.
  using Accumulated = std::function<torch::Tensor(const torch::Tensor& param)>;
  GradBuckets(const std::vector<std::vector<torch::Tensor>>& layers,
              const std::vector<double>& layer_bytes, double bucket_bytes,
              c10::intrusive_ptr<Collectives> group, Accumulated accumulated = {});
  ~GradBuckets();
  GradBuckets(const GradBuckets&) = delete;
  GradBuckets& operator=(const GradBuckets&) = delete;

  void set_active(bool active);
  void finish(std::chrono::milliseconds timeout);
  int count() const;
  // Buckets whose all-reduce the last finish() found started by the backward pass (the rest it
  // started itself).
  int overlapped() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace hetplan::runtime::detail

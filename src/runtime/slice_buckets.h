// Internal to the runtime: ZeRO-2 and -3's gradients, reduced to their slices' owners bucket by
// bucket during every backward pass (as DeepSpeed's ZeRO-2 does, and as the simulator prices a
// ZeRO-2/3 plan: a reduce-scatter per micro-batch, each rank holding only its slice of the
// gradients). A parameter's gradient is taken from it as soon as its accumulation ends (a hook
// after the accumulator), so no rank ever holds its stage's whole gradients: only the buckets not
// yet full, the ones in flight (at most kInFlight), and its fp32 sums of its slices.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

#include "collectives.h"
#include "zero_params.h"

namespace hetplan::runtime::detail {

class SliceBuckets {
 public:
  // Buckets whose reduces may be in flight at once; a pass that fills another waits for the oldest.
  static constexpr int kInFlight = 2;

  // One model chunk's layers (a chunk's passes give gradients to its parameters only): each layer's
  // parameters as indices into `params`, first layer first, and each layer's gradient bytes as the
  // simulator counts them (sim::gradient_buckets groups the layers into buckets from the last).
  struct Chunk {
    std::vector<std::vector<std::size_t>> layers;
    std::vector<double> layer_bytes;
  };

  // `parts`: the ZeRO parts that slice `params` over the n members of `group` (this one member k);
  // every parameter of a chunk must be in a part, and a bucket's parameters consecutive in it.
  // `params` must hold their final dtype (SixteenBitWeights made before): the hooks sit on their
  // gradient accumulators, which a change of dtype replaces.
  SliceBuckets(const std::vector<torch::Tensor>& params, const std::vector<ZeroPart>& parts,
               const std::vector<Chunk>& chunks, double bucket_bytes,
               c10::intrusive_ptr<Collectives> group, int n, int k,
               std::chrono::milliseconds timeout);
  ~SliceBuckets();
  SliceBuckets(const SliceBuckets&) = delete;
  SliceBuckets& operator=(const SliceBuckets&) = delete;

  // After a backward pass of chunk c (or in place of one this rank has no samples for): the
  // chunk's buckets not yet started start, parameters that got no gradient giving zeros. Every
  // member calls it for the same passes in the same order.
  void end_pass(std::size_t c);
  // Once a step's passes are done: per part, this member's slice of the gradients summed over
  // every member and pass, in fp32 (slice.end - slice.begin elements). The sums start again.
  std::vector<torch::Tensor> finish();
  int count() const;

  struct State;  // (shared with the hooks, which hold it weakly)

 private:
  std::shared_ptr<State> state_;
};

}  // namespace hetplan::runtime::detail

// Internal to the runtime: 16-bit weights beside an fp32 master (slice), as Megatron-LM keeps them
// and as the simulator prices bf16 and fp16 (cost::state_bytes: per parameter 2 bytes of weight,
// 4 of fp32 gradient, and the 12 of master weight and Adam's moments, under ZeRO-1 and -2 divided
// over the group). Without it a rank would hold its part of the weights in fp32, and autocast a
// 16-bit copy of them for each micro-batch in flight.
//
// Only the weights of linear layers and convolutions are held so: autocast casts them to 16 bits
// for every op that reads them, so that holding them rounded computes the same, and their
// gradients, summed in fp32 as they arrive, are the ones the fp32 weights would get. Their biases,
// embedding tables, norms and the other parameters stay fp32: ops outside autocast's 16-bit list
// read them, and autocast's linear adds an fp32 bias to a 3-D input's product unrounded (a GPT's
// losses moved by 6e-6 with its biases rounded; with the weights alone they are unchanged).
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <memory>
#include <vector>

namespace hetplan::runtime::detail {

// The indices among `params` of the weights of `module`'s linear layers and convolutions
// (nn::Linear, nn::Conv2d), in order.
std::vector<std::size_t> autocast_weights(torch::nn::Module& module,
                                          const std::vector<torch::Tensor>& params);

class SixteenBitWeights {
 public:
  // Holds params[which...] in `dtype` from here on (their values rounded to it), and sums their
  // gradients in fp32: a hook after each backward pass's accumulation adds the pass's 16-bit
  // gradient into the fp32 sum and frees it. Hooks registered on them before are lost (a change
  // of dtype gives a leaf a new accumulator): make this before any. Without `sum_gradients` their
  // gradients are left to hooks of the caller's (SliceBuckets', which take each pass's own).
  SixteenBitWeights(const std::vector<torch::Tensor>& params, std::vector<std::size_t> which,
                    at::ScalarType dtype, bool sum_gradients = true);
  ~SixteenBitWeights();
  SixteenBitWeights(const SixteenBitWeights&) = delete;
  SixteenBitWeights& operator=(const SixteenBitWeights&) = delete;

  bool empty() const;
  // Whether `param` is one of them.
  bool holds(const torch::Tensor& param) const;
  // The gradient summed so far: for one of them its fp32 sum (undefined before the first), else
  // param.grad().
  torch::Tensor accumulated(const torch::Tensor& param) const;
  // Once a step's backward passes are done: each becomes an fp32 tensor of its shape that holds no
  // values (a broadcast zero, never to be written), its gradient the fp32 sum, so that what sums,
  // slices, unscales and steps gradients takes them as fp32 parameters.
  void lend_gradients();
  // After the optimizer step: each in 16 bits again (the storage it had), its values to be written
  // (unflatten_into casts the fp32 ones), with no gradient.
  void restore();

  struct State;  // (shared with the hooks, which hold it weakly)

 private:
  std::shared_ptr<State> state_;
};

}  // namespace hetplan::runtime::detail

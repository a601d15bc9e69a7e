// Internal to the runtime: sufficient factor broadcasting in op-level plans (Poseidon; TAG's
// lossless gradient compression). A linear layer's weight gradient is a sum over rows of (output
// gradient row)^T (input row). Each rank of a group keeps, for its replica's rows, the input its
// share of the layer read and the output gradient of its share (its factors); the ranks
// all-gather them, and each rebuilds the gradient of its slice of the weights from every
// replica's rows, dy[:, its outputs]^T x[:, its inputs] (its own rows too, so that the ranks
// holding a slice get the same gradient to the bit).
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "collectives.h"

namespace hetplan::runtime::detail {

using FeatureRange = std::pair<std::int64_t, std::int64_t>;  // [begin, end)

// What one rank of the gather holds: its replica's rows of the factors (ranks of one replica hold
// the same rows), over the features `inputs` of the layer's input and `outputs` of its output
// gradient.
struct FactorHolder {
  int replica = 0;
  std::int64_t rows = 0;
  FeatureRange inputs, outputs;
};

// Of replica r's rows, the factors over the features `inputs` and `outputs` (x, dy), cut from
// the factors `given` by each holder (holders[i] gave given[i]: at least [rows, inputs width +
// outputs width], x's columns first), each feature taken from a holder of r that has it. Throws
// std::logic_error when r's holders do not cover them.
std::pair<torch::Tensor, torch::Tensor> replica_factors(const std::vector<torch::Tensor>& given,
                                                        const std::vector<FactorHolder>& holders,
                                                        int r, FeatureRange inputs,
                                                        FeatureRange outputs);

// This rank's factors `x` [rows, inputs] and `dy` [rows, outputs] (holders[me]) all-gathered
// over `pg`, whose ranks `holders` describe in order (padded to one size, as Gloo's all-gather
// needs), and the factors of every replica's rows (this rank's own too, as gathered) over this
// rank's features (its holder's), concatenated by rows in replica order: the same on every rank
// of the same features, so that dy^T x, the whole gradient of its slice, is too.
std::pair<torch::Tensor, torch::Tensor> gathered_factors(Collectives& pg,
                                                         const std::vector<FactorHolder>& holders,
                                                         int me, const torch::Tensor& x,
                                                         const torch::Tensor& dy,
                                                         std::chrono::milliseconds timeout);

}  // namespace hetplan::runtime::detail

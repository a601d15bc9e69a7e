// DLCP's gradient chunks (plan.h's GradPriority): how one layer's gradient is cut into chunks,
// where each chunk queues on the network, and how much of the gradient's norm it carries.
//
// The magnitude model. DLCP ranks a layer's chunks by their gradient magnitude and sends the
// small ones last, so that what a loss bound drops carries little of the gradient. hetplan does
// not see gradient values when it plans, so it uses a model: the squared norms of a layer's
// chunks are log-normally distributed with a spread of kChunkNormSigma (in natural-log units),
// and every layer's squared gradient norm is proportional to its bytes (unit variance per
// value). Then the chunks below the q-quantile of squared norm carry
//     Phi(Phi^-1(q) - sigma)
// of their layer's squared norm (the log-normal's partial expectation). kChunkNormSigma = 1 is an
// assumption, not a measurement: with it the smallest 5% of chunks carry 0.4% of the squared
// norm, and a calibration run that records chunk norms should replace it. Without the magnitude
// order (GradPriority::layer), the transport does not know which chunks are small, so a chunk
// carries its bytes' share of the norm on average.
#pragma once

#include <vector>

#include "hetplan/plan/plan.h"

namespace hetplan::sim {

inline constexpr double kChunkNormSigma = 1.0;

struct GradChunk {
  double bytes = 0;
  // Queue order on the network: the smallest first. Layer order puts layer i's chunks in
  // [i, i + 1), in the order they are listed.
  double key = 0;
  double norm_share = 0;  // share of its layer's squared gradient norm (the model above)
};

// Layer `layer` (its index in the model: input side first) with `bytes` of gradient, cut into
// ceil(bytes / chunk_bytes) chunks (the last one smaller), in queue order. With layer_magnitude,
// the chunks are listed by expected magnitude, the largest first.
std::vector<GradChunk> layer_chunks(int layer, double bytes, double chunk_bytes,
                                    plan::GradPriority priority);

// The standard normal's distribution function and its inverse (p in (0, 1)).
double normal_cdf(double x);
double normal_quantile(double p);

}  // namespace hetplan::sim

// How a stage's gradients are grouped into the buckets that are all-reduced while the last
// backward pass runs: one rule for the simulator and the runtime.
#pragma once

#include <utility>
#include <vector>

namespace hetplan::sim {

// From the stage's last layer back, a bucket closes once the gradient bytes it holds reach
// `bucket_bytes`; the first layer closes the last bucket whatever it holds. `layer_bytes`: per
// layer of the stage, first layer first. Per bucket, in the order they fill: (offset of its first
// layer, its layer count).
std::vector<std::pair<int, int>> gradient_buckets(const std::vector<double>& layer_bytes,
                                                  double bucket_bytes);

}  // namespace hetplan::sim

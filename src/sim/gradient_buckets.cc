#include "hetplan/sim/gradient_buckets.h"

namespace hetplan::sim {

std::vector<std::pair<int, int>> gradient_buckets(const std::vector<double>& layer_bytes,
                                                  double bucket_bytes) {
  std::vector<std::pair<int, int>> out;
  double held = 0;
  int count = 0;
  for (int off = static_cast<int>(layer_bytes.size()) - 1; off >= 0; --off) {
    held += layer_bytes[static_cast<std::size_t>(off)];
    ++count;
    if (held >= bucket_bytes || off == 0) {
      out.push_back({off, count});
      held = 0;
      count = 0;
    }
  }
  return out;
}

}  // namespace hetplan::sim

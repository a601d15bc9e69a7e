#include "hetplan/sim/grad_chunks.h"

#include <algorithm>
#include <cmath>

namespace hetplan::sim {

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

double normal_quantile(double p) {
  // Bisection on the distribution function: 200 halvings of [-40, 40] reach double precision.
  double lo = -40, hi = 40;
  for (int i = 0; i < 200 && hi - lo > 1e-15; ++i) {
    const double mid = 0.5 * (lo + hi);
    (normal_cdf(mid) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

namespace {

// Share of the squared norm held by the chunks below the q-quantile of squared norm.
double norm_share_below(double q) {
  if (q <= 0) return 0.0;
  if (q >= 1) return 1.0;
  return normal_cdf(normal_quantile(q) - kChunkNormSigma);
}

}  // namespace

std::vector<GradChunk> layer_chunks(int layer, double bytes, double chunk_bytes,
                                    plan::GradPriority priority) {
  std::vector<GradChunk> out;
  if (!(bytes > 0)) return out;
  const double count = std::ceil(bytes / chunk_bytes);
  const int n = static_cast<int>(std::max(1.0, count));
  out.reserve(static_cast<std::size_t>(n));
  double above = 1;  // the share below chunk i's upper quantile, 1 - i / n
  for (int i = 0; i < n; ++i) {
    GradChunk c;
    c.bytes = i + 1 < n ? chunk_bytes : bytes - chunk_bytes * (n - 1);
    c.key = layer + static_cast<double>(i) / n;
    if (priority == plan::GradPriority::layer_magnitude) {
      // Listed largest first: chunk i spans the quantiles [1 - (i + 1) / n, 1 - i / n].
      const double below = norm_share_below(1.0 - static_cast<double>(i + 1) / n);
      c.norm_share = above - below;
      above = below;
    } else {
      c.norm_share = c.bytes / bytes;
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace hetplan::sim

#include "hetplan/sim/schedule_order.h"

#include <algorithm>

namespace hetplan::sim {

std::vector<PassRef> pass_order(plan::Schedule schedule, int num_chunks, int position,
                                int pipeline_size, int microbatches) {
  const int v = num_chunks, m = microbatches, P = pipeline_size;
  std::vector<PassRef> order;
  order.reserve(static_cast<std::size_t>(2 * v * m));
  if (schedule == plan::Schedule::gpipe) {
    for (int mb = 0; mb < m; ++mb)
      for (int c = 0; c < v; ++c) order.push_back({c, mb, true});
    for (int mb = 0; mb < m; ++mb)
      for (int c = v - 1; c >= 0; --c) order.push_back({c, mb, false});
    return order;
  }
  if (v == 1) {
    const int warmup = std::min(P - position - 1, m);
    int f = 0, b = 0;
    for (; f < warmup; ++f) order.push_back({0, f, true});
    while (f < m) {
      order.push_back({0, f++, true});
      order.push_back({0, b++, false});
    }
    while (b < m) order.push_back({0, b++, false});
    return order;
  }
  // Interleaved.
  const int total = m * v;
  auto chunk_of = [&](int k, bool forward) {
    const int c = (k / P) % v;
    return forward ? c : v - 1 - c;
  };
  auto mb_of = [&](int k) { return (k / (P * v)) * P + k % P; };
  const int warmup = std::min((P - position - 1) * 2 + (v - 1) * P, total);
  int f = 0, b = 0;
  for (; f < warmup; ++f) order.push_back({chunk_of(f, true), mb_of(f), true});
  while (f < total) {
    order.push_back({chunk_of(f, true), mb_of(f), true});
    ++f;
    order.push_back({chunk_of(b, false), mb_of(b), false});
    ++b;
  }
  for (; b < total; ++b) order.push_back({chunk_of(b, false), mb_of(b), false});
  return order;
}

std::vector<int> peak_inflight(const std::vector<PassRef>& order, int num_chunks) {
  std::vector<int> live(num_chunks, 0), peak(num_chunks, 0);
  for (const PassRef& p : order) {
    live[p.chunk] += p.forward ? 1 : -1;
    peak[p.chunk] = std::max(peak[p.chunk], live[p.chunk]);
  }
  return peak;
}

}  // namespace hetplan::sim

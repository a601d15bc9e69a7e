#include "unrolled_iterations.h"

namespace hetplan::sim::detail {

namespace {
// Added to a dynamic stream's order keys per iteration: above any key of one iteration (layer
// indices), so an earlier iteration's ready tasks go first.
constexpr double kIterationKey = 1e9;
}  // namespace

TaskGraph unroll_iterations(const TaskGraph& g, int iterations,
                            const std::vector<NextIterationEdge>& next) {
  const int n = static_cast<int>(g.tasks.size());
  const int pools = static_cast<int>(g.drop_budget.size());
  TaskGraph out;
  out.stream_quota = g.stream_quota;
  out.stream_dynamic = g.stream_dynamic;
  out.quotas = g.quotas;
  out.host_cores = g.host_cores;
  out.loads = g.loads;
  out.stop = g.stop;
  out.streams.assign(g.streams.size(), {});
  out.tasks.reserve(static_cast<std::size_t>(n) * iterations);
  for (int k = 0; k < iterations; ++k) {
    const int shift = k * n;
    for (const Task& t : g.tasks) {
      Task c = t;
      if (c.drop_pool >= 0) c.drop_pool += k * pools;
      if (g.stream_dynamic[c.stream]) c.order_key += k * kIterationKey;
      out.tasks.push_back(std::move(c));
    }
    for (std::size_t s = 0; s < g.streams.size(); ++s)
      for (int t : g.streams[s]) out.streams[s].push_back(t + shift);
    out.drop_budget.insert(out.drop_budget.end(), g.drop_budget.begin(), g.drop_budget.end());
    for (const Edge& e : g.edges) out.edges.push_back({e.from + shift, e.to + shift});
    for (int t = 0; t < n; ++t) {
      for (int q : g.quotas_of(t)) out.add_quota(t + shift, q);
      for (int d : g.drop_preds_of(t)) out.add_drop_pred(t + shift, d + shift);
    }
  }
  for (int k = 0; k + 1 < iterations; ++k)
    for (const NextIterationEdge& e : next) {
      const int from = k * n + e.from, to = (k + 1) * n + e.to;
      out.add_edge(from, to);
      if (g.tasks[e.from].drop_bytes > 0) out.add_drop_pred(to, from);
    }
  return out;
}

}  // namespace hetplan::sim::detail

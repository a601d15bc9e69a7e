// All-reduce algorithms (alpha-beta, n devices, S bytes; ../shared/reference/hardware.md):
// ring 2(n-1) steps and 2(n-1)/n S per ring position; double binary tree 2 ceil(log2 n) steps and
// about 2S on the busiest device; hierarchical: reduce-scatter in nodes, all-reduce of S/k across
// nodes on k rails, all-gather in nodes.
#include <cmath>

#include "collective_internal.h"

namespace hetplan::cost::detail {

Estimate ring_all_reduce(const cluster::Cluster& c, const NetworkParams& p, const std::vector<int>& devices,
                         double bytes) {
  const double n = static_cast<double>(devices.size());
  const auto ordered = order_by_node(c, devices);
  return phase(c, p, ring_hops(c, ordered, 2 * (n - 1) / n * bytes), 2 * (n - 1));
}

// Two binary trees (heap layout) over the devices in node order and in reverse order, each reducing
// then broadcasting half of the data: a device interior in one tree is (about) a leaf in the other,
// as in NCCL's double binary tree, so no device sends more than about 2S.
Estimate tree_all_reduce(const cluster::Cluster& c, const NetworkParams& p, const std::vector<int>& devices,
                         double bytes) {
  const std::size_t n = devices.size();
  std::vector<int> order = order_by_node(c, devices);
  std::vector<Hop> hops;
  hops.reserve(4 * n);
  for (int tree = 0; tree < 2; ++tree) {
    if (tree == 1) order.assign(order.rbegin(), order.rend());
    for (std::size_t i = 1; i < n; ++i) {
      const int child = order[i], parent = order[(i - 1) / 2];
      hops.push_back({child, parent, bytes / 2});  // reduce
      hops.push_back({parent, child, bytes / 2});  // broadcast
    }
  }
  const double depth = std::ceil(std::log2(static_cast<double>(n)));
  return phase(c, p, hops, 2 * depth);
}

bool hierarchical_applies(const cluster::Cluster& c, const std::vector<int>& devices) {
  const auto runs = split_by_node(c, order_by_node(c, devices));
  return runs.size() > 1 && uniform_run_size(runs) > 1;
}

Estimate hierarchical_all_reduce(const cluster::Cluster& c, const NetworkParams& p,
                                 const std::vector<int>& devices, double bytes) {
  const auto runs = split_by_node(c, order_by_node(c, devices));
  const int k = uniform_run_size(runs);
  const double m = static_cast<double>(runs.size());
  // Reduce-scatter (and later all-gather) inside every node at once: (k-1)/k S per ring position.
  std::vector<Hop> intra;
  for (const auto& run : runs)
    for (int i = 0; i < k; ++i) intra.push_back({run[i], run[(i + 1) % k], (k - 1.0) / k * bytes});
  const Estimate in_node = phase(c, p, intra, k - 1);
  // All-reduce of each S/k shard across nodes, one ring per local index (rail), all at once.
  std::vector<Hop> inter;
  for (int r = 0; r < k; ++r)
    for (std::size_t j = 0; j < runs.size(); ++j)
      inter.push_back({runs[j][r], runs[(j + 1) % runs.size()][r], 2 * (m - 1) / m * bytes / k});
  const Estimate across = phase(c, p, inter, 2 * (m - 1));
  return sequence(sequence(in_node, across), in_node);
}

}  // namespace hetplan::cost::detail

// All-reduce algorithms (alpha-beta, n devices, S bytes; ../shared/reference/hardware.md):
// ring 2(n-1)/n S per ring position and 2(n-1)/n traversals of the ring's hop latencies (2(n-1)
// alpha when every hop has latency alpha); double binary tree 2 ceil(log2 n) steps and about 2S on
// the busiest device; hierarchical: reduce-scatter in nodes, all-reduce of S/k across nodes on k
// rails, all-gather in nodes.
#include <algorithm>
#include <cmath>

#include "collective_internal.h"

namespace hetplan::cost::detail {
namespace {

// Sum of the path latencies round a ring.
double ring_latency(const cluster::Cluster& c, const std::vector<int>& ring) {
  double total = 0;
  for (std::size_t i = 0; i < ring.size(); ++i)
    total += c.path_latency(ring[i], ring[(i + 1) % ring.size()]).value;
  return total;
}

}  // namespace

Estimate ring_all_reduce(const cluster::Cluster& c, const NetworkParams& p,
                         const std::vector<int>& devices, double bytes) {
  const double n = static_cast<double>(devices.size());
  const auto ordered = order_by_node(c, devices);
  return phase(c, p, ring_hops(c, ordered, 2 * (n - 1) / n * bytes, 2 * (n - 1) / n), 0);
}

// Two binary trees (heap layout) over the devices in node order and in reverse order, each reducing
// then broadcasting half of the data: a device interior in one tree is (about) a leaf in the other,
// as in NCCL's double binary tree, so no device sends more than about 2S.
Estimate tree_all_reduce(const cluster::Cluster& c, const NetworkParams& p,
                         const std::vector<int>& devices, double bytes) {
  const std::size_t n = devices.size();
  std::vector<int> order = order_by_node(c, devices);
  std::vector<Hop> hops;
  hops.reserve(4 * n);
  for (int tree = 0; tree < 2; ++tree) {
    if (tree == 1) std::reverse(order.begin(), order.end());
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

// Rings inside the nodes run in parallel, and so do the k rail rings: each phase's latency is its
// slowest ring's.
Estimate hierarchical_all_reduce(const cluster::Cluster& c, const NetworkParams& p,
                                 const std::vector<int>& devices, double bytes) {
  const auto runs = split_by_node(c, order_by_node(c, devices));
  const int k = uniform_run_size(runs);
  const double m = static_cast<double>(runs.size());
  // Reduce-scatter (and later all-gather) inside every node: (k-1)/k S per ring position.
  std::vector<Hop> intra;
  double intra_latency = 0;
  for (const auto& run : runs) {
    for (int i = 0; i < k; ++i) intra.push_back({run[i], run[(i + 1) % k], (k - 1.0) / k * bytes});
    intra_latency = std::max(intra_latency, ring_latency(c, run));
  }
  Estimate in_node = phase(c, p, intra, 0);
  in_node.latency = Seconds((k - 1.0) / k * intra_latency);
  // All-reduce of each S/k shard across nodes, one ring per local index (rail), all at once.
  std::vector<Hop> inter;
  double inter_latency = 0;
  std::vector<int> rail(runs.size());
  for (int r = 0; r < k; ++r) {
    for (std::size_t j = 0; j < runs.size(); ++j) {
      rail[j] = runs[j][r];
      inter.push_back({runs[j][r], runs[(j + 1) % runs.size()][r], 2 * (m - 1) / m * bytes / k});
    }
    inter_latency = std::max(inter_latency, ring_latency(c, rail));
  }
  Estimate across = phase(c, p, inter, 0);
  across.latency = Seconds(2 * (m - 1) / m * inter_latency);
  Estimate e = sequence(sequence(in_node, across), in_node);
  e.launches = 1;  // one fused call (as NCCL's hierarchical algorithms are)
  return e;
}

}  // namespace hetplan::cost::detail

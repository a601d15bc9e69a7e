// Reduce-scatter, all-gather and broadcast, with the two forms for uneven shards (HAP, EuroSys'24):
// padded pads every shard to the largest and runs one ring collective ((n-1) x max_share x S per
// ring position); grouped runs one broadcast (all-gather) or reduce (reduce-scatter) per device of
// its own shard along the ring, moving each shard once but paying n launches and n chains' latency.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "collective_internal.h"

namespace hetplan::cost::detail {

Estimate ring_shard_collective(const cluster::Cluster& c, const NetworkParams& p,
                               const std::vector<int>& devices, double bytes,
                               const std::vector<double>& shares) {
  const double n = static_cast<double>(devices.size());
  const double largest = shares.empty() ? 1.0 / n : *std::max_element(shares.begin(), shares.end());
  const auto ordered = order_by_node(c, devices);
  return phase(c, p, ring_hops(c, ordered, (n - 1) * largest * bytes, (n - 1) / n), 0);
}

// Chain from root r along the single ring order: r -> r+1 -> ... -> r-1 (broadcast), or the reverse
// flow ending at r for a reduce: r+1 -> ... -> r. Summed over roots, ring hop j -> j+1 carries
// every shard but the one of the device it enters (broadcast) or leaves (reduce). The time is
// summed over the n chains, each at the ring's slowest link per byte (an upper bound on its own
// chain's) and with the mean chain's latency ((n-1)/n of the ring's).
Estimate grouped_shard_collective(const cluster::Cluster& c, const NetworkParams& p,
                                  const std::vector<int>& devices, double bytes,
                                  const std::vector<double>& shares, bool gather) {
  const std::size_t n = devices.size();
  // Shares follow the request's rank order; carry them along when reordering by node.
  std::vector<std::size_t> rank(n);
  std::iota(rank.begin(), rank.end(), 0);
  std::sort(rank.begin(), rank.end(), [&](std::size_t a, std::size_t b) {
    const cluster::Device& x = c.devices[devices[a]];
    const cluster::Device& y = c.devices[devices[b]];
    if (x.node != y.node) return x.node < y.node;
    if (x.local_rank != y.local_rank) return x.local_rank < y.local_rank;
    return devices[a] < devices[b];
  });
  std::vector<int> node_order(n);
  std::vector<double> hop_bytes(n), unit(n, 1.0);
  for (std::size_t j = 0; j < n; ++j) node_order[j] = devices[rank[j]];
  auto share = [&](std::size_t pos) { return shares.empty() ? 1.0 / n : shares[rank[pos]]; };
  for (std::size_t j = 0; j < n; ++j)
    hop_bytes[j] = bytes * (1.0 - share(gather ? (j + 1) % n : j));
  const double chain_share =
      (n - 1.0) / static_cast<double>(n);  // a chain is the ring less one hop
  const Estimate per_byte = phase(c, p, single_ring_hops(node_order, unit, chain_share), 0);
  Estimate e = phase(c, p, single_ring_hops(node_order, hop_bytes, 0), 0);
  e.bandwidth_time = per_byte.bandwidth_time * bytes;  // sum over chains of share x S x (s/B)
  e.latency = per_byte.latency * static_cast<double>(n);
  e.launches = static_cast<int>(n);
  return e;
}

Estimate chain_broadcast(const cluster::Cluster& c, const NetworkParams& p,
                         const std::vector<int>& devices, double bytes) {
  std::vector<int> order{devices.front()};
  const auto rest = order_by_node(c, std::vector<int>(devices.begin() + 1, devices.end()));
  order.insert(order.end(), rest.begin(), rest.end());
  std::vector<Hop> hops;
  for (std::size_t i = 0; i + 1 < order.size(); ++i)
    hops.push_back({order[i], order[i + 1], bytes, 1});
  return phase(c, p, hops, 0);
}

Estimate tree_broadcast(const cluster::Cluster& c, const NetworkParams& p,
                        const std::vector<int>& devices, double bytes) {
  std::vector<int> order{devices.front()};
  const auto rest = order_by_node(c, std::vector<int>(devices.begin() + 1, devices.end()));
  order.insert(order.end(), rest.begin(), rest.end());
  std::vector<Hop> hops;
  for (std::size_t i = 1; i < order.size(); ++i)
    hops.push_back({order[(i - 1) / 2], order[i], bytes});
  return phase(c, p, hops, std::ceil(std::log2(static_cast<double>(order.size()))));
}

}  // namespace hetplan::cost::detail

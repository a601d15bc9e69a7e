#include <algorithm>
#include <cassert>
#include <cstdint>

#include "collective_internal.h"

namespace hetplan::cost {

double link_efficiency(const cluster::Cluster& c, int link, const NetworkParams& params) {
  const double efficiency = cluster::is_network_link(c, link) ? params.inter_node_efficiency
                                                              : params.intra_node_efficiency;
  return efficiency * (1 - c.links[link].background_load);
}

std::vector<double> link_rates(const cluster::Cluster& c, const NetworkParams& params) {
  std::vector<double> rate(c.links.size());
  for (std::size_t l = 0; l < c.links.size(); ++l)
    rate[l] = c.links[l].bandwidth.value * link_efficiency(c, static_cast<int>(l), params);
  return rate;
}

namespace detail {
namespace {

// The route an ECMP switch picks for a flow from src to dst among `paths` equal ones: a hash of
// the flow's ends (a switch hashes the packet's addresses and ports; a flow keeps its route), so
// two flows land on the same route with probability 1 / paths, and the choice is the same on
// every run.
int ecmp_route(int src, int dst, int paths) {
  std::uint64_t x = (static_cast<std::uint64_t>(src) << 32) ^ static_cast<std::uint64_t>(dst);
  x += 0x9e3779b97f4a7c15ULL;  // splitmix64's finaliser
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return static_cast<int>(x % static_cast<std::uint64_t>(paths));
}

}  // namespace

Estimate phase(const cluster::Cluster& c, const NetworkParams& p, const std::vector<Hop>& hops,
               double latency_steps) {
  // Bytes by link, summed in hop order in a table as long as the cluster's links (one per thread,
  // left zeroed), then read out ascending by link: through every link when many are touched, else
  // through the touched ones sorted.
  struct Table {
    std::vector<double> bytes;
    std::vector<char> touched;
    std::vector<int> links;
  };
  thread_local Table table;
  if (table.bytes.size() < c.links.size()) {
    table.bytes.resize(c.links.size(), 0);
    table.touched.resize(c.links.size(), 0);
  }
  table.links.clear();
  auto load = [&](int link, double bytes) {
    if (!table.touched[link]) {
      table.touched[link] = 1;
      table.links.push_back(link);
    }
    table.bytes[link] += bytes;
  };
  double max_latency = 0, weighted_latency = 0;
  const bool multipath = c.multipath();
  for (const Hop& h : hops) {
    if (h.src == h.dst) continue;
    double latency = 0;
    const int paths = multipath ? c.num_equal_routes(h.src, h.dst) : 1;
    if (paths <= 1) {
      for (int l : c.route(h.src, h.dst)) {
        latency += c.links[l].latency.value;
        load(l, h.bytes);
      }
    } else if (p.spray) {
      // Every route carries an equal part of the bytes; they are equal, so their latency is the
      // first's.
      for (int k = 0; k < paths; ++k)
        for (int l : c.equal_route(h.src, h.dst, k)) {
          if (k == 0) latency += c.links[l].latency.value;
          load(l, h.bytes / paths);
        }
    } else {
      for (int l : c.equal_route(h.src, h.dst, ecmp_route(h.src, h.dst, paths))) {
        latency += c.links[l].latency.value;
        load(l, h.bytes);
      }
    }
    max_latency = std::max(max_latency, latency);
    weighted_latency += h.latency_weight * latency;
  }
  Estimate e;
  e.loads.reserve(table.links.size());
  auto take = [&](int link) {
    e.loads.push_back({link, table.bytes[link]});
    table.bytes[link] = 0;
    table.touched[link] = 0;
  };
  if (table.links.size() * 16 >= c.links.size()) {
    for (int l = 0, n = static_cast<int>(c.links.size()); l < n; ++l)
      if (table.touched[l]) take(l);
  } else {
    std::sort(table.links.begin(), table.links.end());
    for (int l : table.links) take(l);
  }
  double slowest = 0;
  for (const LinkLoad& l : e.loads) {
    const double rate = c.links[l.link].bandwidth.value * link_efficiency(c, l.link, p);
    slowest = std::max(slowest, l.bytes / rate);
  }
  e.bandwidth_time = Seconds(slowest);
  e.latency = Seconds(latency_steps * max_latency + weighted_latency);
  return e;
}

Estimate sequence(const Estimate& a, const Estimate& b) {
  Estimate e;
  e.bandwidth_time = a.bandwidth_time + b.bandwidth_time;
  e.latency = a.latency + b.latency;
  e.launches = a.launches + b.launches;
  e.protocols = std::max(a.protocols, b.protocols);  // what both allow
  e.loads.reserve(a.loads.size() + b.loads.size());
  std::size_t i = 0, j = 0;
  while (i < a.loads.size() || j < b.loads.size()) {
    if (j == b.loads.size() || (i < a.loads.size() && a.loads[i].link < b.loads[j].link)) {
      e.loads.push_back(a.loads[i++]);
    } else if (i == a.loads.size() || b.loads[j].link < a.loads[i].link) {
      e.loads.push_back(b.loads[j++]);
    } else {
      e.loads.push_back({a.loads[i].link, a.loads[i].bytes + b.loads[j].bytes});
      ++i, ++j;
    }
  }
  return e;
}

std::vector<int> order_by_node(const cluster::Cluster& c, const std::vector<int>& devices) {
  std::vector<int> out = devices;
  std::sort(out.begin(), out.end(), [&](int a, int b) {
    const cluster::Device& x = c.devices[a];
    const cluster::Device& y = c.devices[b];
    if (x.node != y.node) return x.node < y.node;
    if (x.local_rank != y.local_rank) return x.local_rank < y.local_rank;
    return a < b;
  });
  return out;
}

std::vector<std::vector<int>> split_by_node(const cluster::Cluster& c,
                                            const std::vector<int>& ordered) {
  std::vector<std::vector<int>> runs;
  for (std::size_t i = 0; i < ordered.size(); ++i) {
    if (i == 0 || c.devices[ordered[i]].node != c.devices[ordered[i - 1]].node) runs.emplace_back();
    runs.back().push_back(ordered[i]);
  }
  return runs;
}

int uniform_run_size(const std::vector<std::vector<int>>& runs) {
  if (runs.empty()) return 0;
  const std::size_t k = runs.front().size();
  for (const auto& r : runs)
    if (r.size() != k) return 0;
  return static_cast<int>(k);
}

std::vector<Hop> single_ring_hops(const std::vector<int>& order, const std::vector<double>& bytes,
                                  double traversals) {
  assert(order.size() == bytes.size());
  std::vector<Hop> hops;
  hops.reserve(order.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    hops.push_back({order[i], order[(i + 1) % order.size()], bytes[i], traversals});
  return hops;
}

std::vector<Hop> ring_hops(const cluster::Cluster& c, const std::vector<int>& ordered,
                           double per_position, double traversals) {
  const auto runs = split_by_node(c, ordered);
  const int k = uniform_run_size(runs);
  if (runs.size() < 2 || k < 2)
    return single_ring_hops(ordered, std::vector<double>(ordered.size(), per_position), traversals);
  // Channel ch visits each node's devices starting at local index ch and leaves from ch - 1, so the
  // intra-node hop i -> i+1 serves k - 1 of the k channels, and the k inter-node hops of a node
  // boundary leave from k different devices. Each channel carries 1/k of the data. A channel
  // crosses n hops; weighting each hop by the fraction of channels using it gives the mean
  // channel's latency.
  std::vector<Hop> hops;
  hops.reserve(2 * ordered.size());
  const double per_channel = per_position / k;
  for (std::size_t j = 0; j < runs.size(); ++j) {
    const auto& here = runs[j];
    const auto& next = runs[(j + 1) % runs.size()];
    const double intra_share = (k - 1.0) / k, inter_share = 1.0 / k;
    for (int i = 0; i < k; ++i)
      hops.push_back({here[i], here[(i + 1) % k], per_channel * (k - 1), traversals * intra_share});
    for (int ch = 0; ch < k; ++ch)
      hops.push_back({here[(ch + k - 1) % k], next[ch], per_channel, traversals * inter_share});
  }
  return hops;
}

}  // namespace detail
}  // namespace hetplan::cost

// Building blocks of the collective cost model: transfers ("hops") between devices, routed over the
// cluster's links, summed per link, and turned into an alpha-beta time.
#pragma once

#include <utility>
#include <vector>

#include "hetplan/cost/collective_cost.h"

namespace hetplan::cost::detail {

// `bytes` sent from device src to device dst over the whole collective. A pipelined ring or chain
// pays each hop's path latency once per traversal of the data through it: `latency_weight` is how
// many times (a ring all-reduce's hops 2(n-1)/n each, so that n hops of latency alpha give the
// textbook 2(n-1) alpha; a chain's hops 1).
struct Hop {
  int src = 0, dst = 0;
  double bytes = 0;
  double latency_weight = 0;
};

// The protocols (cost::Protocol) a library runs an estimate's transfers with: NCCL's collectives
// any of the three, its send and receive (p2p, all-to-all) Simple or LL, a parameter server
// Simple alone.
enum class Protocols { all, send_recv, simple };

// Cost of a collective (or of sequential phases of one) under the Simple protocol, before the
// launch overhead is added.
struct Estimate {
  Seconds bandwidth_time;        // sum over sequential phases of the slowest link's time
  Seconds latency;               // latency steps x slowest hop path latency, summed over phases
  int launches = 1;              // collective calls (each pays NetworkParams::collective_launch)
  std::vector<LinkLoad> loads;   // by ascending link id
  Protocols protocols = Protocols::all;
};

// An estimate's terms under a protocol, as shares of Simple's.
struct ProtocolShares {
  Protocol protocol = Protocol::simple;
  double bandwidth = 1;  // of the links' bandwidth carrying payload
  double hop = 1;        // of each step's latency
  double launch = 1;     // of the call's fixed latency (NetworkParams::collective_launch)
};

// The protocol NetworkParams::protocols and the estimate allow that takes the least time (Simple
// on ties), with that time: bandwidth_time / bandwidth + latency x hop + launches x
// collective_launch x launch.
std::pair<ProtocolShares, Seconds> fastest_protocol(const Estimate& e, const NetworkParams& p);

// One phase: all hops run concurrently; time = max over links of load / (bandwidth x efficiency),
// latency = latency_steps x (largest path latency among the hops) + sum over hops of
// latency_weight x path latency.
Estimate phase(const cluster::Cluster& c, const NetworkParams& p, const std::vector<Hop>& hops,
               double latency_steps);
// a then b: times add, loads add, launches add.
Estimate sequence(const Estimate& a, const Estimate& b);

// Devices sorted by (node, local rank), and cut into runs of one node each.
std::vector<int> order_by_node(const cluster::Cluster& c, const std::vector<int>& devices);
std::vector<std::vector<int>> split_by_node(const cluster::Cluster& c, const std::vector<int>& ordered);
// k when every run has the same size k, else 0.
int uniform_run_size(const std::vector<std::vector<int>>& runs);

// Hops of a ring over `ordered` (by node) moving `per_position` bytes out of every ring position,
// the data going `traversals` times round the ring: with several nodes of k > 1 devices each,
// k channels (see collective_cost.h), else one ring. Latency weights make the latency the mean
// channel's sum of hop latencies times `traversals`.
std::vector<Hop> ring_hops(const cluster::Cluster& c, const std::vector<int>& ordered, double per_position,
                           double traversals);
// Plain single ring order[i] -> order[i+1 mod n], `bytes[i]` on hop i, latency weight `traversals`.
std::vector<Hop> single_ring_hops(const std::vector<int>& order, const std::vector<double>& bytes,
                                  double traversals);

// Algorithms (n >= 2, bytes > 0).
Estimate ring_all_reduce(const cluster::Cluster& c, const NetworkParams& p, const std::vector<int>& devices, double bytes);
Estimate tree_all_reduce(const cluster::Cluster& c, const NetworkParams& p, const std::vector<int>& devices, double bytes);
bool hierarchical_applies(const cluster::Cluster& c, const std::vector<int>& devices);
Estimate hierarchical_all_reduce(const cluster::Cluster& c, const NetworkParams& p, const std::vector<int>& devices, double bytes);

// Reduce-scatter and all-gather (same volumes, opposite direction of data flow).
Estimate ring_shard_collective(const cluster::Cluster& c, const NetworkParams& p, const std::vector<int>& devices,
                               double bytes, const std::vector<double>& shares);
Estimate grouped_shard_collective(const cluster::Cluster& c, const NetworkParams& p, const std::vector<int>& devices,
                                  double bytes, const std::vector<double>& shares, bool gather);
Estimate chain_broadcast(const cluster::Cluster& c, const NetworkParams& p, const std::vector<int>& devices, double bytes);
Estimate tree_broadcast(const cluster::Cluster& c, const NetworkParams& p, const std::vector<int>& devices, double bytes);

Estimate all_to_all(const cluster::Cluster& c, const NetworkParams& p, const std::vector<int>& devices,
                    double bytes, const std::vector<double>& shares);
Estimate point_to_point(const cluster::Cluster& c, const NetworkParams& p, int src, int dst, double bytes);
Estimate parameter_server(const cluster::Cluster& c, const NetworkParams& p, const std::vector<int>& devices,
                          double bytes, const std::vector<double>& shares);

}  // namespace hetplan::cost::detail

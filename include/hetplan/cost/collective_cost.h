// Time of collectives and transfers on the actual links between the chosen devices
// (alpha-beta model: latency per step plus bytes over the bottleneck bandwidth of the links the
// algorithm uses, counting how many of its flows share each link).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hetplan/cluster/cluster.h"
#include "hetplan/core/units.h"

namespace hetplan::cost {

enum class Collective { all_reduce, reduce_scatter, all_gather, all_to_all, broadcast, p2p, ps_push_pull };
enum class Algorithm { automatic, ring, tree, hierarchical, direct, parameter_server };
// For uneven shards: pad every shard to the largest (one collective), or one broadcast/reduce per
// device moving each device's own shard once (n launches).
enum class UnevenForm { padded, grouped };

// The wire protocol of an NCCL-class collective, which NCCL chooses per call from its own model of
// each (src/graph/tuning.cc): Simple moves whole buffers behind a flag (all the bandwidth, the most
// latency per step), LL128 128-byte lines carrying 120 bytes and their flag, LL 8-byte stores
// carrying 4 bytes and a flag (half the bandwidth, a fifth of Simple's latency per step). The
// achieved bus bandwidth of a collective by message size is the best of the three at each size.
enum class Protocol { simple, ll128, ll };

const char* to_string(Collective c);
const char* to_string(Algorithm a);
const char* to_string(UnevenForm f);
const char* to_string(Protocol p);

struct LinkLoad {
  int link = 0;       // Cluster::links index
  double bytes = 0;   // bytes this collective moves over that link
};

struct CollectiveCost {
  Seconds time;                // standalone time: latency + bandwidth terms
  Seconds latency;             // the latency term alone
  Algorithm algorithm = Algorithm::ring;  // the one chosen (when automatic)
  UnevenForm uneven_form = UnevenForm::padded;
  Protocol protocol = Protocol::simple;  // the fastest for this message (NetworkParams::protocols)
  std::vector<LinkLoad> loads;  // per link, on the wire (a protocol's flags included), for the
                                // simulator's sharing of links by flows
};

struct NetworkParams {
  double intra_node_efficiency = 0.0;  // fraction of NVLink/PCIe bandwidth collectives reach
  double inter_node_efficiency = 0.0;  // fraction of NIC bandwidth
  Seconds collective_launch;           // per collective call (software overhead)
  // A flow between devices with several equal routes (a leaf-spine network's spines,
  // cluster::Cluster::num_equal_routes): false hashes it onto one of them by its ends (ECMP, so
  // flows can collide on one spine while another idles); true sprays its bytes evenly over all of
  // them (plan::Multipath::spray).
  bool spray = false;
  // Whether NCCL-class collectives choose their protocol by message size (Protocol; each call the
  // fastest): LL and LL128 where latency outweighs bandwidth. false: Simple alone, the textbook
  // alpha-beta time. Parameter servers (not NCCL) always move whole buffers.
  bool protocols = false;
  static NetworkParams defaults();
};

// The efficiency that applies to a link: intra_node_efficiency when neither end is a NIC or a
// network switch (device <-> node switch, device <-> device), inter_node_efficiency otherwise,
// times the share of its bandwidth that other tenants' traffic leaves (1 - background_load).
double link_efficiency(const cluster::Cluster& c, int link, const NetworkParams& params);
// Per link, its rate for transfers (bytes/s): its bandwidth times link_efficiency.
std::vector<double> link_rates(const cluster::Cluster& c, const NetworkParams& params);

// What `bytes` means per kind:
// - all_reduce: the tensor every device holds (shares are ignored);
// - reduce_scatter: its input on every device; all_gather: its output (the whole tensor);
//   device i's shard is shares[i] * bytes (bytes / n when shares is empty);
// - all_to_all: the whole tensor summed over devices: device i holds shares[i] * bytes and sends
//   shares[i] * shares[j] * bytes to device j (bytes / n^2 when even);
// - broadcast: the tensor, from devices[0] to all the others;
// - p2p: bytes from devices[0] to devices[1];
// - ps_push_pull: the parameters (and their gradients). Without shares, devices[0] is the one
//   server and holds them all; every other device pushes its gradient (bytes) to it and pulls the
//   parameters (bytes) back. With shares, parameters are sharded over servers: device s serves
//   shares[s] of them (0: a pure worker), and every device pushes and pulls shares[s] * bytes
//   to and from each other server s (BytePS/HeteroG style colocated servers).
struct CollectiveRequest {
  Collective kind = Collective::all_reduce;
  std::vector<int> devices;    // participants, in rank order (for p2p: {src, dst}; ps: {server, workers...})
  Bytes bytes;                 // the full tensor size (all-reduce, all-gather output, ...)
  std::vector<double> shares;  // optional uneven shard fractions per device (sum 1); empty = even
  Algorithm algorithm = Algorithm::automatic;
  // For uneven reduce_scatter / all_gather: the form to use; empty = the cheaper one.
  std::optional<UnevenForm> uneven_form;
};

// Cheapest algorithm unless the request names one. Zero time for one device or zero bytes.
// Algorithms by kind (automatic picks the cheapest of those that apply):
// - all_reduce: ring, tree (double binary), hierarchical (only when the devices span more than one
//   node with the same number k > 1 on each), parameter_server (as ps_push_pull with devices[0]
//   as server); automatic never picks parameter_server;
// - reduce_scatter, all_gather: ring (padded or grouped form when shares are uneven);
// - broadcast: ring (a pipelined chain) or tree (binary);
// - all_to_all, p2p: direct; ps_push_pull: parameter_server.
// A named algorithm that does not apply falls back to automatic; `algorithm` in the result says
// what was used. Rings order devices by (node, local rank); between nodes with k devices each
// they run k channels, each entering and leaving every node through a different device, so k NIC
// rails carry the traffic (as NCCL's rings do).
// Bandwidth term: max over links of load / (bandwidth x link_efficiency). Latency term: rings and
// chains pay each hop's path latency once per pass of the data round them (a ring all-reduce
// 2(n-1)/n times the sum round the ring: 2(n-1) alpha when every hop has latency alpha, and NVLink
// hops cheaper than network hops otherwise); trees, all-to-all, p2p and parameter servers pay
// steps x the largest path latency. Plus collective_launch per call (n for grouped forms).
CollectiveCost collective_cost(const cluster::Cluster& c, const CollectiveRequest& req,
                               const NetworkParams& params);

}  // namespace hetplan::cost

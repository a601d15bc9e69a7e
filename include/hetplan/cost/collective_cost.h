// Time of collectives and transfers on the actual links between the chosen devices
// (alpha-beta model: latency per step plus bytes over the bottleneck bandwidth of the links the
// algorithm uses, counting how many of its flows share each link).
#pragma once

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

const char* to_string(Collective c);
const char* to_string(Algorithm a);
const char* to_string(UnevenForm f);

struct LinkLoad {
  int link = 0;       // Cluster::links index
  double bytes = 0;   // bytes this collective moves over that link
};

struct CollectiveCost {
  Seconds time;                // standalone time: latency + bandwidth terms
  Seconds latency;             // the latency term alone
  Algorithm algorithm = Algorithm::ring;  // the one chosen (when automatic)
  UnevenForm uneven_form = UnevenForm::padded;
  std::vector<LinkLoad> loads; // per link, for the simulator's sharing of links by flows
};

struct NetworkParams {
  double intra_node_efficiency = 0.0;  // fraction of NVLink/PCIe bandwidth collectives reach
  double inter_node_efficiency = 0.0;  // fraction of NIC bandwidth
  Seconds collective_launch;           // per collective call (software overhead)
  static NetworkParams defaults();
};

struct CollectiveRequest {
  Collective kind = Collective::all_reduce;
  std::vector<int> devices;    // participants, in rank order (for p2p: {src, dst}; ps: {server, workers...})
  Bytes bytes;                 // the full tensor size (all-reduce, all-gather output, ...)
  std::vector<double> shares;  // optional uneven shard fractions per device (sum 1); empty = even
  Algorithm algorithm = Algorithm::automatic;
};

// Cheapest algorithm unless the request names one. Zero time for one device or zero bytes.
CollectiveCost collective_cost(const cluster::Cluster& c, const CollectiveRequest& req,
                               const NetworkParams& params);

}  // namespace hetplan::cost

// A cluster with some of its devices gone (failed or taken away): what elastic replanning plans
// for. The fabric stays as it was (NICs, switches and every link between them), so a transfer
// between two remaining devices takes the same route as before and a plan for the subcluster,
// its devices renamed back, simulates the same on the whole cluster.
#pragma once

#include <string_view>
#include <vector>

#include "hetplan/cluster/cluster.h"
#include "hetplan/core/error.h"

namespace hetplan::cluster {

struct Subcluster {
  Cluster cluster;
  std::vector<int> original;  // original[d]: the id in the whole cluster of the subcluster's d
};

// c without the devices `removed` (ids of c; repeats allowed) and their links to the fabric.
// Nodes left without a device go too; node groups count the nodes they keep. An error when
// nothing would remain or an id is not c's.
Result<Subcluster> without_devices(const Cluster& c, const std::vector<int>& removed);

// The ids of c's devices not in `kept` (ids of c, ascending), ascending: what without_devices
// removes to leave `kept`, or what a subcluster's `original` left out.
std::vector<int> other_devices(const Cluster& c, const std::vector<int>& kept);

// Device ids from a comma-separated list of ids or names ("3,a100/0/2"), in the order given.
// `source` names the argument in errors ("--remove").
Result<std::vector<int>> parse_device_list(const Cluster& c, std::string_view text,
                                           std::string_view source);

}  // namespace hetplan::cluster

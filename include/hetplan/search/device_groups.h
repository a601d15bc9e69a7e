// The cluster as planners see it: groups of alike devices (same type, same node shape), each a
// list of nodes; tensor-parallel groups are carved out of one node.
#pragma once

#include <string>
#include <vector>

#include "hetplan/cluster/cluster.h"
#include "hetplan/plan/plan.h"

namespace hetplan::search {

struct DeviceGroup {
  std::string name;  // node group name (or the device type's for the explicit form)
  int type = 0;      // index into Cluster::device_types
  int devices_per_node = 0;
  std::vector<std::vector<int>> nodes;  // device ids per node, ascending
  int size() const { return static_cast<int>(nodes.size()) * devices_per_node; }
  std::vector<int> devices() const;  // every device, node by node
};

// Nodes grouped by (device type, devices per node, node group), in order of first appearance; a
// node holding several device types contributes one part per type.
std::vector<DeviceGroup> device_groups(const cluster::Cluster& c);

// Replicas of `tp` consecutive devices of one node each, over `devices` (listed node by node, a
// multiple of tp per node); empty when tp does not divide a node's share.
std::vector<plan::Replica> tp_replicas(const cluster::Cluster& c, const std::vector<int>& devices,
                                       int tp);

// The device's dense peak for the model's dtype, FLOP/s: its type's, times its node's cpu_share.
double device_peak(const cluster::Cluster& c, int device, model::DType dt);

// Integer samples per replica proportional to `weights` and summing to `total` (largest
// remainder; ties to the lower index); every weight > 0 gets at least one sample when
// total >= count. Then batch_share = samples / total.
std::vector<std::int64_t> proportional_split(const std::vector<double>& weights,
                                             std::int64_t total);

// Sets batch_share of each replica from integer sample counts (dropping replicas with 0).
void set_batch_shares(std::vector<plan::Replica>& replicas,
                      const std::vector<std::int64_t>& samples);

}  // namespace hetplan::search

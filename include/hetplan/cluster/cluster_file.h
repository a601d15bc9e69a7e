// Cluster files (YAML, version: 1), built-in presets, and a readable summary.
//
//   version: 1
//   nodes:
//     - group: a100
//       count: 4
//       device: A100-SXM4-80GB        # catalog name or one under device_types
//       devices_per_node: 8
//       intra_node: {bandwidth: 300GB/s, latency: 2us}   # per device, per direction
//       nic: {bandwidth: 200Gbps, count: 8, latency: 5us} # per node
//   network: {kind: switch}            # or {kind: fat-tree, oversubscription: 2}, or
//                                      # {kind: leaf-spine, spines: 2, nodes_per_leaf: 4};
//                                      # each may add background_load: 0.3 (cross traffic)
//   device_types: []                   # custom devices, same fields as the catalog
//
// or the explicit form for irregular topologies:
//
//   version: 1
//   devices: [{name: g0, device: V100-SXM2-16GB, node: m0}, ...]
//   switches: [{name: s0}]
//   links: [{from: g0, to: s0, bandwidth: 10Gbps, latency: 20us, duplex: true}, ...]
//                                      # optional per link: background_load: 0.2
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "hetplan/cluster/cluster.h"
#include "hetplan/core/error.h"

namespace hetplan::cluster {

// Parses YAML text; `source` (a file name) prefixes every error.
Result<Cluster> parse_cluster_yaml(std::string_view yaml_text, const std::string& source);
Result<Cluster> read_cluster_file(const std::string& file);

struct ClusterPreset {
  std::string name;         // "dgx-a100:4" style names take a node count after the colon
  std::string description;
  int default_nodes = 0;    // > 0 when the preset takes ":N" (the node count used without it)
};
const std::vector<ClusterPreset>& cluster_presets();

// A preset name (optionally "name:N" for N nodes where the preset takes it) or a YAML file path.
// `source` names the argument in errors ("--cluster").
Result<Cluster> load_cluster(std::string_view text, std::string_view source = "--cluster");

// The YAML text of a preset (so users can copy and edit it); empty when unknown.
std::string preset_yaml(std::string_view name);

// Multi-line human summary: groups, device counts by type, total memory and peak, links.
std::string summarize(const Cluster& c);

}  // namespace hetplan::cluster

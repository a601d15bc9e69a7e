// Private to the cluster layer: the pieces parse_cluster_yaml assembles a Cluster from.
#pragma once

#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "hetplan/cluster/cluster.h"

namespace hetplan::cluster::detail {

// Device types a file may name: its own `device_types` (which take precedence, so a file can
// correct a catalog figure) and then the catalog.
struct TypeTable {
  std::vector<DeviceType> custom;
  // Throws InputError at `field` when `name` is neither custom nor in the catalog.
  DeviceType resolve(const std::string& name, const std::string& field) const;
};

TypeTable read_device_types(const YAML::Node& doc);  // reads doc["device_types"]

// Index of `t` in c.device_types, appending it on first use.
int intern_type(Cluster& c, const DeviceType& t);
int add_vertex(Cluster& c, VertexKind kind, std::string name);
int add_link(Cluster& c, int from, int to, BytesPerSecond bandwidth, Seconds latency);
// Fills c.out_links from c.links (ascending link ids per vertex).
void index_links(Cluster& c);

// The most devices one cluster may hold (a guard against typos such as count: 10000000).
inline constexpr long long kMaxDevices = 65536;

Cluster build_node_groups(const YAML::Node& doc, const TypeTable& types);  // standard form
Cluster build_explicit(const YAML::Node& doc, const TypeTable& types);     // explicit form

}  // namespace hetplan::cluster::detail

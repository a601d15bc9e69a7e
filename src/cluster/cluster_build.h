// Private to the cluster layer: the pieces parse_cluster_yaml assembles a Cluster from.
#pragma once

#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "hetplan/cluster/cluster.h"

namespace hetplan::cluster::detail {

// Device types a file may name: its own `device_types` (which take precedence, so a file can
// correct a catalog figure) and then the catalog.
// The file's `prices` (USD per GPU-hour by type name) override both.
struct TypeTable {
  std::vector<DeviceType> custom;
  std::vector<std::pair<std::string, UsdPerHour>> prices;  // canonical name, price
  // Throws InputError at `field` when `name` is neither custom nor in the catalog.
  DeviceType resolve(const std::string& name, const std::string& field) const;
};

// Reads doc["device_types"], then doc["prices"].
TypeTable read_device_types(const YAML::Node& doc);

// Index of `t` in c.device_types, appending it on first use; `written` is the name the file gave
// it, recorded in c.type_aliases when it is an alias.
int intern_type(Cluster& c, const DeviceType& t, const std::string& written);
int add_vertex(Cluster& c, VertexKind kind, std::string name);
int add_link(Cluster& c, int from, int to, BytesPerSecond bandwidth, Seconds latency);
// Fills c.out_links from c.links (ascending link ids per vertex).
void index_links(Cluster& c);

// The most devices one cluster may hold (a guard against typos such as count: 10000000).
inline constexpr long long kMaxDevices = 65536;

Cluster build_node_groups(const YAML::Node& doc, const TypeTable& types);  // standard form
Cluster build_explicit(const YAML::Node& doc, const TypeTable& types);     // explicit form

}  // namespace hetplan::cluster::detail

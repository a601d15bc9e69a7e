// A cluster: devices, the nodes that hold them, and the network as a graph of directed links.
// Devices are vertices 0..num_devices-1 of that graph; NIC ports, node switches and network
// switches are further vertices. Every link is one direction of a physical link, so full-duplex
// traffic in the two directions does not compete.
#pragma once

#include <string>
#include <vector>

#include "hetplan/cluster/device_type.h"
#include "hetplan/core/units.h"

namespace hetplan::cluster {

struct Device {
  int id = 0;           // also its vertex id
  int node = 0;         // index into Cluster::nodes
  int local_rank = 0;   // index within its node
  int type = 0;         // index into Cluster::device_types
  std::string name;     // "a100/0/3": group / node-in-group / local rank
  auto operator<=>(const Device&) const = default;
};

struct Node {
  int id = 0;
  std::string group;         // node group name from the cluster file
  std::vector<int> devices;  // device ids, ascending
  auto operator<=>(const Node&) const = default;
};

enum class VertexKind { device, nic, node_switch, network_switch };

struct Vertex {
  VertexKind kind = VertexKind::device;
  std::string name;
  auto operator<=>(const Vertex&) const = default;
};

struct Link {
  int from = 0, to = 0;  // vertex ids
  BytesPerSecond bandwidth;
  Seconds latency;
  std::string name;      // "a100/0/3->nvswitch", for traces and errors
  auto operator<=>(const Link&) const = default;
};

struct Cluster {
  std::string name;
  std::vector<DeviceType> device_types;  // only the types in use, in first-use order
  std::vector<Device> devices;
  std::vector<Node> nodes;
  std::vector<Vertex> vertices;  // devices first (vertex i == device i), then the rest
  std::vector<Link> links;
  // For routing: out_links[v] lists the link ids leaving vertex v.
  std::vector<std::vector<int>> out_links;

  int num_devices() const { return static_cast<int>(devices.size()); }
  const DeviceType& type_of(int device) const { return device_types[devices[device].type]; }
  bool same_node(int a, int b) const { return devices[a].node == devices[b].node; }

  // The links a transfer from device a to device b crosses, in order (empty when a == b).
  // Deterministic: the fewest hops, ties broken by the lowest link ids.
  std::vector<int> route(int a, int b) const;
  // Sum of link latencies and the smallest link bandwidth along route(a, b).
  Seconds path_latency(int a, int b) const;
  BytesPerSecond path_bandwidth(int a, int b) const;

  auto operator<=>(const Cluster&) const = default;
};

}  // namespace hetplan::cluster

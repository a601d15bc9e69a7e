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
  int id = 0;          // also its vertex id
  int node = 0;        // index into Cluster::nodes
  int local_rank = 0;  // index within its node
  int type = 0;        // index into Cluster::device_types
  std::string name;    // "a100/0/3": group / node-in-group / local rank
  auto operator<=>(const Device&) const = default;
};

struct Node {
  int id = 0;
  std::string group;         // node group name from the cluster file
  std::vector<int> devices;  // device ids, ascending
  // Fraction of one host CPU core that each device (worker) of this node may use when an
  // emulator runs the plan on CPUs, in (0, 1]: a budget of cpu_share x kCpuQuotaPeriod of CPU
  // time per period (the kernel's CFS bandwidth control, as `hetplan run --emulate` applies it to
  // each rank and the simulator models it).
  double cpu_share = 1.0;
  auto operator<=>(const Node&) const = default;
};

// The period over which a node's cpu_share is granted: the kernel's default CFS period.
inline constexpr Seconds kCpuQuotaPeriod{0.1};

// A group of identical nodes as written in the cluster file (none for the explicit form).
struct NodeGroup {
  std::string name;
  int count = 0;        // nodes
  int device_type = 0;  // index into Cluster::device_types
  int devices_per_node = 0;
  BytesPerSecond intra_bandwidth;  // per device, per direction
  Seconds intra_latency;
  BytesPerSecond nic_bandwidth;  // per NIC, per direction
  int nic_count = 0;             // per node
  Seconds nic_latency;
  double cpu_share = 1.0;
  auto operator<=>(const NodeGroup&) const = default;
};

enum class NetworkKind { single_switch, fat_tree, explicit_links, leaf_spine };
const char* to_string(NetworkKind k);  // "switch", "fat-tree", "explicit", "leaf-spine"

// Precomputed routes of a device in the standard (node group) form, so that route() is O(1):
// a transfer inside a node is {intra_up of a, intra_down of b}; between nodes it is
// inter_up of a followed by inter_down of b (they meet at the network core). In a leaf-spine
// network inter_up and inter_down end at the device's leaf switch instead: two devices under one
// leaf meet there, and devices under different leaves cross a spine in between (LeafSpine).
struct DeviceRoutes {
  int intra_up = -1, intra_down = -1;  // device -> node switch, node switch -> device (-1: none)
  std::vector<int> inter_up;           // device -> NIC -> ... -> network core (or leaf)
  std::vector<int> inter_down;         // network core (or leaf) -> ... -> NIC -> device
  int leaf = -1;  // leaf-spine: index of the leaf of the device's node; -1 for the other kinds
  auto operator<=>(const DeviceRoutes&) const = default;
};

// The fabric of a leaf-spine network (NetworkKind::leaf_spine): consecutive nodes, nodes_per_leaf
// of them per leaf switch, and every leaf joined to every spine switch by one link each way.
// Between two leaves there are `spines` paths of equal length, one through each spine.
struct LeafSpine {
  int spines = 0;  // 0: not a leaf-spine network
  int nodes_per_leaf = 0;
  std::vector<int> up;    // at leaf * spines + s: the link id of leaf -> spine s
  std::vector<int> down;  // at leaf * spines + s: the link id of spine s -> leaf
  int leaves() const { return spines > 0 ? static_cast<int>(up.size()) / spines : 0; }
  auto operator<=>(const LeafSpine&) const = default;
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
  // Fraction of the bandwidth in [0, 1) that other tenants' traffic (cross traffic) takes; the
  // simulator and the cost model see bandwidth x (1 - background_load) of it. The cluster file
  // sets it on the network links (network.background_load) or link by link (explicit form).
  double background_load = 0;
  std::string name;  // "a100/0/3->nvswitch", for traces and errors
  auto operator<=>(const Link&) const = default;
};

// A device type the cluster file named by an alias ("a100" for A100-SXM4-80GB), so that output
// can say which part the name was taken to mean.
struct TypeAlias {
  std::string written;    // as the file wrote it
  std::string canonical;  // the catalog (or device_types) name it resolved to
  auto operator<=>(const TypeAlias&) const = default;
};

struct Cluster {
  std::string name;
  // What loads this cluster again (load_cluster's argument): a preset's name ("dgx-a100:4") or a
  // cluster file's absolute path; empty for one parsed from text. Plans name their cluster by it.
  std::string reference;
  std::vector<DeviceType> device_types;  // only the types in use, in first-use order
  std::vector<TypeAlias> type_aliases;   // each alias the file used, once, in first-use order
  std::vector<Device> devices;
  std::vector<Node> nodes;
  std::vector<Vertex> vertices;  // devices first (vertex i == device i), then the rest
  std::vector<Link> links;
  // For routing: out_links[v] lists the link ids leaving vertex v.
  std::vector<std::vector<int>> out_links;
  std::vector<NodeGroup> groups;  // empty for the explicit form
  NetworkKind network = NetworkKind::single_switch;
  // fat-tree: node uplink = NIC total / oversubscription; leaf-spine: each leaf -> spine link
  // carries the NIC total of the leaf's nodes / (spines x oversubscription).
  double oversubscription = 1.0;
  LeafSpine leaf_spine;  // leaf-spine only (spines == 0 otherwise)
  // One entry per device in the standard form; empty for the explicit form (routes by search).
  std::vector<DeviceRoutes> routes;

  int num_devices() const { return static_cast<int>(devices.size()); }
  // What a plan names the cluster by: its reference, or its name where it has none.
  const std::string& reference_or_name() const { return reference.empty() ? name : reference; }
  const DeviceType& type_of(int device) const { return device_types[devices[device].type]; }
  // What the devices cost to rent per hour: the sum of their types' prices (0 for unknown ones).
  UsdPerHour price_per_hour() const;
  bool same_node(int a, int b) const { return devices[a].node == devices[b].node; }
  // Index into groups of the node group device d's node belongs to; -1 in the explicit form.
  int group_of(int device) const;

  // The links a transfer from device a to device b crosses, in order (empty when a == b).
  // Deterministic: the fewest hops, ties broken by the lowest link ids.
  std::vector<int> route(int a, int b) const;
  // Equal-cost multipath (ECMP): how many routes of fewest hops the fabric offers from a to b, and
  // the k-th of them (0 <= k < num_equal_routes(a, b); equal_route(a, b, 0) == route(a, b); empty
  // when a == b). Leaf-spine: one per spine (route k through spine k) between nodes under
  // different leaves, 1 otherwise; 0 for a == b. O(1) counts and routes of at most ten link ids
  // in the standard form. The explicit form does not enumerate equal paths yet: one route each.
  // Only the fabric's paths count, not detours such as two devices meeting at their shared NIC.
  int num_equal_routes(int a, int b) const;
  std::vector<int> equal_route(int a, int b, int k) const;
  // True when some pair of devices has more than one equal route (a leaf-spine network with at
  // least two spines and two leaves).
  bool multipath() const { return leaf_spine.spines >= 2 && leaf_spine.leaves() >= 2; }
  // Sum of link latencies and the smallest link bandwidth along route(a, b); for a == b the latency
  // is 0 and the bandwidth infinite.
  Seconds path_latency(int a, int b) const;
  BytesPerSecond path_bandwidth(int a, int b) const;
  // Routes from device a to every device (index b; empty for b == a), one search for all.
  std::vector<std::vector<int>> routes_from(int a) const;

  auto operator<=>(const Cluster&) const = default;
};

// True when link l belongs to the network between nodes: a NIC or a network switch at one end
// (not NVLink or PCIe inside a node). network.background_load applies to these links.
bool is_network_link(const Cluster& c, int l);

// Breadth-first route over the link graph: fewest hops; vertices are expanded in discovery order
// and each vertex's out-links in ascending id, and a vertex keeps the first link that reached it.
// route() uses it for the explicit form and agrees with it on the standard form.
std::vector<int> route_by_search(const Cluster& c, int a, int b);

}  // namespace hetplan::cluster

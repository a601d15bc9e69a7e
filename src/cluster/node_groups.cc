// The standard form: groups of identical nodes joined by a switch, a fat-tree or a leaf-spine.
//
// Each node becomes this graph (every line is two directed links, one per direction):
//
//            network core ("network", one vertex)
//                 |  fat-tree only: a per-node leaf, uplink = nic.count * nic.bandwidth / k
//            [node leaf]
//            /    |    \                     NIC ports: P = min(nic.count, devices_per_node),
//        nic0   nic1 .. nicP-1               each of nic.bandwidth * nic.count / P
//         |  \    |
//        d0  d1  d2  ...  dD-1               device r uses port floor(r * P / D)
//         \   \   |   /
//          node switch ("switch")            per device: intra_node.bandwidth
//
// So (a) two devices of a node talk through the node switch at intra_node bandwidth; (b) one
// device reaches the network at nic.bandwidth * max(1, nic.count / devices_per_node): a DGX A100
// (8 GPUs, 8x 200 Gb/s) gives each GPU its own 25 GB/s rail and the node 200 GB/s, while four
// GPUs sharing one NIC share its bandwidth; (c) with a fat-tree of oversubscription k the node's
// uplink carries its NIC total divided by k; (d) links are directed, so the two directions of a
// full-duplex link never compete.
//
// A leaf-spine network has no single core: consecutive nodes (in node order over all groups),
// nodes_per_leaf of them, hang off one leaf switch ("leaf<i>") in the place of the core above, and
// every leaf has one link each way to each of the N spine switches ("spine<s>"), of bandwidth
// (NIC total of the leaf's nodes) / (N * k). Nodes under one leaf meet at the leaf; between leaves
// there are N equal paths, leaf -> spine s -> leaf (ECMP).
//
// Latencies: the intra_node latency is split evenly over device->switch and switch->device; the
// NIC latency over NIC->network and network->NIC (so a transfer between nodes with NIC latencies
// la and lb sees (la + lb) / 2); the other links have none. The NIC latency thus stands for the
// whole crossing of the network, whatever its shape: a fat-tree's uplinks and a leaf-spine's
// leaf-spine links add none, so the latency between two nodes does not depend on the kind of
// network nor on the spine a transfer takes.
//
// network.background_load (cross traffic) is set on every network link: those with a NIC or a
// network switch at one end (is_network_link), not the links inside a node.
//
// Link ids are given node by node, intra-node links first, so the breadth-first route (lowest link
// ids on ties) inside a node goes through the node switch, as the precomputed routes do. A leaf's
// links to the spines follow its last node, spine by spine, so the search too crosses spine 0.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "cluster_build.h"
#include "hetplan/core/error.h"
#include "yaml_fields.h"

namespace hetplan::cluster::detail {
namespace {

using namespace hetplan::literals;

struct GroupSpec {
  NodeGroup group;
  DeviceType type;
  std::string written;  // the type's name as the file gave it
};

// The `network` mapping, validated.
struct NetworkSpec {
  NetworkKind kind = NetworkKind::single_switch;
  double oversubscription = 1.0;
  int spines = 0, nodes_per_leaf = 0;  // leaf-spine only
  double background_load = 0;
};

// A leaf-spine network with more spines than a switch radix allows is surely a typo.
constexpr long long kMaxSpines = 64;
// Guards the size of the graph (leaves x spines links each way) against typos such as one node
// per leaf on a large cluster.
constexpr long long kMaxLeafSpineLinks = 1 << 18;

GroupSpec read_group(const YAML::Node& n, const std::string& path, const TypeTable& types) {
  check_map(n, path,
            {"group", "count", "device", "devices_per_node", "intra_node", "nic", "cpu_share"});
  GroupSpec spec;
  NodeGroup& g = spec.group;
  const std::string device = read_string(n, "device", path);
  spec.type = types.resolve(device, child_path(path, "device"));
  spec.written = device;
  std::string dflt;
  for (char ch : spec.type.name) dflt += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  g.name = read_string_or(n, "group", path, dflt);
  if (g.name.find('/') != std::string::npos)
    throw InputError(child_path(path, "group"), fmt::format("expected a name without '/', got '{}'", g.name));
  const long long count = read_positive_int(n, "count", path);
  const long long per_node = read_positive_int(n, "devices_per_node", path);
  if (count > kMaxDevices || per_node > kMaxDevices)
    throw InputError(child_path(path, count > kMaxDevices ? "count" : "devices_per_node"),
                     fmt::format("expected at most {} devices in a cluster", kMaxDevices));
  g.count = static_cast<int>(count);
  g.devices_per_node = static_cast<int>(per_node);

  const std::string ipath = child_path(path, "intra_node");
  if (!has(n, "intra_node"))
    throw InputError(ipath, "missing (expected {bandwidth: ..., latency: ...}, e.g. {bandwidth: 300GB/s})");
  const YAML::Node intra = n["intra_node"];
  check_map(intra, ipath, {"bandwidth", "latency"});
  g.intra_bandwidth = read_bandwidth(intra, "bandwidth", ipath);
  g.intra_latency = read_duration_or(intra, "latency", ipath, 2_us);

  const std::string npath = child_path(path, "nic");
  if (!has(n, "nic"))
    throw InputError(npath, "missing (expected {bandwidth: ..., count: ..., latency: ...}, e.g. {bandwidth: 200Gbps})");
  const YAML::Node nic = n["nic"];
  check_map(nic, npath, {"bandwidth", "count", "latency"});
  g.nic_bandwidth = read_bandwidth(nic, "bandwidth", npath);
  const long long nics = read_positive_int_or(nic, "count", npath, 1);
  if (nics > 1024) throw InputError(child_path(npath, "count"), "expected at most 1024 NICs per node");
  g.nic_count = static_cast<int>(nics);
  g.nic_latency = read_duration_or(nic, "latency", npath, 5_us);

  g.cpu_share = read_number_or(n, "cpu_share", path, 1.0);
  if (!(g.cpu_share > 0 && g.cpu_share <= 1))
    throw InputError(child_path(path, "cpu_share"), "expected a number in (0, 1]");
  return spec;
}

NetworkSpec read_network(const YAML::Node& doc, long long nodes) {
  NetworkSpec net;
  if (!has(doc, "network")) return net;
  const YAML::Node n = doc["network"];
  check_map(n, "network",
            {"kind", "oversubscription", "spines", "nodes_per_leaf", "background_load"});
  const std::string kind = read_string_or(n, "kind", "network", "switch");
  if (kind == "fat-tree") {
    net.kind = NetworkKind::fat_tree;
  } else if (kind == "leaf-spine") {
    net.kind = NetworkKind::leaf_spine;
  } else if (kind != "switch") {
    throw InputError(
        "network.kind",
        fmt::format("unknown kind '{}' (expected switch, fat-tree or leaf-spine)", kind));
  }
  // A key that the kind does not use is refused rather than silently ignored.
  if (net.kind == NetworkKind::single_switch && has(n, "oversubscription"))
    throw InputError("network.oversubscription", "only allowed with kind: fat-tree or leaf-spine");
  for (const char* key : {"spines", "nodes_per_leaf"})
    if (net.kind != NetworkKind::leaf_spine && has(n, key))
      throw InputError(child_path("network", key), "only allowed with kind: leaf-spine");

  net.oversubscription = read_number_or(n, "oversubscription", "network", 1.0);
  if (!(net.oversubscription >= 1))
    throw InputError("network.oversubscription", "expected a number >= 1 (1: non-blocking)");
  if (net.kind == NetworkKind::leaf_spine) {
    const long long spines = read_positive_int(n, "spines", "network");
    if (spines > kMaxSpines)
      throw InputError("network.spines", fmt::format("expected at most {} spines", kMaxSpines));
    // A leaf holds at most every node: a larger count means the same network.
    const long long per_leaf = std::min(read_positive_int(n, "nodes_per_leaf", "network"), nodes);
    const long long leaves = (nodes + per_leaf - 1) / per_leaf;
    if (leaves * spines > kMaxLeafSpineLinks)
      throw InputError("network", fmt::format("expected at most {} leaf-spine links each way, got "
                                              "{} leaves x {} spines",
                                              kMaxLeafSpineLinks, leaves, spines));
    net.spines = static_cast<int>(spines);
    net.nodes_per_leaf = static_cast<int>(per_leaf);
  }
  net.background_load = read_background_load(n, "network");
  return net;
}

// Adds one node's vertices and links and fills c.routes for its devices.
void build_node(Cluster& c, const NodeGroup& g, int in_group, int first_device,
                int core, double oversubscription, bool fat_tree) {
  const int dpn = g.devices_per_node;
  const std::string prefix = fmt::format("{}/{}", g.name, in_group);
  if (dpn > 1) {
    const int sw = add_vertex(c, VertexKind::node_switch, prefix + "/switch");
    const Seconds half = g.intra_latency / 2.0;
    for (int r = 0; r < dpn; ++r) {
      const int d = first_device + r;
      c.routes[d].intra_up = add_link(c, d, sw, g.intra_bandwidth, half);
      c.routes[d].intra_down = add_link(c, sw, d, g.intra_bandwidth, half);
    }
  }
  const int ports = std::min(g.nic_count, dpn);
  const BytesPerSecond port_bw = g.nic_bandwidth * (static_cast<double>(g.nic_count) / ports);
  std::vector<int> nic(ports);
  for (int p = 0; p < ports; ++p) nic[p] = add_vertex(c, VertexKind::nic, fmt::format("{}/nic{}", prefix, p));
  std::vector<int> to_nic(dpn), from_nic(dpn);
  for (int r = 0; r < dpn; ++r) {
    const int d = first_device + r;
    const int p = static_cast<int>(static_cast<long long>(r) * ports / dpn);
    to_nic[r] = add_link(c, d, nic[p], port_bw, Seconds(0));
    from_nic[r] = add_link(c, nic[p], d, port_bw, Seconds(0));
  }
  int up = core;
  if (fat_tree) up = add_vertex(c, VertexKind::network_switch, prefix + "/leaf");
  const Seconds half = g.nic_latency / 2.0;
  std::vector<int> nic_up(ports), nic_down(ports);
  for (int p = 0; p < ports; ++p) {
    nic_up[p] = add_link(c, nic[p], up, port_bw, half);
    nic_down[p] = add_link(c, up, nic[p], port_bw, half);
  }
  int leaf_up = -1, leaf_down = -1;
  if (fat_tree) {
    const BytesPerSecond uplink = g.nic_bandwidth * (g.nic_count / oversubscription);
    leaf_up = add_link(c, up, core, uplink, Seconds(0));
    leaf_down = add_link(c, core, up, uplink, Seconds(0));
  }
  for (int r = 0; r < dpn; ++r) {
    const int p = static_cast<int>(static_cast<long long>(r) * ports / dpn);
    DeviceRoutes& rt = c.routes[first_device + r];
    rt.inter_up = {to_nic[r], nic_up[p]};
    rt.inter_down = {nic_down[p], from_nic[r]};
    if (fat_tree) {
      rt.inter_up.push_back(leaf_up);
      rt.inter_down.insert(rt.inter_down.begin(), leaf_down);
    }
  }
}

// The leaf-spine fabric: spine switches, leaf switches, then each node as for a single switch with
// its leaf in the core's place, and after a leaf's last node its links to the spines. Fills
// c.leaf_spine and the devices' leaf in c.routes.
void build_leaf_spine(Cluster& c, int spines, int nodes_per_leaf) {
  const int nodes = static_cast<int>(c.nodes.size());
  const int leaves = (nodes + nodes_per_leaf - 1) / nodes_per_leaf;
  std::vector<int> spine(spines), leaf(leaves);
  for (int s = 0; s < spines; ++s)
    spine[s] = add_vertex(c, VertexKind::network_switch, fmt::format("spine{}", s));
  for (int l = 0; l < leaves; ++l)
    leaf[l] = add_vertex(c, VertexKind::network_switch, fmt::format("leaf{}", l));
  LeafSpine& ls = c.leaf_spine;
  ls.spines = spines;
  ls.nodes_per_leaf = nodes_per_leaf;
  ls.up.assign(static_cast<std::size_t>(leaves) * spines, -1);
  ls.down.assign(ls.up.size(), -1);
  int first = 0, node = 0;
  BytesPerSecond nic_total(0);  // of the current leaf's nodes
  for (const NodeGroup& g : c.groups) {
    for (int j = 0; j < g.count; ++j, ++node) {
      const int l = node / nodes_per_leaf;
      build_node(c, g, j, first, leaf[l], c.oversubscription, false);
      for (int r = 0; r < g.devices_per_node; ++r) c.routes[first + r].leaf = l;
      first += g.devices_per_node;
      nic_total += g.nic_bandwidth * static_cast<double>(g.nic_count);
      if ((node + 1) % nodes_per_leaf != 0 && node + 1 != nodes) continue;
      const BytesPerSecond uplink = nic_total / (spines * c.oversubscription);
      for (int s = 0; s < spines; ++s) {
        const std::size_t at = static_cast<std::size_t>(l) * spines + s;
        ls.up[at] = add_link(c, leaf[l], spine[s], uplink, Seconds(0));
        ls.down[at] = add_link(c, spine[s], leaf[l], uplink, Seconds(0));
      }
      nic_total = BytesPerSecond(0);
    }
  }
}

}  // namespace

Cluster build_node_groups(const YAML::Node& doc, const TypeTable& types) {
  const YAML::Node list = doc["nodes"];
  check_list(list, "nodes", "node groups");
  if (list.size() == 0) throw InputError("nodes", "expected at least one node group");
  if (has(doc, "switches") || has(doc, "links"))
    throw InputError("document", "'switches' and 'links' belong to the explicit form (with 'devices'), not to 'nodes'");

  std::vector<GroupSpec> specs;
  long long total = 0, nodes = 0;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string path = item_path("nodes", i);
    GroupSpec s = read_group(list[i], path, types);
    for (const GroupSpec& o : specs)
      if (o.group.name == s.group.name)
        throw InputError(child_path(path, "group"),
                         fmt::format("duplicate group name '{}' (expected unique names)", s.group.name));
    total += static_cast<long long>(s.group.count) * s.group.devices_per_node;
    nodes += s.group.count;
    if (total > kMaxDevices)
      throw InputError(path, fmt::format("expected at most {} devices in a cluster", kMaxDevices));
    specs.push_back(std::move(s));
  }

  const NetworkSpec net = read_network(doc, nodes);
  Cluster c;
  c.network = net.kind;
  c.oversubscription = net.oversubscription;

  // Devices first (vertex i == device i), in group order, node order, local rank.
  const int n = static_cast<int>(total);
  c.devices.reserve(n);
  c.vertices.reserve(n + 1);
  for (const GroupSpec& s : specs) {
    NodeGroup g = s.group;
    g.device_type = intern_type(c, s.type, s.written);
    for (int j = 0; j < g.count; ++j) {
      Node node;
      node.id = static_cast<int>(c.nodes.size());
      node.group = g.name;
      node.cpu_share = g.cpu_share;
      for (int r = 0; r < g.devices_per_node; ++r) {
        Device d;
        d.id = static_cast<int>(c.devices.size());
        d.node = node.id;
        d.local_rank = r;
        d.type = g.device_type;
        d.name = fmt::format("{}/{}/{}", g.name, j, r);
        node.devices.push_back(d.id);
        add_vertex(c, VertexKind::device, d.name);
        c.devices.push_back(std::move(d));
      }
      c.nodes.push_back(std::move(node));
    }
    c.groups.push_back(std::move(g));
  }
  c.routes.resize(n);
  if (c.network == NetworkKind::leaf_spine) {
    build_leaf_spine(c, net.spines, net.nodes_per_leaf);
  } else {
    const int core = add_vertex(c, VertexKind::network_switch, "network");
    int first = 0;
    for (const NodeGroup& g : c.groups) {
      for (int j = 0; j < g.count; ++j) {
        build_node(c, g, j, first, core, c.oversubscription, c.network == NetworkKind::fat_tree);
        first += g.devices_per_node;
      }
    }
  }
  for (std::size_t l = 0; l < c.links.size(); ++l)
    if (is_network_link(c, static_cast<int>(l))) c.links[l].background_load = net.background_load;
  index_links(c);
  return c;
}

}  // namespace hetplan::cluster::detail

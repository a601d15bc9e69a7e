// The explicit form, for irregular topologies: devices, switches and links named one by one.
//
//   devices:  [{name: g0, device: V100-SXM2-16GB, node: m0}, ...]   # node optional
//   switches: [{name: s0, kind: network}]                           # kind: network | node
//   links:    [{from: g0, to: s0, bandwidth: 10Gbps, latency: 20us, duplex: true,
//               background_load: 0.2}, ...]
//
// Devices are vertices 0..n-1 in the order listed, then the switches. Devices naming the same node
// form one Node (in order of first appearance); a device without a node is a node of its own. A
// duplex link (the default) is two directed links. Latency defaults to 1us, background_load (the
// fraction of the bandwidth cross traffic takes, both directions of a duplex link) to 0. Every
// device must be able to reach every other one. Routes are the breadth-first search's, one per
// pair: this form does not enumerate equal paths (Cluster::num_equal_routes is 1).
#include <deque>
#include <map>

#include <fmt/format.h>

#include "cluster_build.h"
#include "hetplan/core/error.h"
#include "yaml_fields.h"

namespace hetplan::cluster::detail {
namespace {

using namespace hetplan::literals;

// Vertices reachable from `start` following links forwards (or backwards when reverse).
std::vector<char> reachable(const Cluster& c, int start, bool reverse) {
  std::vector<std::vector<int>> in_links;
  if (reverse) {
    in_links.resize(c.vertices.size());
    for (std::size_t l = 0; l < c.links.size(); ++l) in_links[c.links[l].to].push_back(static_cast<int>(l));
  }
  std::vector<char> seen(c.vertices.size(), 0);
  std::deque<int> queue{start};
  seen[start] = 1;
  while (!queue.empty()) {
    const int v = queue.front();
    queue.pop_front();
    for (int l : reverse ? in_links[v] : c.out_links[v]) {
      const int w = reverse ? c.links[l].from : c.links[l].to;
      if (!seen[w]) {
        seen[w] = 1;
        queue.push_back(w);
      }
    }
  }
  return seen;
}

void check_connected(const Cluster& c) {
  const auto from0 = reachable(c, 0, false);
  const auto to0 = reachable(c, 0, true);
  for (int d = 1; d < c.num_devices(); ++d) {
    if (!from0[d])
      throw InputError("links", fmt::format("device '{}' cannot reach device '{}' (expected a path "
                                            "between every pair of devices)",
                                            c.devices[0].name, c.devices[d].name));
    if (!to0[d])
      throw InputError("links", fmt::format("device '{}' cannot reach device '{}' (expected a path "
                                            "between every pair of devices)",
                                            c.devices[d].name, c.devices[0].name));
  }
}

}  // namespace

Cluster build_explicit(const YAML::Node& doc, const TypeTable& types) {
  if (has(doc, "network"))
    throw InputError("network", "belongs to the node-group form; the explicit form gives its links under 'links'");
  Cluster c;
  c.network = NetworkKind::explicit_links;
  std::map<std::string, int> vertex_of;  // name -> vertex id
  std::map<std::string, int> node_of;    // node name -> node id

  const YAML::Node devices = doc["devices"];
  check_list(devices, "devices", "devices");
  if (devices.size() == 0) throw InputError("devices", "expected at least one device");
  if (static_cast<long long>(devices.size()) > kMaxDevices)
    throw InputError("devices", fmt::format("expected at most {} devices", kMaxDevices));
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const std::string path = item_path("devices", i);
    const YAML::Node d = devices[i];
    check_map(d, path, {"name", "device", "node"});
    Device dev;
    dev.id = static_cast<int>(i);
    dev.name = read_string(d, "name", path);
    if (vertex_of.count(dev.name))
      throw InputError(child_path(path, "name"), fmt::format("duplicate name '{}' (expected unique names)", dev.name));
    const std::string written = read_string(d, "device", path);
    dev.type = intern_type(c, types.resolve(written, child_path(path, "device")), written);
    const std::string node_name = read_string_or(d, "node", path, dev.name);
    auto [it, added] = node_of.try_emplace(node_name, static_cast<int>(c.nodes.size()));
    if (added) {
      Node node;
      node.id = it->second;
      node.group = node_name;
      c.nodes.push_back(std::move(node));
    }
    dev.node = it->second;
    dev.local_rank = static_cast<int>(c.nodes[dev.node].devices.size());
    c.nodes[dev.node].devices.push_back(dev.id);
    vertex_of[dev.name] = add_vertex(c, VertexKind::device, dev.name);
    c.devices.push_back(std::move(dev));
  }

  if (has(doc, "switches")) {
    const YAML::Node switches = doc["switches"];
    check_list(switches, "switches", "switches");
    for (std::size_t i = 0; i < switches.size(); ++i) {
      const std::string path = item_path("switches", i);
      const YAML::Node s = switches[i];
      check_map(s, path, {"name", "kind"});
      const std::string name = read_string(s, "name", path);
      if (vertex_of.count(name))
        throw InputError(child_path(path, "name"), fmt::format("duplicate name '{}' (expected unique names)", name));
      const std::string kind = read_string_or(s, "kind", path, "network");
      VertexKind vk = VertexKind::network_switch;
      if (kind == "node") vk = VertexKind::node_switch;
      else if (kind == "nic") vk = VertexKind::nic;
      else if (kind != "network")
        throw InputError(child_path(path, "kind"), fmt::format("unknown kind '{}' (expected network, node or nic)", kind));
      vertex_of[name] = add_vertex(c, vk, name);
    }
  }

  if (!has(doc, "links") && c.num_devices() > 1)
    throw InputError("links", "missing (expected a list of links such as {from: g0, to: s0, bandwidth: 10Gbps})");
  if (has(doc, "links")) {
    const YAML::Node links = doc["links"];
    check_list(links, "links", "links");
    for (std::size_t i = 0; i < links.size(); ++i) {
      const std::string path = item_path("links", i);
      const YAML::Node l = links[i];
      check_map(l, path, {"from", "to", "bandwidth", "latency", "duplex", "background_load"});
      int ends[2] = {0, 0};
      for (int e = 0; e < 2; ++e) {
        const char* key = e == 0 ? "from" : "to";
        const std::string name = read_string(l, key, path);
        auto it = vertex_of.find(name);
        if (it == vertex_of.end())
          throw InputError(child_path(path, key),
                           fmt::format("unknown endpoint '{}' (expected the name of a device or switch)", name));
        ends[e] = it->second;
      }
      if (ends[0] == ends[1])
        throw InputError(path, fmt::format("a link from '{}' to itself (expected two different endpoints)",
                                           c.vertices[ends[0]].name));
      const BytesPerSecond bw = read_bandwidth(l, "bandwidth", path);
      const Seconds lat = read_duration_or(l, "latency", path, 1_us);
      const double load = read_background_load(l, path);
      c.links[add_link(c, ends[0], ends[1], bw, lat)].background_load = load;
      if (read_bool_or(l, "duplex", path, true))
        c.links[add_link(c, ends[1], ends[0], bw, lat)].background_load = load;
    }
  }
  index_links(c);
  check_connected(c);
  return c;
}

}  // namespace hetplan::cluster::detail

#include "hetplan/cluster/subcluster.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <string>

#include "cluster_build.h"

namespace hetplan::cluster {
namespace {

// Renames link ids by `link_to` (-1: gone, which a kept route never crosses).
void rename_links(std::vector<int>& ids, const std::vector<int>& link_to) {
  for (int& l : ids) {
    assert(link_to[l] >= 0);
    l = link_to[l];
  }
}

void rename_link(int& id, const std::vector<int>& link_to) {
  if (id >= 0) {
    assert(link_to[id] >= 0);
    id = link_to[id];
  }
}

}  // namespace

std::vector<int> other_devices(const Cluster& c, const std::vector<int>& kept) {
  std::vector<int> out;
  for (int d = 0, k = 0; d < c.num_devices(); ++d) {
    if (k < static_cast<int>(kept.size()) && kept[k] == d) {
      ++k;
      continue;
    }
    out.push_back(d);
  }
  return out;
}

Result<Subcluster> without_devices(const Cluster& c, const std::vector<int>& removed) {
  const int n = c.num_devices();
  std::vector<char> gone(n, 0);
  for (int d : removed) {
    if (d < 0 || d >= n)
      return Error{fmt::format("device {} does not exist (the cluster has {} devices)", d, n)};
    gone[d] = 1;
  }
  Subcluster sub;
  for (int d = 0; d < n; ++d)
    if (!gone[d]) sub.original.push_back(d);
  const int k = static_cast<int>(sub.original.size());
  if (k == 0)
    return Error{fmt::format("removing every device of {} leaves nothing to plan for", c.name)};

  // Vertices: the kept devices first, then every other vertex in its order.
  std::vector<int> vertex_to(c.vertices.size(), -1);
  for (int i = 0; i < k; ++i) vertex_to[sub.original[i]] = i;
  for (std::size_t v = n; v < c.vertices.size(); ++v) vertex_to[v] = static_cast<int>(v) - n + k;
  Cluster& s = sub.cluster;
  s.name = c.name;
  s.network = c.network;
  s.oversubscription = c.oversubscription;
  s.vertices.resize(c.vertices.size() - (n - k));
  for (std::size_t v = 0; v < c.vertices.size(); ++v)
    if (vertex_to[v] >= 0) s.vertices[vertex_to[v]] = c.vertices[v];
  std::vector<int> link_to(c.links.size(), -1);
  for (std::size_t l = 0; l < c.links.size(); ++l) {
    const Link& old = c.links[l];
    if (vertex_to[old.from] < 0 || vertex_to[old.to] < 0) continue;
    link_to[l] = static_cast<int>(s.links.size());
    Link kept = old;
    kept.from = vertex_to[old.from];
    kept.to = vertex_to[old.to];
    s.links.push_back(std::move(kept));
  }
  detail::index_links(s);

  // Nodes that keep a device, and the device types still in use, in their first-use order.
  std::vector<int> node_to(c.nodes.size(), -1), type_to(c.device_types.size(), -1);
  for (int d : sub.original) {
    const Device& old = c.devices[d];
    if (node_to[old.node] < 0) {
      node_to[old.node] = static_cast<int>(s.nodes.size());
      Node node = c.nodes[old.node];
      node.id = node_to[old.node];
      node.devices.clear();
      s.nodes.push_back(std::move(node));
    }
    if (type_to[old.type] < 0) {
      type_to[old.type] = static_cast<int>(s.device_types.size());
      s.device_types.push_back(c.device_types[old.type]);
    }
    Device dev = old;
    dev.id = static_cast<int>(s.devices.size());
    dev.node = node_to[old.node];
    dev.type = type_to[old.type];
    Node& node = s.nodes[dev.node];
    dev.local_rank = static_cast<int>(node.devices.size());
    node.devices.push_back(dev.id);
    s.devices.push_back(std::move(dev));
  }
  for (const NodeGroup& g : c.groups) {
    NodeGroup kept = g;
    kept.count = static_cast<int>(std::count_if(
        s.nodes.begin(), s.nodes.end(), [&](const Node& node) { return node.group == g.name; }));
    if (kept.count == 0) continue;
    kept.device_type = type_to[g.device_type];
    s.groups.push_back(std::move(kept));
  }
  s.leaf_spine = c.leaf_spine;
  rename_links(s.leaf_spine.up, link_to);
  rename_links(s.leaf_spine.down, link_to);
  if (!c.routes.empty())
    for (int d : sub.original) {
      DeviceRoutes r = c.routes[d];
      rename_link(r.intra_up, link_to);
      rename_link(r.intra_down, link_to);
      rename_links(r.inter_up, link_to);
      rename_links(r.inter_down, link_to);
      s.routes.push_back(std::move(r));
    }
  return sub;
}

Result<std::vector<int>> parse_device_list(const Cluster& c, std::string_view text,
                                           std::string_view source) {
  std::vector<int> ids;
  std::size_t from = 0;
  while (from <= text.size()) {
    const std::size_t end = std::min(text.find(',', from), text.size());
    const std::string item(text.substr(from, end - from));
    from = end + 1;
    if (item.empty())
      return Error{fmt::format("{}: expected device ids or names separated by commas, got \"{}\"",
                               source, text)};
    const bool digits =
        std::all_of(item.begin(), item.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    int id = -1;
    if (digits && item.size() < 9) {
      id = std::stoi(item);
    } else {
      const auto it = std::find_if(c.devices.begin(), c.devices.end(),
                                   [&](const Device& d) { return d.name == item; });
      if (it != c.devices.end()) id = it->id;
    }
    if (id < 0 || id >= c.num_devices())
      return Error{fmt::format(
          "{}: \"{}\" is neither a device id (0 to {}) nor a device name of {} (such as \"{}\")",
          source, item, c.num_devices() - 1, c.name, c.devices.front().name)};
    ids.push_back(id);
  }
  return ids;
}

}  // namespace hetplan::cluster

// Routing over the link graph of a Cluster.
//
// The standard form (node groups) is built with per-device route tables (Cluster::routes), so a
// route is assembled from at most eight precomputed link ids (ten in a leaf-spine network, whose
// leaf -> spine -> leaf hop is looked up in Cluster::leaf_spine): collectives ask for O(n) routes
// and clusters reach thousands of devices. The explicit form has no such structure and is routed by
// a breadth-first search that stops at the target.
#include "hetplan/cluster/cluster.h"

#include <cassert>
#include <deque>
#include <limits>

namespace hetplan::cluster {
namespace {

// Breadth-first search from device a: pred[v] is the link that first reached v (-1: unreached).
// Stops early once `target` (>= 0) is reached.
std::vector<int> search_tree(const Cluster& c, int a, int target) {
  std::vector<int> pred(c.vertices.size(), -1);
  std::vector<char> seen(c.vertices.size(), 0);
  std::deque<int> queue{a};
  seen[a] = 1;
  while (!queue.empty()) {
    const int v = queue.front();
    queue.pop_front();
    for (int l : c.out_links[v]) {
      const int w = c.links[l].to;
      if (seen[w]) continue;
      seen[w] = 1;
      pred[w] = l;
      if (w == target) return pred;
      queue.push_back(w);
    }
  }
  return pred;
}

std::vector<int> unwind(const Cluster& c, const std::vector<int>& pred, int a, int b) {
  std::vector<int> path;
  for (int v = b; v != a;) {
    const int l = pred[v];
    if (l < 0) return {};  // unreachable (validation rejects such clusters)
    path.push_back(l);
    v = c.links[l].from;
  }
  return {path.rbegin(), path.rend()};
}

}  // namespace

const char* to_string(NetworkKind k) {
  switch (k) {
    case NetworkKind::single_switch:
      return "switch";
    case NetworkKind::fat_tree:
      return "fat-tree";
    case NetworkKind::explicit_links:
      return "explicit";
    case NetworkKind::leaf_spine:
      return "leaf-spine";
  }
  return "?";
}

bool is_network_link(const Cluster& c, int l) {
  const auto network = [&](int v) {
    const VertexKind k = c.vertices[v].kind;
    return k == VertexKind::nic || k == VertexKind::network_switch;
  };
  return network(c.links[l].from) || network(c.links[l].to);
}

std::vector<int> route_by_search(const Cluster& c, int a, int b) {
  if (a == b) return {};
  return unwind(c, search_tree(c, a, b), a, b);
}

int Cluster::group_of(int device) const {
  const std::string& group = nodes[devices[device].node].group;
  for (std::size_t g = 0; g < groups.size(); ++g)
    if (groups[g].name == group) return static_cast<int>(g);
  return -1;
}

UsdPerHour Cluster::price_per_hour() const {
  UsdPerHour sum;
  for (const Device& d : devices) sum += device_types[d.type].price_per_hour;
  return sum;
}

std::vector<int> Cluster::route(int a, int b) const { return equal_route(a, b, 0); }

int Cluster::num_equal_routes(int a, int b) const {
  if (a == b) return 0;
  // Devices of the other kinds all have leaf -1, and the explicit form has no route tables.
  if (routes.empty() || routes[a].leaf == routes[b].leaf) return 1;
  return leaf_spine.spines;
}

std::vector<int> Cluster::equal_route(int a, int b, int k) const {
  assert(a >= 0 && a < num_devices() && b >= 0 && b < num_devices());
  if (a == b) return {};
  assert(k >= 0 && k < num_equal_routes(a, b));
  if (routes.empty()) return route_by_search(*this, a, b);
  const DeviceRoutes& ra = routes[a];
  const DeviceRoutes& rb = routes[b];
  if (same_node(a, b)) return {ra.intra_up, rb.intra_down};
  std::vector<int> path;
  path.reserve(ra.inter_up.size() + rb.inter_down.size() + 2);
  path.insert(path.end(), ra.inter_up.begin(), ra.inter_up.end());
  if (ra.leaf != rb.leaf) {
    // Up from a's leaf to spine k, down from spine k to b's leaf. Spine 0 is the route of fewest
    // hops with the lowest link ids (each leaf's spine links are numbered in spine order).
    path.push_back(leaf_spine.up[static_cast<std::size_t>(ra.leaf) * leaf_spine.spines + k]);
    path.push_back(leaf_spine.down[static_cast<std::size_t>(rb.leaf) * leaf_spine.spines + k]);
  }
  path.insert(path.end(), rb.inter_down.begin(), rb.inter_down.end());
  return path;
}

std::vector<std::vector<int>> Cluster::routes_from(int a) const {
  std::vector<std::vector<int>> out(devices.size());
  if (!routes.empty()) {
    for (int b = 0; b < num_devices(); ++b) out[b] = route(a, b);
    return out;
  }
  const std::vector<int> pred = search_tree(*this, a, -1);
  for (int b = 0; b < num_devices(); ++b)
    if (b != a) out[b] = unwind(*this, pred, a, b);
  return out;
}

Seconds Cluster::path_latency(int a, int b) const {
  Seconds total(0);
  for (int l : route(a, b)) total += links[l].latency;
  return total;
}

BytesPerSecond Cluster::path_bandwidth(int a, int b) const {
  BytesPerSecond slowest(std::numeric_limits<double>::infinity());
  for (int l : route(a, b))
    if (links[l].bandwidth < slowest) slowest = links[l].bandwidth;
  return slowest;
}

}  // namespace hetplan::cluster

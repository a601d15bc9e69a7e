#include <cmath>

#include <gtest/gtest.h>

#include "cluster_text.h"
#include "hetplan/cluster/cluster_file.h"

namespace hetplan::cluster {
namespace {

using testing::parse;

// Two groups: rails (8 NICs for 8 GPUs) and a shared NIC (1 NIC for 4 GPUs).
std::string two_groups(const std::string& network) {
  return R"(version: 1
nodes:
  - {group: a, count: 2, device: A100-SXM4-80GB, devices_per_node: 8,
     intra_node: {bandwidth: 300GB/s, latency: 2us}, nic: {bandwidth: 200Gbps, count: 8, latency: 4us}}
  - {group: b, count: 2, device: V100-SXM2-16GB, devices_per_node: 4,
     intra_node: {bandwidth: 150GB/s, latency: 4us}, nic: {bandwidth: 100Gbps, count: 1, latency: 10us}}
network: )" + network + "\n";
}

TEST(Route, SameDeviceIsEmpty) {
  const Cluster c = parse(two_groups("{kind: switch}"));
  EXPECT_TRUE(c.route(3, 3).empty());
  EXPECT_DOUBLE_EQ(c.path_latency(3, 3).value, 0);
  EXPECT_TRUE(std::isinf(c.path_bandwidth(3, 3).value));
}

TEST(Route, SameNodeGoesThroughTheNodeSwitch) {
  const Cluster c = parse(two_groups("{kind: switch}"));
  const auto p = c.route(0, 5);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(c.links[p[0]].from, 0);
  EXPECT_EQ(c.vertices[c.links[p[0]].to].kind, VertexKind::node_switch);
  EXPECT_EQ(c.links[p[1]].to, 5);
  EXPECT_DOUBLE_EQ(c.path_bandwidth(0, 5).value, 300e9);
  EXPECT_DOUBLE_EQ(c.path_latency(0, 5).value, 2e-6);
  EXPECT_DOUBLE_EQ(c.path_bandwidth(16, 17).value, 150e9);
  EXPECT_DOUBLE_EQ(c.path_latency(16, 17).value, 4e-6);
}

TEST(Route, BetweenNodesEachGpuHasItsRail) {
  const Cluster c = parse(two_groups("{kind: switch}"));
  const auto p = c.route(0, 8);  // a/0/0 -> a/1/0
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(c.vertices[c.links[p[0]].to].kind, VertexKind::nic);
  EXPECT_EQ(c.vertices[c.links[p[1]].to].kind, VertexKind::network_switch);
  EXPECT_EQ(c.vertices[c.links[p[2]].to].kind, VertexKind::nic);
  EXPECT_DOUBLE_EQ(c.path_bandwidth(0, 8).value, 25e9);
  EXPECT_DOUBLE_EQ(c.path_latency(0, 8).value, 4e-6);
  // Two GPUs of a node leave through different NICs: their rails do not overlap.
  const auto q = c.route(1, 9);
  EXPECT_NE(p[1], q[1]);
  // Each direction is its own link.
  const auto back = c.route(8, 0);
  for (int l : back)
    for (int m : p) EXPECT_NE(l, m);
}

TEST(Route, SharedNicIsTheBottleneck) {
  const Cluster c = parse(two_groups("{kind: switch}"));
  // b/0/0 (16) and b/0/3 (19) share the node's one NIC.
  EXPECT_DOUBLE_EQ(c.path_bandwidth(16, 20).value, 12.5e9);
  EXPECT_EQ(c.route(16, 20)[1], c.route(19, 21)[1]);  // same NIC uplink
  // From an A100 rail to a V100 node: the V100 NIC limits; latency is the mean of the NICs'.
  EXPECT_DOUBLE_EQ(c.path_bandwidth(0, 16).value, 12.5e9);
  EXPECT_DOUBLE_EQ(c.path_latency(0, 16).value, 7e-6);
}

TEST(Route, MoreNicsThanGpusAggregate) {
  const Cluster c = parse(R"(version: 1
nodes:
  - {group: g, count: 2, device: H100, devices_per_node: 2,
     intra_node: {bandwidth: 450GB/s}, nic: {bandwidth: 400Gbps, count: 4}}
)");
  EXPECT_DOUBLE_EQ(c.path_bandwidth(0, 2).value, 100e9);  // two 50 GB/s NICs per GPU
}

TEST(Route, FatTreeOversubscriptionDividesTheNodeUplink) {
  const Cluster k2 = parse(two_groups("{kind: fat-tree, oversubscription: 2}"));
  EXPECT_EQ(k2.network, NetworkKind::fat_tree);
  EXPECT_EQ(k2.route(0, 8).size(), 6u);
  EXPECT_DOUBLE_EQ(k2.path_bandwidth(0, 8).value, 25e9);  // uplink 100 GB/s, rail 25 GB/s
  EXPECT_DOUBLE_EQ(k2.path_latency(0, 8).value, 4e-6);
  const Cluster k16 = parse(two_groups("{kind: fat-tree, oversubscription: 16}"));
  EXPECT_DOUBLE_EQ(k16.path_bandwidth(0, 8).value, 12.5e9);  // 200 GB/s / 16
  EXPECT_DOUBLE_EQ(k16.path_bandwidth(16, 20).value, 12.5e9 / 16);
  EXPECT_EQ(k16.route(0, 5).size(), 2u);  // inside a node the fabric is not involved
}

TEST(Route, PrecomputedRoutesAgreeWithTheSearch) {
  for (const char* net :
       {"{kind: switch}", "{kind: fat-tree, oversubscription: 3}",
        "{kind: leaf-spine, spines: 2, nodes_per_leaf: 1}",
        "{kind: leaf-spine, spines: 3, nodes_per_leaf: 3, oversubscription: 2}"}) {
    const Cluster c = parse(two_groups(net));
    for (int a = 0; a < c.num_devices(); ++a) {
      const auto all = c.routes_from(a);
      for (int b = 0; b < c.num_devices(); ++b) {
        EXPECT_EQ(c.route(a, b), route_by_search(c, a, b)) << net << " " << a << "->" << b;
        EXPECT_EQ(all[b], c.route(a, b));
        if (a != b) {
          EXPECT_EQ(c.equal_route(a, b, 0), c.route(a, b));
        }
      }
    }
  }
}

TEST(Route, SingleDeviceNodesHaveNoNodeSwitch) {
  const Cluster c = parse(R"(version: 1
nodes:
  - {group: w, count: 3, device: T4, devices_per_node: 1, intra_node: {bandwidth: 16GB/s},
     nic: {bandwidth: 10Gbps, latency: 30us}}
)");
  for (const Vertex& v : c.vertices) EXPECT_NE(v.kind, VertexKind::node_switch);
  EXPECT_DOUBLE_EQ(c.path_bandwidth(0, 2).value, 1.25e9);
  EXPECT_DOUBLE_EQ(c.path_latency(0, 2).value, 30e-6);
  EXPECT_EQ(c.route(0, 2), route_by_search(c, 0, 2));
}

}  // namespace
}  // namespace hetplan::cluster

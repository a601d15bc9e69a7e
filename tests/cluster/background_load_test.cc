// Background load (cross traffic): stored on the network links of the node-group form, and link by
// link in the explicit form.
#include <gtest/gtest.h>

#include "cluster_text.h"
#include "hetplan/cluster/cluster_file.h"

namespace hetplan::cluster {
namespace {

using testing::parse;

// Two nodes of four devices sharing one NIC each.
std::string two_nodes(const std::string& network) {
  return R"(version: 1
nodes:
  - {group: v, count: 2, device: V100-SXM2-32GB, devices_per_node: 4,
     intra_node: {bandwidth: 150GB/s}, nic: {bandwidth: 25Gbps}}
network: )" + network + "\n";
}

// The links inside a node (device <-> node switch) keep their bandwidth; the others are loaded.
void expect_network_links_loaded(const Cluster& c, double load, std::size_t network_links) {
  std::size_t loaded = 0;
  for (std::size_t l = 0; l < c.links.size(); ++l) {
    const Link& link = c.links[l];
    const bool inside = c.vertices[link.from].kind == VertexKind::node_switch ||
                        c.vertices[link.to].kind == VertexKind::node_switch;
    EXPECT_EQ(is_network_link(c, static_cast<int>(l)), !inside) << link.name;
    EXPECT_DOUBLE_EQ(link.background_load, inside ? 0 : load) << link.name;
    loaded += !inside;
  }
  EXPECT_EQ(loaded, network_links);
}

TEST(BackgroundLoad, DefaultsToZero) {
  const Cluster c = parse(two_nodes("{kind: switch}"));
  for (const Link& l : c.links) EXPECT_EQ(l.background_load, 0) << l.name;
}

TEST(BackgroundLoad, OnEveryNetworkLinkOfEachKind) {
  // Per node: 8 links to the node switch; 8 device <-> NIC and 2 NIC <-> network links.
  expect_network_links_loaded(parse(two_nodes("{background_load: 0.3}")), 0.3, 2 * 10);
  // Fat-tree: and 2 leaf <-> core links per node.
  expect_network_links_loaded(parse(two_nodes("{kind: fat-tree, background_load: 0.5}")), 0.5,
                              2 * 12);
  // Leaf-spine, one node per leaf and 3 spines: and 2 x 3 leaf <-> spine links per leaf.
  expect_network_links_loaded(
      parse(two_nodes("{kind: leaf-spine, spines: 3, nodes_per_leaf: 1, background_load: 0}")), 0,
      2 * 10 + 2 * 6);
  expect_network_links_loaded(
      parse(two_nodes("{kind: leaf-spine, spines: 3, nodes_per_leaf: 1, background_load: 0.95}")),
      0.95, 2 * 10 + 2 * 6);
}

TEST(BackgroundLoad, LeavesBandwidthsAndRoutesAsTheyAre) {
  const Cluster plain = parse(two_nodes("{kind: fat-tree}"));
  const Cluster loaded = parse(two_nodes("{kind: fat-tree, background_load: 0.3}"));
  ASSERT_EQ(plain.links.size(), loaded.links.size());
  for (std::size_t l = 0; l < plain.links.size(); ++l) {
    EXPECT_EQ(plain.links[l].bandwidth, loaded.links[l].bandwidth);
    EXPECT_EQ(plain.links[l].name, loaded.links[l].name);
  }
  EXPECT_EQ(plain.route(0, 5), loaded.route(0, 5));
  EXPECT_DOUBLE_EQ(loaded.path_bandwidth(0, 5).value, 3.125e9);  // the raw capacity
}

TEST(BackgroundLoad, ExplicitLinkByLink) {
  const Cluster c = parse(R"(version: 1
devices: [{name: g0, device: T4}, {name: g1, device: T4}]
switches: [{name: s0}]
links:
  - {from: g0, to: s0, bandwidth: 10Gbps, background_load: 0.25}
  - {from: s0, to: g1, bandwidth: 10Gbps, duplex: false, background_load: 0.5}
  - {from: g1, to: s0, bandwidth: 10Gbps, duplex: false}
  - {from: g0, to: g1, bandwidth: 1Gbps, background_load: 0.1}
)");
  ASSERT_EQ(c.links.size(), 6u);
  const std::vector<std::pair<std::string, double>> expected{{"g0->s0", 0.25}, {"s0->g0", 0.25},
                                                             {"s0->g1", 0.5},  {"g1->s0", 0},
                                                             {"g0->g1", 0.1},  {"g1->g0", 0.1}};
  for (std::size_t l = 0; l < c.links.size(); ++l) {
    EXPECT_EQ(c.links[l].name, expected[l].first);
    EXPECT_DOUBLE_EQ(c.links[l].background_load, expected[l].second) << c.links[l].name;
  }
  EXPECT_TRUE(is_network_link(c, 0));   // a network switch at one end
  EXPECT_FALSE(is_network_link(c, 4));  // device to device
}

}  // namespace
}  // namespace hetplan::cluster

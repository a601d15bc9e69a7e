// The leaf-spine network of the node-group form: leaves, spine links, and its equal routes (ECMP).
#include <set>

#include <gtest/gtest.h>

#include "cluster_text.h"
#include "hetplan/cluster/cluster_file.h"

namespace hetplan::cluster {
namespace {

using testing::parse;

// Five nodes of two devices: a/0, a/1, a/2 (2 x 100 Gb/s NICs, 25 GB/s per node) and b/0, b/1
// (one 50 Gb/s NIC, 6.25 GB/s). With two nodes per leaf: leaf0 = {a/0, a/1}, leaf1 = {a/2, b/0},
// leaf2 = {b/1}; devices 0-1 a/0, 2-3 a/1, 4-5 a/2, 6-7 b/0, 8-9 b/1.
std::string five_nodes(const std::string& network) {
  return R"(version: 1
nodes:
  - {group: a, count: 3, device: A100-SXM4-40GB, devices_per_node: 2,
     intra_node: {bandwidth: 300GB/s}, nic: {bandwidth: 100Gbps, count: 2, latency: 4us}}
  - {group: b, count: 2, device: V100-SXM2-32GB, devices_per_node: 2,
     intra_node: {bandwidth: 150GB/s}, nic: {bandwidth: 50Gbps, count: 1, latency: 10us}}
network: )" + network + "\n";
}

const char* kThreeSpines = "{kind: leaf-spine, spines: 3, nodes_per_leaf: 2, oversubscription: 2}";

TEST(LeafSpine, Structure) {
  const Cluster c = parse(five_nodes(kThreeSpines));
  EXPECT_EQ(c.network, NetworkKind::leaf_spine);
  EXPECT_STREQ(to_string(c.network), "leaf-spine");
  EXPECT_DOUBLE_EQ(c.oversubscription, 2);
  EXPECT_EQ(c.leaf_spine.spines, 3);
  EXPECT_EQ(c.leaf_spine.nodes_per_leaf, 2);
  EXPECT_EQ(c.leaf_spine.leaves(), 3);
  // 10 devices, 3 spines, 3 leaves, a node switch per node and 2 + 2 + 2 + 1 + 1 NIC ports.
  EXPECT_EQ(c.vertices.size(), 10u + 3 + 3 + 5 + 8);
  EXPECT_EQ(c.vertices[10].name, "spine0");
  EXPECT_EQ(c.vertices[13].name, "leaf0");
  // Per a-node 4 intra-node, 4 device <-> NIC, 4 NIC <-> leaf; per b-node 4, 4, 2; 3 x 3 x 2
  // leaf <-> spine links.
  EXPECT_EQ(c.links.size(), 3u * 12 + 2 * 10 + 18);
  // No core switch: the spines are the top of the network.
  for (const Vertex& v : c.vertices) EXPECT_NE(v.name, "network");
  const std::vector<int> leaf_of{0, 0, 0, 0, 1, 1, 1, 1, 2, 2};
  for (int d = 0; d < c.num_devices(); ++d) EXPECT_EQ(c.routes[d].leaf, leaf_of[d]) << d;
}

TEST(LeafSpine, UplinkBandwidthIsTheLeafNicTotalOverSpinesAndOversubscription) {
  const Cluster c = parse(five_nodes(kThreeSpines));
  const LeafSpine& ls = c.leaf_spine;
  // leaf0: 2 x 25 GB/s; leaf1: 25 + 6.25 GB/s; leaf2 (the last, one node): 6.25 GB/s; each over
  // 3 spines x oversubscription 2.
  const double expected[] = {50e9 / 6, 31.25e9 / 6, 6.25e9 / 6};
  for (int l = 0; l < 3; ++l) {
    for (int s = 0; s < 3; ++s) {
      const Link& up = c.links[ls.up[l * 3 + s]];
      const Link& down = c.links[ls.down[l * 3 + s]];
      EXPECT_EQ(up.name, "leaf" + std::to_string(l) + "->spine" + std::to_string(s));
      EXPECT_EQ(down.name, "spine" + std::to_string(s) + "->leaf" + std::to_string(l));
      EXPECT_DOUBLE_EQ(up.bandwidth.value, expected[l]);
      EXPECT_DOUBLE_EQ(down.bandwidth.value, expected[l]);
      EXPECT_DOUBLE_EQ(up.latency.value, 0);  // the NIC latency covers the whole network
    }
  }
  // a/0 -> a/2 crosses leaf0 -> spine -> leaf1, the narrowest link on its way.
  EXPECT_DOUBLE_EQ(c.path_bandwidth(0, 4).value, 31.25e9 / 6);
  // Latency: the mean of the two NICs', as with a single switch.
  EXPECT_DOUBLE_EQ(c.path_latency(0, 4).value, 4e-6);
  EXPECT_DOUBLE_EQ(c.path_latency(0, 8).value, 7e-6);
  // Oversubscription 1 (the default): the leaf's NIC total split over the spines.
  const Cluster k1 = parse(five_nodes("{kind: leaf-spine, spines: 2, nodes_per_leaf: 2}"));
  EXPECT_DOUBLE_EQ(k1.oversubscription, 1);
  EXPECT_DOUBLE_EQ(k1.links[k1.leaf_spine.up[0]].bandwidth.value, 25e9);
}

TEST(LeafSpine, RoutesInsideANodeALeafAndBetweenLeaves) {
  const Cluster c = parse(five_nodes(kThreeSpines));
  auto names = [&](const std::vector<int>& path) {
    std::vector<std::string> out;
    for (int l : path) out.push_back(c.links[l].name);
    return out;
  };
  EXPECT_EQ(names(c.route(0, 1)),
            (std::vector<std::string>{"a/0/0->a/0/switch", "a/0/switch->a/0/1"}));
  EXPECT_EQ(names(c.route(0, 2)), (std::vector<std::string>{"a/0/0->a/0/nic0", "a/0/nic0->leaf0",
                                                            "leaf0->a/1/nic0", "a/1/nic0->a/1/0"}));
  EXPECT_EQ(names(c.route(1, 6)),
            (std::vector<std::string>{"a/0/1->a/0/nic1", "a/0/nic1->leaf0", "leaf0->spine0",
                                      "spine0->leaf1", "leaf1->b/0/nic0", "b/0/nic0->b/0/0"}));
}

TEST(LeafSpine, EqualRoutesOnePerSpine) {
  const Cluster c = parse(five_nodes(kThreeSpines));
  EXPECT_TRUE(c.multipath());
  EXPECT_EQ(c.num_equal_routes(0, 0), 0);
  EXPECT_EQ(c.num_equal_routes(0, 1), 1);  // same node
  EXPECT_EQ(c.num_equal_routes(0, 3), 1);  // same leaf
  EXPECT_EQ(c.num_equal_routes(4, 7), 1);  // same leaf, nodes of two groups
  EXPECT_EQ(c.num_equal_routes(0, 4), 3);
  EXPECT_EQ(c.num_equal_routes(9, 2), 3);
  EXPECT_TRUE(c.equal_route(5, 5, 0).empty());
  EXPECT_EQ(c.equal_route(0, 3, 0), c.route(0, 3));

  std::set<int> spines_seen;
  for (int k = 0; k < 3; ++k) {
    const std::vector<int> p = c.equal_route(1, 8, k);
    ASSERT_EQ(p.size(), 6u);
    // Only the leaf -> spine -> leaf hop differs between the equal routes.
    EXPECT_EQ(c.links[p[2]].name, "leaf0->spine" + std::to_string(k));
    EXPECT_EQ(c.links[p[3]].name, "spine" + std::to_string(k) + "->leaf2");
    spines_seen.insert(c.links[p[2]].to);
    const std::vector<int> first = c.equal_route(1, 8, 0);
    for (int i : {0, 1, 4, 5}) EXPECT_EQ(p[i], first[i]);
  }
  EXPECT_EQ(spines_seen.size(), 3u);
}

TEST(LeafSpine, RouteIsSpineZeroAndAgreesWithTheSearch) {
  for (const char* net : {kThreeSpines, "{kind: leaf-spine, spines: 2, nodes_per_leaf: 1}",
                          "{kind: leaf-spine, spines: 1, nodes_per_leaf: 3}"}) {
    const Cluster c = parse(five_nodes(net));
    for (int a = 0; a < c.num_devices(); ++a) {
      const auto all = c.routes_from(a);
      for (int b = 0; b < c.num_devices(); ++b) {
        const auto r = c.route(a, b);
        EXPECT_EQ(r, route_by_search(c, a, b)) << net << " " << a << "->" << b;
        EXPECT_EQ(all[b], r);
        if (a == b) continue;
        EXPECT_EQ(c.equal_route(a, b, 0), r);
        // Every equal route has as many hops and the same latency as the route.
        for (int k = 1; k < c.num_equal_routes(a, b); ++k) {
          const auto p = c.equal_route(a, b, k);
          EXPECT_EQ(p.size(), r.size());
          EXPECT_NE(p, r);
          double latency = 0;
          for (int l : p) latency += c.links[l].latency.value;
          EXPECT_DOUBLE_EQ(latency, c.path_latency(a, b).value);
        }
      }
    }
  }
}

TEST(LeafSpine, MultipathNeedsTwoSpinesAndTwoLeaves) {
  EXPECT_TRUE(parse(five_nodes("{kind: leaf-spine, spines: 2, nodes_per_leaf: 4}")).multipath());
  const Cluster one_spine = parse(five_nodes("{kind: leaf-spine, spines: 1, nodes_per_leaf: 1}"));
  EXPECT_FALSE(one_spine.multipath());
  EXPECT_EQ(one_spine.num_equal_routes(0, 9), 1);
  // A leaf as large as the cluster: every node under one leaf, no route through a spine.
  const Cluster one_leaf = parse(five_nodes("{kind: leaf-spine, spines: 4, nodes_per_leaf: 99}"));
  EXPECT_FALSE(one_leaf.multipath());
  EXPECT_EQ(one_leaf.leaf_spine.leaves(), 1);
  EXPECT_EQ(one_leaf.leaf_spine.nodes_per_leaf, 5);  // capped at the node count
  EXPECT_EQ(one_leaf.num_equal_routes(0, 9), 1);
  EXPECT_EQ(one_leaf.route(0, 9).size(), 4u);
  // The other kinds have one route per pair.
  for (const char* net : {"{kind: switch}", "{kind: fat-tree, oversubscription: 2}"}) {
    const Cluster c = parse(five_nodes(net));
    EXPECT_FALSE(c.multipath()) << net;
    EXPECT_EQ(c.leaf_spine, LeafSpine{});
    for (int a = 0; a < c.num_devices(); ++a)
      for (int b = 0; b < c.num_devices(); ++b) {
        EXPECT_EQ(c.num_equal_routes(a, b), a == b ? 0 : 1);
        EXPECT_EQ(c.equal_route(a, b, 0), c.route(a, b));
      }
  }
}

TEST(LeafSpine, ExplicitFormHasOneRoutePerPair) {
  // Two equal paths g0 -> s0 -> g1 and g0 -> s1 -> g1: not enumerated in the explicit form.
  const Cluster c = parse(R"(version: 1
devices: [{name: g0, device: T4}, {name: g1, device: T4}]
switches: [{name: s0}, {name: s1}]
links:
  - {from: g0, to: s0, bandwidth: 10Gbps}
  - {from: g0, to: s1, bandwidth: 10Gbps}
  - {from: s0, to: g1, bandwidth: 10Gbps}
  - {from: s1, to: g1, bandwidth: 10Gbps}
)");
  EXPECT_FALSE(c.multipath());
  EXPECT_EQ(c.num_equal_routes(0, 1), 1);
  EXPECT_EQ(c.equal_route(0, 1, 0), c.route(0, 1));
}

}  // namespace
}  // namespace hetplan::cluster

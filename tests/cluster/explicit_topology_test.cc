#include <gtest/gtest.h>

#include "hetplan/cluster/cluster_file.h"

namespace hetplan::cluster {
namespace {

TEST(ExplicitTopology, ParsesAndRoutes) {
  auto r = read_cluster_file(std::string(HETPLAN_SOURCE_DIR) + "/data/clusters/explicit-irregular.yaml");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const Cluster& c = *r;
  EXPECT_EQ(c.network, NetworkKind::explicit_links);
  EXPECT_TRUE(c.groups.empty());
  ASSERT_EQ(c.num_devices(), 4);
  EXPECT_EQ(c.devices[2].name, "g2");
  // Nodes: m0 (g0, g1), m1 (g2), g3 alone.
  ASSERT_EQ(c.nodes.size(), 3u);
  EXPECT_EQ(c.nodes[0].devices, (std::vector<int>{0, 1}));
  EXPECT_EQ(c.devices[1].local_rank, 1);
  EXPECT_EQ(c.nodes[2].group, "g3");
  EXPECT_TRUE(c.same_node(0, 1));
  EXPECT_EQ(c.type_of(3).name, "Workstation-GPU");
  EXPECT_EQ(c.links.size(), 10u);  // five duplex links

  // g0 -> g1: the direct NVLink, one hop.
  ASSERT_EQ(c.route(0, 1).size(), 1u);
  EXPECT_DOUBLE_EQ(c.path_bandwidth(0, 1).value, 150e9);
  EXPECT_DOUBLE_EQ(c.path_latency(0, 1).value, 2e-6);
  // g0 -> g2 through the switch: 25 Gb/s then 10 Gb/s.
  const auto p = c.route(0, 2);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(c.links[p[0]].name, "g0->tor");
  EXPECT_EQ(c.links[p[1]].name, "tor->g2");
  EXPECT_DOUBLE_EQ(c.path_bandwidth(0, 2).value, 1.25e9);
  EXPECT_DOUBLE_EQ(c.path_latency(0, 2).value, 30e-6);
  const auto all = c.routes_from(2);
  for (int b = 0; b < 4; ++b) EXPECT_EQ(all[b], c.route(2, b));
}

TEST(ExplicitTopology, SimplexLinksAndFewestHops) {
  auto r = parse_cluster_yaml(R"(version: 1
devices: [{name: a, device: T4}, {name: b, device: T4}, {name: c, device: T4}]
switches: [{name: s, kind: node}]
links:
  - {from: a, to: b, bandwidth: 1GB/s, duplex: false}
  - {from: b, to: c, bandwidth: 1GB/s, duplex: false}
  - {from: c, to: a, bandwidth: 1GB/s, duplex: false}
  - {from: a, to: s, bandwidth: 5GB/s}
  - {from: s, to: c, bandwidth: 5GB/s, duplex: false}
)",
                              "ring.yaml");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->route(0, 1).size(), 1u);
  EXPECT_EQ(r->route(1, 0).size(), 2u);  // b -> c -> a
  // a -> c: a->b->c and a->s->c both take two hops; the lower link ids win (a->b first).
  const auto p = r->route(0, 2);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(r->links[p[0]].name, "a->b");
  EXPECT_DOUBLE_EQ(r->path_latency(0, 1).value, 1e-6);  // default latency
}

}  // namespace
}  // namespace hetplan::cluster

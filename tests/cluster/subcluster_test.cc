// A cluster without some devices (elastic replanning): the same fabric, the same routes between
// the devices left, device lists by id or name.
#include "hetplan/cluster/subcluster.h"

#include <gtest/gtest.h>

#include "cluster_text.h"
#include "hetplan/cluster/cluster_file.h"

namespace hetplan::cluster {
namespace {

using testing::parse;

// The names of the links a route crosses.
std::vector<std::string> link_names(const Cluster& c, const std::vector<int>& route) {
  std::vector<std::string> out;
  for (int l : route) out.push_back(c.links[l].name);
  return out;
}

// Every pair of the devices left takes the route (and every equal route) it took in the whole
// cluster, link by link, at the same bandwidths.
void expect_same_routes(const Cluster& whole, const Subcluster& sub) {
  const Cluster& s = sub.cluster;
  for (int a = 0; a < s.num_devices(); ++a)
    for (int b = 0; b < s.num_devices(); ++b) {
      const int oa = sub.original[a], ob = sub.original[b];
      ASSERT_EQ(s.num_equal_routes(a, b), whole.num_equal_routes(oa, ob)) << a << " " << b;
      for (int k = 0; k < s.num_equal_routes(a, b); ++k)
        EXPECT_EQ(link_names(s, s.equal_route(a, b, k)),
                  link_names(whole, whole.equal_route(oa, ob, k)));
      EXPECT_EQ(s.path_bandwidth(a, b).value, whole.path_bandwidth(oa, ob).value);
      EXPECT_EQ(s.path_latency(a, b).value, whole.path_latency(oa, ob).value);
    }
}

TEST(Subcluster, KeepsTheFabricAndTheRoutesOfTheDevicesLeft) {
  auto whole = load_cluster("hap-mixed");
  ASSERT_TRUE(whole) << whole.error().message;
  // Device 3 of the first V100 node, and the whole last P100 node (devices 24-31).
  std::vector<int> removed{3};
  for (int d = 24; d < 32; ++d) removed.push_back(d);
  auto sub = without_devices(*whole, removed);
  ASSERT_TRUE(sub) << sub.error().message;
  const Cluster& s = sub->cluster;
  EXPECT_EQ(s.num_devices(), 23);
  ASSERT_EQ(sub->original.size(), 23u);
  EXPECT_EQ(sub->original[2], 2);
  EXPECT_EQ(sub->original[3], 4);
  // The devices left out are exactly the ones removed, ascending.
  EXPECT_EQ(other_devices(*whole, sub->original), removed);
  EXPECT_EQ(other_devices(*whole, {}).size(), 32u);
  EXPECT_EQ(sub->original[22], 23);
  EXPECT_EQ(s.devices[3].name, "v100/0/4");
  EXPECT_EQ(s.devices[3].local_rank, 3);
  ASSERT_EQ(s.nodes.size(), 3u);  // the emptied node goes
  EXPECT_EQ(s.nodes[0].devices.size(), 7u);
  ASSERT_EQ(s.groups.size(), 2u);
  EXPECT_EQ(s.groups[1].count, 1);  // one P100 node of two left
  EXPECT_EQ(s.name, whole->name);
  expect_same_routes(*whole, *sub);
}

TEST(Subcluster, LeafSpineKeepsItsEqualRoutes) {
  auto whole = load_cluster("leaf-spine-mixed");
  ASSERT_TRUE(whole) << whole.error().message;
  auto sub = without_devices(*whole, {0, 9, 31});
  ASSERT_TRUE(sub) << sub.error().message;
  EXPECT_TRUE(sub->cluster.multipath());
  expect_same_routes(*whole, *sub);
}

TEST(Subcluster, ExplicitForm) {
  const Cluster whole = parse(R"(version: 1
devices:
  - {name: g0, device: V100-SXM2-16GB, node: m0}
  - {name: g1, device: V100-SXM2-16GB, node: m0}
  - {name: g2, device: GTX-1080Ti, node: m1}
switches: [{name: s0}]
links:
  - {from: g0, to: s0, bandwidth: 10Gbps}
  - {from: g1, to: s0, bandwidth: 10Gbps}
  - {from: g2, to: s0, bandwidth: 5Gbps}
)");
  auto sub = without_devices(whole, {2});
  ASSERT_TRUE(sub) << sub.error().message;
  EXPECT_EQ(sub->cluster.num_devices(), 2);
  EXPECT_EQ(sub->cluster.device_types.size(), 1u);  // the 1080 Ti's type is no longer in use
  EXPECT_EQ(sub->cluster.links.size(), 4u);         // two duplex links left
  expect_same_routes(whole, *sub);
}

TEST(Subcluster, Errors) {
  auto whole = load_cluster("cpu:2");
  ASSERT_TRUE(whole);
  EXPECT_FALSE(without_devices(*whole, {0, 1}));
  EXPECT_FALSE(without_devices(*whole, {2}));
  auto both = without_devices(*whole, {1, 1});
  ASSERT_TRUE(both);
  EXPECT_EQ(both->cluster.num_devices(), 1);
}

TEST(Subcluster, DeviceListsByIdOrName) {
  auto whole = load_cluster("hap-mixed");
  ASSERT_TRUE(whole);
  auto ids = parse_device_list(*whole, "3,p100/1/7", "--remove");
  ASSERT_TRUE(ids) << ids.error().message;
  EXPECT_EQ(*ids, (std::vector<int>{3, 31}));
  for (const char* bad : {"", "3,", "32", "x", "-1", "v100/9/0"}) {
    auto r = parse_device_list(*whole, bad, "--remove");
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().message.rfind("--remove: ", 0), 0u) << r.error().message;
  }
}

}  // namespace
}  // namespace hetplan::cluster

#include <gtest/gtest.h>

#include "hetplan/cluster/cluster_file.h"

namespace hetplan::cluster {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(Summary, NodeGroups) {
  auto r = load_cluster("a100-v100");
  ASSERT_TRUE(r.ok());
  const std::string s = summarize(*r);
  EXPECT_TRUE(contains(s, "cluster a100-v100: 32 devices in 4 nodes, network: switch")) << s;
  EXPECT_TRUE(contains(s, "a100: 2 nodes x 8 A100-SXM4-40GB; intra-node 300 GB/s")) << s;
  EXPECT_TRUE(contains(s, "total peak 16-bit: 7.0 PFLOP/s")) << s;  // 16*312 + 16*125 TFLOP/s
  EXPECT_TRUE(contains(s, "16 x A100-SXM4-40GB (Ampere): 40 GB memory, 312.0 TFLOP/s bf16,")) << s;
  // Volta's tensor cores compute fp16, not bf16.
  EXPECT_TRUE(
      contains(s, "16 x V100-SXM2-32GB (Volta): 32 GB memory, 125.0 TFLOP/s fp16 (no bf16),"))
      << s;
  EXPECT_TRUE(contains(s, "total memory: 1.15 TB")) << s;  // 16 * 40 GB + 16 * 32 GB
}

TEST(Summary, FatTreeAndExplicit) {
  auto big = load_cluster("mixed-512");
  ASSERT_TRUE(big.ok());
  const std::string b = summarize(*big);
  EXPECT_TRUE(contains(b, "network: fat-tree (oversubscription 2)")) << b;
  EXPECT_TRUE(contains(b, "fat-tree uplink 100 GB/s")) << b;
  auto ex = read_cluster_file(std::string(HETPLAN_SOURCE_DIR) + "/data/clusters/explicit-irregular.yaml");
  ASSERT_TRUE(ex.ok());
  const std::string s = summarize(*ex);
  EXPECT_TRUE(contains(s, "explicit topology: 1 switches, 10 directed links, 1.25 GB/s to 150 GB/s per link")) << s;
}

TEST(Summary, LeafSpineAndBackgroundLoad) {
  auto r = load_cluster("leaf-spine-mixed");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const std::string s = summarize(*r);
  EXPECT_TRUE(contains(s,
                       "cluster leaf-spine-mixed: 32 devices in 8 nodes, network: leaf-spine "
                       "(oversubscription 2)\n"))
      << s;
  // Two 25 Gb/s NICs per leaf over two spines at 2:1: 1.5625 GB/s per leaf -> spine link.
  EXPECT_TRUE(contains(s,
                       "\nleaf-spine: 4 leaves of up to 2 nodes, 2 spines; each leaf <-> spine "
                       "link 1.56 GB/s\n"))
      << s;
  // Per node 8 links inside (to the NVSwitch) and 10 through the NIC; 16 leaf <-> spine links.
  EXPECT_TRUE(contains(s, "\nbackground load (cross traffic): 0.3 on 96 of 160 directed links\n"))
      << s;
  // Leaves of unlike NICs have unlike uplinks.
  auto mixed = parse_cluster_yaml(R"(version: 1
nodes:
  - {group: a, count: 1, device: T4, devices_per_node: 1, intra_node: {bandwidth: 16GB/s},
     nic: {bandwidth: 100Gbps}}
  - {group: b, count: 1, device: T4, devices_per_node: 1, intra_node: {bandwidth: 16GB/s},
     nic: {bandwidth: 10Gbps}}
network: {kind: leaf-spine, spines: 1, nodes_per_leaf: 1}
)",
                                  "m.yaml");
  ASSERT_TRUE(mixed.ok()) << mixed.error().message;
  const std::string m = summarize(*mixed);
  EXPECT_TRUE(contains(m,
                       "leaf-spine: 2 leaves of up to 1 node, 1 spine; each leaf <-> spine link "
                       "1.25 GB/s to 12.5 GB/s\n"))
      << m;
  EXPECT_FALSE(contains(m, "background load")) << m;
}

TEST(Summary, ExplicitBackgroundLoads) {
  auto r = parse_cluster_yaml(R"(version: 1
devices: [{name: g0, device: T4}, {name: g1, device: T4}]
switches: [{name: s0}]
links:
  - {from: g0, to: s0, bandwidth: 10Gbps, background_load: 0.25}
  - {from: g1, to: s0, bandwidth: 10Gbps, background_load: 0.5, duplex: false}
  - {from: s0, to: g1, bandwidth: 10Gbps}
)",
                              "e.yaml");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const std::string s = summarize(*r);
  EXPECT_TRUE(
      contains(s, "background load (cross traffic): 0.25 to 0.5 on 3 of 5 directed links\n"))
      << s;
}

}  // namespace
}  // namespace hetplan::cluster

#include <gtest/gtest.h>

#include "hetplan/cluster/cluster_file.h"

namespace hetplan::cluster {
namespace {

const char* kIssueExample = R"(version: 1
nodes:
  - group: a100            # name of a group of identical nodes
    count: 4
    device: A100-SXM4-80GB # catalog name, or one defined under device_types
    devices_per_node: 8
    intra_node: {bandwidth: 300GB/s, latency: 2us}    # per device, per direction
    nic: {bandwidth: 200Gbps, count: 8, latency: 5us} # per node
  - group: v100
    count: 2
    device: V100-SXM2-32GB
    devices_per_node: 4
    intra_node: {bandwidth: 16GB/s}
    nic: {bandwidth: 25Gbps, count: 1}
network: {kind: switch}    # or {kind: fat-tree, oversubscription: 2}
device_types: []           # optional custom devices, same fields as the catalog
)";

TEST(ClusterYaml, ParsesTheIssueExample) {
  auto r = parse_cluster_yaml(kIssueExample, "c.yaml");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const Cluster& c = *r;
  EXPECT_EQ(c.name, "c");
  EXPECT_EQ(c.num_devices(), 40);
  ASSERT_EQ(c.nodes.size(), 6u);
  ASSERT_EQ(c.device_types.size(), 2u);
  EXPECT_EQ(c.device_types[0].name, "A100-SXM4-80GB");
  EXPECT_EQ(c.device_types[1].name, "V100-SXM2-32GB");
  EXPECT_EQ(c.network, NetworkKind::single_switch);

  // Device order: group, node, local rank; names group/node/rank; vertex i == device i.
  EXPECT_EQ(c.devices[11].name, "a100/1/3");
  EXPECT_EQ(c.devices[11].node, 1);
  EXPECT_EQ(c.devices[11].local_rank, 3);
  EXPECT_EQ(c.devices[32].name, "v100/0/0");
  EXPECT_EQ(c.type_of(32).name, "V100-SXM2-32GB");
  EXPECT_EQ(c.nodes[4].group, "v100");
  EXPECT_EQ(c.nodes[4].devices, (std::vector<int>{32, 33, 34, 35}));
  for (int d = 0; d < c.num_devices(); ++d) EXPECT_EQ(c.vertices[d].name, c.devices[d].name);

  ASSERT_EQ(c.groups.size(), 2u);
  EXPECT_DOUBLE_EQ(c.groups[0].nic_bandwidth.value, 25e9);  // 200 Gb/s
  EXPECT_DOUBLE_EQ(c.groups[0].intra_bandwidth.value, 300e9);
  EXPECT_DOUBLE_EQ(c.groups[1].nic_bandwidth.value, 3.125e9);  // 25 Gb/s
  EXPECT_EQ(c.groups[1].nic_count, 1);
  EXPECT_DOUBLE_EQ(c.groups[1].intra_latency.value, 2e-6);  // default
  EXPECT_DOUBLE_EQ(c.groups[1].nic_latency.value, 5e-6);    // default

  // Links: per device, per direction.
  const auto path = c.route(0, 1);
  ASSERT_EQ(path.size(), 2u);
  EXPECT_DOUBLE_EQ(c.links[path[0]].bandwidth.value, 300e9);
  EXPECT_EQ(c.links[path[0]].name, "a100/0/0->a100/0/switch");
  const auto inter = c.route(0, 8);
  ASSERT_EQ(inter.size(), 4u);
  for (int l : inter) EXPECT_DOUBLE_EQ(c.links[l].bandwidth.value, 25e9);
}

TEST(ClusterYaml, CustomDeviceTypesAndCpuShare) {
  auto r = parse_cluster_yaml(R"(version: 1
name: lab
device_types:
  - {name: MyGPU, peak_fp16: 100TFLOPS, peak_fp32: 20TFLOPS, memory: 24GiB, memory_bandwidth: 900GB/s}
nodes:
  - {group: w, count: 2, device: mygpu, devices_per_node: 1, cpu_share: 0.5,
     intra_node: {bandwidth: 16GB/s}, nic: {bandwidth: 10Gbps}}
)",
                              "lab.yaml");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->name, "lab");
  ASSERT_EQ(r->device_types.size(), 1u);
  EXPECT_EQ(r->device_types[0].name, "MyGPU");
  EXPECT_DOUBLE_EQ(r->device_types[0].memory.value, 24.0 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(r->device_types[0].peak_fp16.value, 100e12);
  EXPECT_DOUBLE_EQ(r->nodes[1].cpu_share, 0.5);
  EXPECT_DOUBLE_EQ(r->path_bandwidth(0, 1).value, 1.25e9);
}

TEST(ClusterYaml, CustomTypeOverridesCatalogFigures) {
  auto r = parse_cluster_yaml(R"(version: 1
device_types:
  - {name: T4, peak_fp16: 50TFLOPS, peak_fp32: 8TFLOPS, memory: 15GB, memory_bandwidth: 300GB/s}
nodes:
  - {count: 1, device: T4, devices_per_node: 2, intra_node: {bandwidth: 16GB/s}, nic: {bandwidth: 10Gbps}}
)",
                              "t4.yaml");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_DOUBLE_EQ(r->device_types[0].peak_fp16.value, 50e12);
  EXPECT_EQ(r->groups[0].name, "t4");  // default group name: the device type, lower case
}

TEST(ClusterYaml, ReadsAFile) {
  auto r = read_cluster_file(std::string(HETPLAN_SOURCE_DIR) + "/data/clusters/example.yaml");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->num_devices(), 40);
  EXPECT_EQ(r->name, "example");
}

}  // namespace
}  // namespace hetplan::cluster

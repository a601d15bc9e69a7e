// Every malformed cluster file gives one message naming the file, the field and what was expected.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "hetplan/cluster/cluster_file.h"

namespace hetplan::cluster {
namespace {

std::string error_of(const std::string& yaml) {
  auto r = parse_cluster_yaml(yaml, "c.yaml");
  return r.ok() ? std::string("(parsed)") : r.error().message;
}

// One node group whose fields can be replaced.
std::string group(const std::string& device = "A100-SXM4-80GB",
                  const std::string& nic = "{bandwidth: 200Gbps, count: 8}",
                  const std::string& extra = "") {
  return "version: 1\nnodes:\n  - {group: a, count: 2, device: " + device +
         ", devices_per_node: 8, intra_node: {bandwidth: 300GB/s}, nic: " + nic + extra + "}\n";
}

TEST(ClusterErrors, UnknownDevice) {
  EXPECT_EQ(
      error_of(group() + "  - {group: b, count: 1, device: V200, devices_per_node: 4, intra_node: "
                         "{bandwidth: 16GB/s}, nic: {bandwidth: 25Gbps}}\n"),
      "c.yaml: nodes[1].device: unknown device type 'V200' (expected a catalog name such as "
      "V100-SXM2-32GB, or one under device_types)");
}

TEST(ClusterErrors, NegativeOrZeroBandwidth) {
  EXPECT_EQ(
      error_of(group("A100", "{bandwidth: -200Gbps}")),
      "c.yaml: nodes[0].nic.bandwidth: expected a positive bandwidth such as 200Gbps or 300GB/s, "
      "got '-200Gbps'");
  EXPECT_EQ(
      error_of(group("A100", "{bandwidth: 0Gbps}")),
      "c.yaml: nodes[0].nic.bandwidth: expected a positive bandwidth such as 200Gbps or 300GB/s, "
      "got '0Gbps'");
  EXPECT_EQ(
      error_of(group("A100", "{bandwidth: 200}")),  // no unit
      "c.yaml: nodes[0].nic.bandwidth: expected a positive bandwidth such as 200Gbps or 300GB/s, "
      "got '200'");
}

TEST(ClusterErrors, MissingBandwidth) {
  EXPECT_EQ(
      error_of(group("A100", "{count: 8}")),
      "c.yaml: nodes[0].nic.bandwidth: missing (expected a positive bandwidth such as 200Gbps or "
      "300GB/s)");
  EXPECT_EQ(
      error_of("version: 1\nnodes:\n  - {group: a, count: 1, device: T4, devices_per_node: 1, "
               "nic: {bandwidth: 1Gbps}}\n"),
      "c.yaml: nodes[0].intra_node: missing (expected {bandwidth: ..., latency: ...}, e.g. "
      "{bandwidth: 300GB/s})");
}

TEST(ClusterErrors, Version) {
  EXPECT_EQ(error_of("nodes: []\n"), "c.yaml: version: missing (expected version: 1)");
  EXPECT_EQ(error_of("version: 2\nnodes: []\n"),
            "c.yaml: version: unsupported version '2' (expected 1)");
}

TEST(ClusterErrors, BadYamlGivesTheLine) {
  EXPECT_EQ(error_of("version: 1\nnodes:\n  - {group: a, count: 2\n"),
            "c.yaml: line 4, column 1: invalid YAML: end of map flow not found");
  EXPECT_EQ(error_of("version: 1\n  nodes: [\n"),
            "c.yaml: line 2, column 8: invalid YAML: illegal map value");
  EXPECT_EQ(error_of(""),
            "c.yaml: document: expected a mapping with 'version: 1' and 'nodes' (or 'devices')");
  EXPECT_EQ(error_of("- 1\n- 2\n"),
            "c.yaml: document: expected a mapping with 'version: 1' and 'nodes' (or 'devices')");
}

TEST(ClusterErrors, UnknownKeys) {
  EXPECT_EQ(
      error_of(group("A100", "{bandwidth: 200Gbps}", ", devics: 3")),
      "c.yaml: nodes[0]: unknown key 'devics' (did you mean 'device'?) (allowed: group, count, "
      "device, devices_per_node, "
      "intra_node, nic, cpu_share)");
  EXPECT_EQ(error_of("version: 1\nnode: []\n"),
            "c.yaml: document: unknown key 'node' (did you mean 'nodes'?) (allowed: version, name, "
            "nodes, network, device_types, prices, devices, switches, links)");
  EXPECT_EQ(error_of(group("A100", "{bandwidth: 200Gbps, speed: 3}")),
            "c.yaml: nodes[0].nic: unknown key 'speed' (allowed: bandwidth, count, latency)");
}

TEST(ClusterErrors, Counts) {
  EXPECT_EQ(
      error_of("version: 1\nnodes:\n  - {count: 0, device: T4, devices_per_node: 1, intra_node: "
               "{bandwidth: 1GB/s}, nic: {bandwidth: 1Gbps}}\n"),
      "c.yaml: nodes[0].count: expected a positive integer, got '0'");
  EXPECT_EQ(
      error_of("version: 1\nnodes:\n  - {count: 2.5, device: T4, devices_per_node: 1, intra_node: "
               "{bandwidth: 1GB/s}, nic: {bandwidth: 1Gbps}}\n"),
      "c.yaml: nodes[0].count: expected a positive integer, got '2.5'");
  EXPECT_EQ(error_of("version: 1\nnodes:\n  - {count: 10000, device: T4, devices_per_node: 8, "
                     "intra_node: {bandwidth: 1GB/s}, nic: {bandwidth: 1Gbps}}\n"),
            "c.yaml: nodes[0]: expected at most 65536 devices in a cluster");
  EXPECT_EQ(error_of("version: 1\nnodes: []\n"), "c.yaml: nodes: expected at least one node group");
}

TEST(ClusterErrors, OtherFields) {
  EXPECT_EQ(error_of(group("A100", "{bandwidth: 200Gbps}", ", cpu_share: 1.5")),
            "c.yaml: nodes[0].cpu_share: expected a number in (0, 1]");
  EXPECT_EQ(error_of(group() + "network: {kind: torus}\n"),
            "c.yaml: network.kind: unknown kind 'torus' (expected switch, fat-tree or leaf-spine)");
  EXPECT_EQ(error_of(group() + "network: {kind: fat-tree, oversubscription: 0.5}\n"),
            "c.yaml: network.oversubscription: expected a number >= 1 (1: non-blocking)");
  EXPECT_EQ(
      error_of(group("A100", "{bandwidth: 200Gbps, latency: fast}")),
      "c.yaml: nodes[0].nic.latency: expected a non-negative duration such as 5us, got 'fast'");
  EXPECT_EQ(
      error_of(group() + "  - {group: a, count: 1, device: T4, devices_per_node: 1, intra_node: "
                         "{bandwidth: 1GB/s}, nic: {bandwidth: 1Gbps}}\n"),
      "c.yaml: nodes[1].group: duplicate group name 'a' (expected unique names)");
  EXPECT_EQ(error_of(group() + "device_types:\n  - {name: X, peak_fp32: 0TFLOPS, memory: 1GB, "
                               "memory_bandwidth: 1GB/s}\n"),
            "c.yaml: device_types[0].peak_fp32: expected a positive rate such as 19.5TFLOPS, got "
            "'0TFLOPS'");
  EXPECT_EQ(error_of(group() + "devices: [{name: g0, device: T4}]\n"),
            "c.yaml: document: expected either 'nodes' (node groups) or 'devices' (explicit form), "
            "not both");
  EXPECT_EQ(error_of("version: 1\n"),
            "c.yaml: nodes: missing (expected a list of node groups, or 'devices' for the explicit "
            "form)");
}

TEST(ClusterErrors, LeafSpine) {
  EXPECT_EQ(error_of(group() + "network: {kind: leaf-spine, nodes_per_leaf: 2}\n"),
            "c.yaml: network.spines: missing (expected a positive integer)");
  EXPECT_EQ(error_of(group() + "network: {kind: leaf-spine, spines: 2}\n"),
            "c.yaml: network.nodes_per_leaf: missing (expected a positive integer)");
  EXPECT_EQ(error_of(group() + "network: {kind: leaf-spine, spines: 0, nodes_per_leaf: 2}\n"),
            "c.yaml: network.spines: expected a positive integer, got '0'");
  EXPECT_EQ(error_of(group() + "network: {kind: leaf-spine, spines: 65, nodes_per_leaf: 2}\n"),
            "c.yaml: network.spines: expected at most 64 spines");
  EXPECT_EQ(error_of(group() + "network: {kind: leaf-spine, spines: 2, nodes_per_leaf: 1.5}\n"),
            "c.yaml: network.nodes_per_leaf: expected a positive integer, got '1.5'");
  EXPECT_EQ(error_of(group() + "network: {kind: leaf-spine, spines: 2, nodes_per_leaf: 1, "
                               "oversubscription: 0.5}\n"),
            "c.yaml: network.oversubscription: expected a number >= 1 (1: non-blocking)");
  // The keys of one kind are refused with another.
  EXPECT_EQ(error_of(group() + "network: {kind: switch, spines: 2}\n"),
            "c.yaml: network.spines: only allowed with kind: leaf-spine");
  EXPECT_EQ(error_of(group() + "network: {kind: fat-tree, nodes_per_leaf: 2}\n"),
            "c.yaml: network.nodes_per_leaf: only allowed with kind: leaf-spine");
  EXPECT_EQ(error_of(group() + "network: {oversubscription: 2}\n"),
            "c.yaml: network.oversubscription: only allowed with kind: fat-tree or leaf-spine");
  EXPECT_EQ(error_of(group() + "network: {kind: leaf-spine, spine: 2, nodes_per_leaf: 1}\n"),
            "c.yaml: network: unknown key 'spine' (did you mean 'spines'?) (allowed: kind, "
            "oversubscription, spines, nodes_per_leaf, background_load)");
  // 8192 one-device nodes one per leaf under 64 spines: 524288 leaf -> spine links.
  EXPECT_EQ(error_of("version: 1\nnodes:\n  - {count: 8192, device: T4, devices_per_node: 1, "
                     "intra_node: {bandwidth: 1GB/s}, nic: {bandwidth: 1Gbps}}\n"
                     "network: {kind: leaf-spine, spines: 64, nodes_per_leaf: 1}\n"),
            "c.yaml: network: expected at most 262144 leaf-spine links each way, got 8192 leaves x "
            "64 spines");
}

const char* kExplicitHead =
    "version: 1\ndevices: [{name: g0, device: T4, node: m0}, {name: g1, device: T4}]\n"
    "switches: [{name: s0}]\n";

TEST(ClusterErrors, ExplicitForm) {
  EXPECT_EQ(error_of(std::string(kExplicitHead) + "links: [{from: g0, to: s0, bandwidth: 10Gbps}, "
                                                  "{from: g1, to: s9, bandwidth: 10Gbps}]\n"),
            "c.yaml: links[1].to: unknown endpoint 's9' (expected the name of a device or switch)");
  EXPECT_EQ(
      error_of(std::string(kExplicitHead) + "links: [{from: g0, to: s0, bandwidth: 10Gbps}]\n"),
      "c.yaml: links: device 'g0' cannot reach device 'g1' (expected a path between every pair of "
      "devices)");
  EXPECT_EQ(
      error_of(std::string(kExplicitHead) +
               "links: [{from: g0, to: g1, bandwidth: 10Gbps, duplex: false}]\n"),
      "c.yaml: links: device 'g1' cannot reach device 'g0' (expected a path between every pair of "
      "devices)");
  EXPECT_EQ(
      error_of(
          "version: 1\ndevices: [{name: g0, device: T4}, {name: g0, device: T4}]\nlinks: []\n"),
      "c.yaml: devices[1].name: duplicate name 'g0' (expected unique names)");
  EXPECT_EQ(error_of("version: 1\ndevices: [{name: g0, device: T4}]\nswitches: [{name: g0}]\n"),
            "c.yaml: switches[0].name: duplicate name 'g0' (expected unique names)");
  EXPECT_EQ(
      error_of(std::string(kExplicitHead) + "links: [{from: g0, to: g0, bandwidth: 10Gbps}]\n"),
      "c.yaml: links[0]: a link from 'g0' to itself (expected two different endpoints)");
  EXPECT_EQ(error_of(std::string(kExplicitHead) + "links: [{from: g0, to: g1}]\n"),
            "c.yaml: links[0].bandwidth: missing (expected a positive bandwidth such as 200Gbps or "
            "300GB/s)");
  EXPECT_EQ(error_of(std::string(kExplicitHead)),
            "c.yaml: links: missing (expected a list of links such as {from: g0, to: s0, "
            "bandwidth: 10Gbps})");
  EXPECT_EQ(error_of("version: 1\ndevices: [{name: g0, device: T4}]\n"),
            "(parsed)");  // one device needs no links
}

TEST(ClusterErrors, BackgroundLoad) {
  const std::string range =
      "expected a number in [0, 0.95] (the fraction of the bandwidth that cross traffic takes)";
  EXPECT_EQ(error_of(group() + "network: {background_load: 0.96}\n"),
            "c.yaml: network.background_load: " + range);
  EXPECT_EQ(error_of(group() + "network: {kind: fat-tree, background_load: -0.1}\n"),
            "c.yaml: network.background_load: " + range);
  EXPECT_EQ(error_of(group() + "network: {kind: switch, background_load: 30%}\n"),
            "c.yaml: network.background_load: expected a number, got '30%'");
  EXPECT_EQ(error_of(group() + "network: {kind: switch, background_load: 0.95}\n"), "(parsed)");
  EXPECT_EQ(error_of(std::string(kExplicitHead) +
                     "links: [{from: g0, to: s0, bandwidth: 10Gbps, background_load: 0.2}, "
                     "{from: g1, to: s0, bandwidth: 10Gbps, background_load: 1}]\n"),
            "c.yaml: links[1].background_load: " + range);
  EXPECT_EQ(
      error_of(std::string(kExplicitHead) +
               "links: [{from: g0, to: s0, bandwidth: 10Gbps, background: 0.2}]\n"),
      "c.yaml: links[0]: unknown key 'background' (did you mean 'background_load'?) (allowed: "
      "from, to, bandwidth, latency, duplex, background_load)");
}

// Each mapping and list is checked once however many aliases name it (nine levels of ten aliases
// would be walked 10^9 times), a node that holds itself ends, and so does nesting past 64 levels;
// a key given twice is refused wherever it is.
TEST(ClusterErrors, AliasesNestingAndDuplicateKeys) {
  std::string laughs = "version: 1\nl0: &l0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n";
  for (int i = 1; i <= 9; ++i) {
    laughs += fmt::format("l{}: &l{} [", i, i);
    for (int j = 0; j < 10; ++j) laughs += fmt::format("{}*l{}", j ? ", " : "", i - 1);
    laughs += "]\n";
  }
  EXPECT_EQ(error_of(laughs).rfind("c.yaml: document: unknown key 'l0'", 0), 0u)
      << error_of(laughs);
  EXPECT_EQ(error_of("version: 1\nnodes: &a [*a]\n").rfind("c.yaml: ", 0), 0u);
  const std::string deep = "version: 1\nnodes: " + std::string(100, '[') + std::string(100, ']');
  EXPECT_NE(error_of(deep).find("nested more than 64 levels deep"), std::string::npos)
      << error_of(deep);
  EXPECT_EQ(error_of("version: 1\nversion: 1\nnodes: []\n"),
            "c.yaml: version: duplicate key (each key may appear once in a mapping)");
}

TEST(ClusterErrors, WrongShapesNeverThrow) {
  for (const char* text :
       {"version: 1\nnodes: 3\n", "version: 1\nnodes: [3]\n", "version: [1]\n",
        "version: 1\nnodes: [{count: [1]}]\n", "version: 1\ndevices: {a: 1}\n",
        "version: 1\nnodes:\n  - {count: 1, device: {x: 1}}\n",
        "version: 1\ndevice_types: 7\nnodes: []\n", "version: 1\n? [a, b]\n: 1\n", "&a [*a]",
        "version: 1\nnodes: [!!binary x]\n"}) {
    auto r = parse_cluster_yaml(text, "c.yaml");
    EXPECT_FALSE(r.ok()) << text;
    if (!r.ok()) {
      EXPECT_EQ(r.error().message.rfind("c.yaml: ", 0), 0u) << r.error().message;
    }
  }
  auto missing = read_cluster_file("/nonexistent/c.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message, "/nonexistent/c.yaml: cannot read: no such file");
}

}  // namespace
}  // namespace hetplan::cluster

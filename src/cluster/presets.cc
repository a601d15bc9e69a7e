// Built-in clusters. Each is YAML text parsed by the same parser as a user's file (one code path),
// and `hetplan clusters` can print it for a user to copy and edit.
//
// Figures: GPUs and link rates from shared/reference/hardware.md (NVLink 3 300 GB/s, NVLink 4
// 450 GB/s, NVLink 2 150 GB/s, PCIe 3.0/4.0 x16 15.75/31.5 GB/s per direction, InfiniBand HDR/NDR
// 200/400 Gb/s); the mixed testbeds from shared/reference/seeds.md. Where a paper does not publish
// a detail (intra-machine links, latencies) the value is a typical one for that hardware.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>

#include "hetplan/cluster/cluster_file.h"

namespace hetplan::cluster {
namespace {

struct PresetDef {
  ClusterPreset info;
  std::string (*yaml)(int nodes);
};

std::string dgx_a100(int n) {
  return fmt::format(
      R"(# DGX A100 pod: {} nodes of 8x A100-SXM4-80GB on NVSwitch (NVLink 3, 300 GB/s per GPU per
# direction) and 8x 200 Gb/s HDR InfiniBand per node (one rail per GPU), non-blocking fabric.
version: 1
nodes:
  - group: a100
    count: {}
    device: A100-SXM4-80GB
    devices_per_node: 8
    intra_node: {{bandwidth: 300GB/s, latency: 2us}}
    nic: {{bandwidth: 200Gbps, count: 8, latency: 5us}}
network: {{kind: switch}}
)",
      n, n);
}

std::string dgx_h100(int n) {
  return fmt::format(
      R"(# DGX H100 pod: {} nodes of 8x H100-SXM5-80GB on NVSwitch (NVLink 4, 450 GB/s per GPU per
# direction) and 8x 400 Gb/s NDR InfiniBand per node (one rail per GPU), non-blocking fabric.
version: 1
nodes:
  - group: h100
    count: {}
    device: H100-SXM5-80GB
    devices_per_node: 8
    intra_node: {{bandwidth: 450GB/s, latency: 2us}}
    nic: {{bandwidth: 400Gbps, count: 8, latency: 5us}}
network: {{kind: switch}}
)",
      n, n);
}

std::string heterog_mixed(int) {
  return R"(# HeteroG (CoNEXT'20) testbed: 4 servers, 8 GPUs. Two servers with 2x V100 on 100 GbE, one
# with 2x GTX 1080Ti and one with 2x P100 on 50 GbE; GPUs inside a server on PCIe 3.0 x16.
version: 1
nodes:
  - group: v100
    count: 2
    device: V100-PCIE-16GB
    devices_per_node: 2
    intra_node: {bandwidth: 15.75GB/s, latency: 5us}
    nic: {bandwidth: 100Gbps, count: 1, latency: 20us}
  - group: 1080ti
    count: 1
    device: GTX-1080Ti
    devices_per_node: 2
    intra_node: {bandwidth: 15.75GB/s, latency: 5us}
    nic: {bandwidth: 50Gbps, count: 1, latency: 20us}
  - group: p100
    count: 1
    device: P100-PCIE-16GB
    devices_per_node: 2
    intra_node: {bandwidth: 15.75GB/s, latency: 5us}
    nic: {bandwidth: 50Gbps, count: 1, latency: 20us}
network: {kind: switch}
)";
}

std::string tag_mixed(int) {
  return R"(# TAG (2023) testbed: 4x V100 + 8x GTX 1080Ti + 4x P100 in 3 machines, about 22 Gb/s between
# machines (TCP). V100s on NVLink 2, the others on PCIe 3.0 x16.
version: 1
nodes:
  - group: v100
    count: 1
    device: V100-SXM2-16GB
    devices_per_node: 4
    intra_node: {bandwidth: 150GB/s, latency: 2us}
    nic: {bandwidth: 22Gbps, count: 1, latency: 30us}
  - group: 1080ti
    count: 1
    device: GTX-1080Ti
    devices_per_node: 8
    intra_node: {bandwidth: 15.75GB/s, latency: 5us}
    nic: {bandwidth: 22Gbps, count: 1, latency: 30us}
  - group: p100
    count: 1
    device: P100-PCIE-16GB
    devices_per_node: 4
    intra_node: {bandwidth: 15.75GB/s, latency: 5us}
    nic: {bandwidth: 22Gbps, count: 1, latency: 30us}
network: {kind: switch}
)";
}

std::string hap_mixed(int) {
  return R"(# In the spirit of HAP (EuroSys'24): V100 and P100 machines, 8 GPUs each, on 100 Gb/s
# Ethernet. V100s on NVLink 2, P100s on PCIe 3.0 x16. (The paper's exact machine counts and
# links are not published in our references; these are typical.)
version: 1
nodes:
  - group: v100
    count: 2
    device: V100-SXM2-16GB
    devices_per_node: 8
    intra_node: {bandwidth: 150GB/s, latency: 2us}
    nic: {bandwidth: 100Gbps, count: 1, latency: 10us}
  - group: p100
    count: 2
    device: P100-PCIE-16GB
    devices_per_node: 8
    intra_node: {bandwidth: 15.75GB/s, latency: 5us}
    nic: {bandwidth: 100Gbps, count: 1, latency: 10us}
network: {kind: switch}
)";
}

std::string a100_v100(int) {
  return R"(# Two GPU generations on one 100 Gb/s network: 2 nodes of 8x A100-SXM4-40GB (NVLink 3) and
# 2 nodes of 8x V100-SXM2-32GB (NVLink 2), one 100 Gb/s NIC per node.
version: 1
nodes:
  - group: a100
    count: 2
    device: A100-SXM4-40GB
    devices_per_node: 8
    intra_node: {bandwidth: 300GB/s, latency: 2us}
    nic: {bandwidth: 100Gbps, count: 1, latency: 5us}
  - group: v100
    count: 2
    device: V100-SXM2-32GB
    devices_per_node: 8
    intra_node: {bandwidth: 150GB/s, latency: 2us}
    nic: {bandwidth: 100Gbps, count: 1, latency: 5us}
network: {kind: switch}
)";
}

std::string h100_a100_l4(int) {
  return R"(# Three generations: 1 DGX H100 (8x 400 Gb/s), 2 DGX A100 (8x 200 Gb/s) and 2 inference
# servers of 4x L4 on PCIe 4.0 x16 with one 100 Gb/s NIC, on one switch.
version: 1
nodes:
  - group: h100
    count: 1
    device: H100-SXM5-80GB
    devices_per_node: 8
    intra_node: {bandwidth: 450GB/s, latency: 2us}
    nic: {bandwidth: 400Gbps, count: 8, latency: 5us}
  - group: a100
    count: 2
    device: A100-SXM4-80GB
    devices_per_node: 8
    intra_node: {bandwidth: 300GB/s, latency: 2us}
    nic: {bandwidth: 200Gbps, count: 8, latency: 5us}
  - group: l4
    count: 2
    device: L4
    devices_per_node: 4
    intra_node: {bandwidth: 31.5GB/s, latency: 5us}
    nic: {bandwidth: 100Gbps, count: 1, latency: 5us}
network: {kind: switch}
)";
}

std::string leaf_spine_mixed(int) {
  return R"(# DLCP (2020)-style shared fabric: 4 nodes of 4x A100-SXM4-40GB (NVLink 3) and 4 nodes of 4x
# V100-SXM2-32GB (NVLink 2), one 25 Gb/s NIC per node, two nodes per leaf switch and two spines
# (two equal paths between leaves) with 2:1 oversubscription, so that flows hashed onto the same
# spine (ECMP) slow each other down, and where other tenants' traffic takes 30% of every network
# link.
version: 1
nodes:
  - group: a100
    count: 4
    device: A100-SXM4-40GB
    devices_per_node: 4
    intra_node: {bandwidth: 300GB/s, latency: 2us}
    nic: {bandwidth: 25Gbps, count: 1, latency: 5us}
  - group: v100
    count: 4
    device: V100-SXM2-32GB
    devices_per_node: 4
    intra_node: {bandwidth: 150GB/s, latency: 2us}
    nic: {bandwidth: 25Gbps, count: 1, latency: 5us}
network: {kind: leaf-spine, spines: 2, nodes_per_leaf: 2, oversubscription: 2, background_load: 0.3}
)";
}

std::string mixed_large(int a100_nodes, int v100_nodes) {
  return fmt::format(
      R"(# Planner scaling: {} nodes of 8x A100-SXM4-40GB (8x 200 Gb/s) and {} nodes of 8x
# V100-SXM2-16GB (4x 100 Gb/s) on a fat-tree with 2:1 oversubscription.
version: 1
nodes:
  - group: a100
    count: {}
    device: A100-SXM4-40GB
    devices_per_node: 8
    intra_node: {{bandwidth: 300GB/s, latency: 2us}}
    nic: {{bandwidth: 200Gbps, count: 8, latency: 5us}}
  - group: v100
    count: {}
    device: V100-SXM2-16GB
    devices_per_node: 8
    intra_node: {{bandwidth: 150GB/s, latency: 2us}}
    nic: {{bandwidth: 100Gbps, count: 4, latency: 5us}}
network: {{kind: fat-tree, oversubscription: 2}}
)",
      a100_nodes, v100_nodes, a100_nodes, v100_nodes);
}

// The machine at hand as N CPU workers (processes) on one host, for `hetplan plan` and
// `hetplan run` on CPUs; they talk over loopback TCP (Gloo).
std::string cpu_host(int n) {
  return fmt::format(R"(# This host as {} CPU worker processes talking over loopback TCP (Gloo).
version: 1
nodes:
  - group: cpu
    count: 1
    device: cpu
    devices_per_node: {}
    intra_node: {{bandwidth: 5GB/s, latency: 20us}}
    nic: {{bandwidth: 10Gbps, count: 1, latency: 20us}}
network: {{kind: switch}}
)",
                     n, n);
}

std::string mixed_512(int) { return mixed_large(32, 32); }
std::string mixed_4096(int) { return mixed_large(256, 256); }

const std::vector<PresetDef>& defs() {
  static const std::vector<PresetDef> list = {
      {{"dgx-a100",
        "DGX A100 pod: N nodes x 8 A100-SXM4-80GB, NVSwitch 300 GB/s, 8x 200 Gb/s IB (dgx-a100:N, "
        "default 4)",
        4},
       dgx_a100},
      {{"dgx-h100",
        "DGX H100 pod: N nodes x 8 H100-SXM5-80GB, NVSwitch 450 GB/s, 8x 400 Gb/s IB (dgx-h100:N, "
        "default 4)",
        4},
       dgx_h100},
      {{"heterog-mixed",
        "HeteroG testbed: 2x2 V100 on 100 GbE, 2 GTX-1080Ti + 2 P100 on 50 GbE (8 GPUs, 4 servers)",
        0},
       heterog_mixed},
      {{"tag-mixed",
        "TAG testbed: 4 V100 + 8 GTX-1080Ti + 4 P100 in 3 machines, 22 Gb/s between them", 0},
       tag_mixed},
      {{"hap-mixed", "HAP-style: 2 nodes x 8 V100 + 2 nodes x 8 P100 on 100 Gb/s Ethernet", 0},
       hap_mixed},
      {{"a100-v100", "2 nodes x 8 A100-SXM4-40GB + 2 nodes x 8 V100-SXM2-32GB on 100 Gb/s", 0},
       a100_v100},
      {{"h100-a100-l4", "1 DGX H100 + 2 DGX A100 + 2 servers x 4 L4 on one switch (32 GPUs)", 0},
       h100_a100_l4},
      {{"leaf-spine-mixed",
        "16 A100-SXM4-40GB + 16 V100-SXM2-32GB, leaf-spine 2 spines 2:1, 30% cross traffic (DLCP)",
        0},
       leaf_spine_mixed},
      {{"cpu", "This host as N CPU worker processes on loopback TCP (cpu:N, default 2)", 2},
       cpu_host},
      {{"mixed-512", "256 A100-SXM4-40GB + 256 V100-SXM2-16GB, fat-tree 2:1 (planner scaling)", 0},
       mixed_512},
      {{"mixed-4096", "2048 A100-SXM4-40GB + 2048 V100-SXM2-16GB, fat-tree 2:1 (planner scaling)",
        0},
       mixed_4096},
  };
  return list;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return out;
}

// A parsed "name[:N]". `nodes` is 0 when no count was given, -1 when it is not a number.
struct PresetRef {
  const PresetDef* def = nullptr;
  long long nodes = 0;
};

PresetRef find_preset(std::string_view text) {
  PresetRef ref;
  std::string_view base = text;
  const auto colon = text.find(':');
  if (colon != std::string_view::npos) {
    base = text.substr(0, colon);
    const std::string_view count = text.substr(colon + 1);
    auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), ref.nodes);
    if (ec != std::errc() || end != count.data() + count.size() || ref.nodes <= 0) ref.nodes = -1;
  }
  for (const PresetDef& d : defs())
    if (d.info.name == lower(base)) ref.def = &d;
  return ref;
}

std::string preset_names() {
  std::string names;
  for (const PresetDef& d : defs())
    names += (names.empty() ? "" : ", ") + d.info.name + (d.info.default_nodes > 0 ? "[:N]" : "");
  return names;
}

}  // namespace

const std::vector<ClusterPreset>& cluster_presets() {
  static const std::vector<ClusterPreset> list = [] {
    std::vector<ClusterPreset> out;
    for (const PresetDef& d : defs()) out.push_back(d.info);
    return out;
  }();
  return list;
}

std::string preset_yaml(std::string_view name) {
  const PresetRef ref = find_preset(name);
  if (!ref.def || ref.nodes < 0 || (ref.nodes > 0 && ref.def->info.default_nodes == 0)) return "";
  if (ref.nodes > 8192) return "";
  return ref.def->yaml(ref.nodes > 0 ? static_cast<int>(ref.nodes) : ref.def->info.default_nodes);
}

Result<Cluster> load_cluster(std::string_view text, std::string_view source) {
  const std::string src(source);
  const PresetRef ref = find_preset(text);
  if (ref.def) {
    const ClusterPreset& p = ref.def->info;
    if (ref.nodes != 0 && p.default_nodes == 0)
      return make_error(
          src, std::string(text),
          fmt::format("preset '{}' takes no node count (expected just '{}')", p.name, p.name));
    if (ref.nodes < 0 || ref.nodes > 8192)
      return make_error(src, std::string(text),
                        fmt::format("expected a node count from 1 to 8192 after '{}:'", p.name));
    const int nodes = ref.nodes > 0 ? static_cast<int>(ref.nodes) : p.default_nodes;
    const std::string name = p.default_nodes > 0 ? fmt::format("{}:{}", p.name, nodes) : p.name;
    Result<Cluster> c = parse_cluster_yaml(ref.def->yaml(nodes), "preset " + name);
    if (c.ok()) c->name = c->reference = name;
    return c;
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(std::filesystem::path(text), ec))
    return make_error(
        src, "",
        fmt::format("'{}' is neither a preset ({}) nor a readable file", text, preset_names()));
  return read_cluster_file(std::string(text));
}

}  // namespace hetplan::cluster

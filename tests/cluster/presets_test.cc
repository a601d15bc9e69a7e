#include <chrono>
#include <filesystem>

#include <gtest/gtest.h>

#include "hetplan/cluster/cluster_file.h"

namespace hetplan::cluster {
namespace {

TEST(Presets, EveryPresetParses) {
  ASSERT_GE(cluster_presets().size(), 9u);
  for (const ClusterPreset& p : cluster_presets()) {
    EXPECT_FALSE(preset_yaml(p.name).empty()) << p.name;
    auto r = load_cluster(p.name);
    ASSERT_TRUE(r.ok()) << p.name << ": " << r.error().message;
    EXPECT_GT(r->num_devices(), 0);
    EXPECT_EQ(r->routes.size(), static_cast<std::size_t>(r->num_devices()));
  }
}

TEST(Presets, DeviceCounts) {
  auto count = [](const char* name) {
    auto r = load_cluster(name);
    EXPECT_TRUE(r.ok()) << name;
    return r.ok() ? r->num_devices() : -1;
  };
  EXPECT_EQ(count("dgx-a100"), 32);  // default 4 nodes
  EXPECT_EQ(count("dgx-a100:2"), 16);
  EXPECT_EQ(count("dgx-h100:16"), 128);
  EXPECT_EQ(count("heterog-mixed"), 8);
  EXPECT_EQ(count("tag-mixed"), 16);
  EXPECT_EQ(count("hap-mixed"), 32);
  EXPECT_EQ(count("a100-v100"), 32);
  EXPECT_EQ(count("h100-a100-l4"), 32);
  EXPECT_EQ(count("mixed-512"), 512);
  EXPECT_EQ(count("leaf-spine-mixed"), 32);
}

TEST(Presets, LeafSpineMixed) {
  auto r = load_cluster("leaf-spine-mixed");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const Cluster& c = *r;
  EXPECT_EQ(c.name, "leaf-spine-mixed");
  ASSERT_EQ(c.groups.size(), 2u);
  EXPECT_EQ(c.type_of(0).name, "A100-SXM4-40GB");
  EXPECT_EQ(c.type_of(31).name, "V100-SXM2-32GB");
  EXPECT_EQ(c.nodes.size(), 8u);
  EXPECT_EQ(c.network, NetworkKind::leaf_spine);
  EXPECT_EQ(c.leaf_spine.spines, 2);
  EXPECT_EQ(c.leaf_spine.nodes_per_leaf, 2);
  EXPECT_EQ(c.leaf_spine.leaves(), 4);
  EXPECT_DOUBLE_EQ(c.oversubscription, 2);
  EXPECT_TRUE(c.multipath());
  // NVLink inside a node; 25 Gb/s between nodes of a leaf, and half of that per spine between
  // leaves (two 3.125 GB/s NICs per leaf over two spines at 2:1).
  EXPECT_DOUBLE_EQ(c.path_bandwidth(0, 3).value, 300e9);
  EXPECT_DOUBLE_EQ(c.path_bandwidth(16, 19).value, 150e9);
  EXPECT_DOUBLE_EQ(c.path_bandwidth(0, 4).value, 3.125e9);  // same leaf
  EXPECT_DOUBLE_EQ(c.path_bandwidth(0, 16).value, 1.5625e9);
  for (int l : c.leaf_spine.up) EXPECT_DOUBLE_EQ(c.links[l].bandwidth.value, 1.5625e9);
  EXPECT_DOUBLE_EQ(c.path_latency(0, 16).value, 5e-6);
  EXPECT_EQ(c.num_equal_routes(0, 4), 1);   // a100 nodes 0 and 1 share leaf 0
  EXPECT_EQ(c.num_equal_routes(0, 8), 2);   // a100 node 2 is under leaf 1
  EXPECT_EQ(c.num_equal_routes(0, 31), 2);  // v100 node 3 under leaf 3
  EXPECT_NE(c.equal_route(0, 31, 0), c.equal_route(0, 31, 1));
  // 30% cross traffic on the network links only.
  for (std::size_t l = 0; l < c.links.size(); ++l)
    EXPECT_DOUBLE_EQ(c.links[l].background_load, is_network_link(c, static_cast<int>(l)) ? 0.3 : 0)
        << c.links[l].name;
  EXPECT_DOUBLE_EQ(c.links[c.route(0, 3)[0]].background_load, 0);
  EXPECT_DOUBLE_EQ(c.links[c.leaf_spine.up[0]].background_load, 0.3);
  EXPECT_NE(preset_yaml("leaf-spine-mixed").find("background_load: 0.3"), std::string::npos);
}

TEST(Presets, DgxFigures) {
  auto r = load_cluster("dgx-h100:2");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->name, "dgx-h100:2");
  EXPECT_EQ(r->type_of(0).name, "H100-SXM5-80GB");
  EXPECT_DOUBLE_EQ(r->path_bandwidth(0, 7).value, 450e9);
  EXPECT_DOUBLE_EQ(r->path_bandwidth(0, 8).value, 50e9);  // one 400 Gb/s NDR rail per GPU
  auto tag = load_cluster("tag-mixed");
  ASSERT_TRUE(tag.ok());
  EXPECT_DOUBLE_EQ(tag->path_bandwidth(0, 4).value, 22e9 / 8);
}

TEST(Presets, LargePresetBuildsFastAndRoutes) {
  const auto t0 = std::chrono::steady_clock::now();
  auto r = load_cluster("mixed-4096");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->num_devices(), 4096);
  EXPECT_LT(s, 1.0);
  // A100 rail 25 GB/s; a V100 reaches one of its node's four 100 Gb/s NICs (shared by two GPUs):
  // 12.5 GB/s; the fat-tree 2:1 uplinks (100 and 25 GB/s) are wider.
  EXPECT_DOUBLE_EQ(r->path_bandwidth(0, 4095).value, 12.5e9);
  EXPECT_EQ(r->route(0, 4095).size(), 6u);
  const auto t1 = std::chrono::steady_clock::now();
  std::size_t hops = 0;
  for (int b = 0; b < r->num_devices(); ++b) hops += r->route(17, b).size();
  EXPECT_GT(hops, 0u);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count(), 0.5);
}

TEST(Presets, LoadErrors) {
  auto bad = load_cluster("tag-mixed:3");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "--cluster: tag-mixed:3: preset 'tag-mixed' takes no node count (expected just 'tag-mixed')");
  auto zero = load_cluster("dgx-a100:0", "--cluster");
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.error().message, "--cluster: dgx-a100:0: expected a node count from 1 to 8192 after 'dgx-a100:'");
  auto unknown = load_cluster("no-such-cluster");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("'no-such-cluster' is neither a preset (dgx-a100[:N]"), std::string::npos)
      << unknown.error().message;
  EXPECT_TRUE(preset_yaml("no-such").empty());
  EXPECT_TRUE(preset_yaml("tag-mixed:2").empty());
  EXPECT_NE(preset_yaml("dgx-a100:7").find("count: 7"), std::string::npos);
}

TEST(Presets, ShippedFilesParseAndMatchTheirPresets) {
  const std::filesystem::path dir = std::filesystem::path(HETPLAN_SOURCE_DIR) / "data" / "clusters";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    ++files;
    auto r = load_cluster(entry.path().string());
    ASSERT_TRUE(r.ok()) << r.error().message;
    const std::string stem = entry.path().stem().string();
    if (preset_yaml(stem).empty()) continue;
    auto p = load_cluster(stem);
    ASSERT_TRUE(p.ok());
    // The same cluster, loaded again by different references: the file's absolute path and the
    // preset's name.
    EXPECT_EQ(r->reference, std::filesystem::absolute(entry.path()).lexically_normal().string());
    EXPECT_EQ(p->reference, stem);
    r->reference = p->reference;
    EXPECT_TRUE(*r == *p) << stem << " differs from its preset";
  }
  EXPECT_GE(files, 5);
}

TEST(Presets, GroupOfADevice) {
  // hap-mixed: 2 nodes x 8 V100, then 2 nodes x 8 P100.
  auto c = load_cluster("hap-mixed");
  ASSERT_TRUE(c) << c.error().message;
  ASSERT_EQ(c->groups.size(), 2u);
  EXPECT_EQ(c->group_of(0), 0);
  EXPECT_EQ(c->group_of(15), 0);
  EXPECT_EQ(c->group_of(16), 1);
  EXPECT_EQ(c->group_of(31), 1);
}

}  // namespace
}  // namespace hetplan::cluster

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
  EXPECT_TRUE(contains(s, "16 x V100-SXM2-32GB")) << s;
  EXPECT_TRUE(contains(s, "total peak bf16: 7.0 PFLOP/s")) << s;  // 16*312 + 16*125 TFLOP/s
  EXPECT_TRUE(contains(s, "16 x A100-SXM4-40GB: 40 GB memory, 312.0 TFLOP/s bf16")) << s;
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

}  // namespace
}  // namespace hetplan::cluster

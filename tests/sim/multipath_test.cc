// Equal routes on a leaf-spine network (DLCP's per-packet load balancing): flows hashed onto one
// spine each (ECMP) collide, sprayed flows spread over both; and cross traffic's share of a link.
// Exact times from the engine on two flows over two paths.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <optional>

#include "../../src/sim/lowering_common.h"
#include "../../src/sim/task_graph.h"
#include "hetplan/cluster/cluster_file.h"
#include "sim_fixtures.h"

namespace hetplan::sim {
namespace {

// Eight nodes of one device, two per leaf (four leaves), two spines; 8 Gb/s (1 GB/s) NICs, so
// each leaf -> spine link carries 2 GB/s / 2 spines = 1 GB/s. No latencies.
cluster::Cluster leaf_spine(double background = 0) {
  auto c = cluster::parse_cluster_yaml(
      fmt::format("version: 1\n"
                  "device_types:\n"
                  "  - {{name: unit, peak_fp16: 1TFLOPS, peak_fp32: 1TFLOPS, memory: 16GB,"
                  " memory_bandwidth: 1000GB/s}}\n"
                  "nodes:\n"
                  "  - {{group: g, count: 8, device: unit, devices_per_node: 1,"
                  " intra_node: {{bandwidth: 100GB/s, latency: 0us}},"
                  " nic: {{bandwidth: 8Gbps, count: 1, latency: 0us}}}}\n"
                  "network: {{kind: leaf-spine, spines: 2, nodes_per_leaf: 2,"
                  " background_load: {}}}\n",
                  background),
      "ls.yaml");
  if (!c) throw std::runtime_error(c.error().message);
  return *c;
}

cost::NetworkParams network(bool spray) {
  cost::NetworkParams n = testing::exact_options().network;
  n.spray = spray;
  return n;
}

cost::CollectiveCost p2p(const cluster::Cluster& c, int from, int to, double bytes, bool spray) {
  cost::CollectiveRequest req;
  req.kind = cost::Collective::p2p;
  req.devices = {from, to};
  req.bytes = Bytes(bytes);
  return cost::collective_cost(c, req, network(spray));
}

// The spine an ECMP flow crosses (its leaf -> spine link), -1 when it sprays.
int spine_of(const cluster::Cluster& c, const cost::CollectiveCost& cost) {
  int spine = -1;
  for (const auto& l : cost.loads)
    for (std::size_t k = 0; k < c.leaf_spine.up.size(); ++k)
      if (c.leaf_spine.up[k] == l.link) {
        const int s = static_cast<int>(k) % c.leaf_spine.spines;
        if (spine >= 0 && spine != s) return -1;
        spine = s;
      }
  return spine;
}

// Two transfers started together; returns when the last ends.
double together(const cluster::Cluster& c, const cost::CollectiveCost& a,
                const cost::CollectiveCost& b, bool spray) {
  detail::TaskGraph g;
  for (const auto* part : {&a, &b}) {
    detail::Task t;
    t.kind = TaskKind::p2p;
    t.is_transfer = true;
    t.stream = g.add_stream();
    t.duration = (part->time - part->latency).value;
    t.loads_begin = static_cast<int>(g.loads.size());
    g.loads.insert(g.loads.end(), part->loads.begin(), part->loads.end());
    t.loads_end = static_cast<int>(g.loads.size());
    g.add_task(t);
  }
  return detail::run_engine(g, cost::link_rates(c, network(spray))).makespan;
}

TEST(Multipath, EcmpFlowsThatCollideShareOneSpineAndSprayedOnesUseBoth) {
  const auto c = leaf_spine();
  ASSERT_TRUE(c.multipath());
  const double bytes = 1e9;  // 1 s over a NIC
  // Flows from leaf 0 (devices 0 and 1) to other leaves, from distinct NICs to distinct NICs;
  // find two that ECMP puts on the same spine and two that it puts on different ones.
  struct Pair {
    int b0, b1;
  };
  std::optional<Pair> collide, apart;
  for (int b0 = 2; b0 < 8; ++b0)
    for (int b1 = 2; b1 < 8; ++b1) {
      if (b1 == b0) continue;
      const int s0 = spine_of(c, p2p(c, 0, b0, bytes, false));
      const int s1 = spine_of(c, p2p(c, 1, b1, bytes, false));
      ASSERT_GE(s0, 0);
      ASSERT_GE(s1, 0);
      auto& slot = s0 == s1 ? collide : apart;
      if (!slot) slot = Pair{b0, b1};
    }
  ASSERT_TRUE(collide && apart);
  // ECMP: two 1 GB flows on one 1 GB/s leaf -> spine link take 2 s; on two, 1 s (each alone on
  // its NIC and its spine link).
  for (const auto& [pair, ecmp_s] : {std::pair{*collide, 2.0}, std::pair{*apart, 1.0}}) {
    EXPECT_NEAR(
        together(c, p2p(c, 0, pair.b0, bytes, false), p2p(c, 1, pair.b1, bytes, false), false),
        ecmp_s, 1e-12);
    // Sprayed, each flow puts half its bytes on each spine: 1 GB per spine link, 1 s.
    const auto x = p2p(c, 0, pair.b0, bytes, true);
    EXPECT_EQ(spine_of(c, x), -1);
    EXPECT_NEAR(together(c, x, p2p(c, 1, pair.b1, bytes, true), true), 1.0, 1e-12);
  }
  // Alone, a flow takes 1 s either way (its NIC bounds it).
  EXPECT_NEAR(p2p(c, 0, 2, bytes, false).time.value, 1.0, 1e-12);
  EXPECT_NEAR(p2p(c, 0, 2, bytes, true).time.value, 1.0, 1e-12);
}

TEST(Multipath, CrossTrafficTakesItsShareOfTheNetworkLinks) {
  // 30% of every network link's bandwidth is taken: a flow gets 0.7 GB/s of its NIC.
  const auto c = leaf_spine(0.3);
  EXPECT_NEAR(p2p(c, 0, 2, 1e9, false).time.value, 1.0 / 0.7, 1e-12);
  EXPECT_NEAR(together(c, p2p(c, 0, 2, 1e9, true), p2p(c, 1, 3, 1e9, true), true), 1.0 / 0.7,
              1e-12);
}

}  // namespace
}  // namespace hetplan::sim

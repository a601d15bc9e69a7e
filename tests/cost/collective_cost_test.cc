#include "hetplan/cost/collective_cost.h"

#include <gtest/gtest.h>

#include <numeric>

#include "hand_built.h"

namespace hetplan::cost {
namespace {

using testing::two_level_cluster;
using testing::TwoLevelSpec;

NetworkParams ideal() {
  NetworkParams p;
  p.intra_node_efficiency = 1;
  p.inter_node_efficiency = 1;
  p.collective_launch = Seconds(0);
  return p;
}

std::vector<int> all_devices(const cluster::Cluster& c) {
  std::vector<int> d(c.num_devices());
  std::iota(d.begin(), d.end(), 0);
  return d;
}

CollectiveRequest request(Collective kind, std::vector<int> devices, double bytes,
                          Algorithm algorithm = Algorithm::automatic) {
  CollectiveRequest r;
  r.kind = kind;
  r.devices = std::move(devices);
  r.bytes = Bytes(bytes);
  r.algorithm = algorithm;
  return r;
}

double load_on(const CollectiveCost& cost, const cluster::Cluster& c,
               const std::string& link_name) {
  for (const LinkLoad& l : cost.loads)
    if (c.links[l.link].name == link_name) return l.bytes;
  return 0;
}

// Path latency between nodes: device->switch 1us, switch->NIC 0, NIC->core 5us, and back.
constexpr double kInterNodeLatency = 1e-6 + 5e-6 + 5e-6 + 1e-6;

// Round the ring 0 -> 1 -> 2 -> 3 -> 0 of the default 2 x 2 cluster: two NVLink-like hops and two
// network hops.
constexpr double kRingLatency = 2 * 2e-6 + 2 * kInterNodeLatency;

TEST(CollectiveCost, RingAllReduceMatchesAlphaBetaFormula) {
  TwoLevelSpec spec;  // 2 nodes x 2 devices, NIC 10 GB/s is the bottleneck
  spec.intra_latency = 3e-6;
  spec.nic_latency = 0;  // every hop, inside a node or not, then has alpha = 6 us
  const auto c = two_level_cluster(spec);
  const double S = 1e8, n = 4, B = 10e9, alpha = 6e-6;
  const auto cost = collective_cost(
      c, request(Collective::all_reduce, {0, 1, 2, 3}, S, Algorithm::ring), ideal());
  EXPECT_EQ(cost.algorithm, Algorithm::ring);
  EXPECT_DOUBLE_EQ(cost.time.value, 2 * (n - 1) / n * S / B + 2 * (n - 1) * alpha);
  EXPECT_DOUBLE_EQ(cost.latency.value, 2 * (n - 1) * alpha);
  // Every device's uplink and each NIC's uplink carry 2(n-1)/n S.
  EXPECT_DOUBLE_EQ(load_on(cost, c, "g0->sw0"), 1.5 * S);
  EXPECT_DOUBLE_EQ(load_on(cost, c, "nic0->core"), 1.5 * S);
  EXPECT_DOUBLE_EQ(load_on(cost, c, "core->nic1"), 1.5 * S);
}

// NCCL's protocols (src/graph/tuning.cc): per ring step LL128 1.9 and LL 0.6 us against Simple's
// 3.4, fixed 14.0 and 6.6 against 8.4, bus bandwidth 0.92 and 0.5 of Simple's. On the same ring
// (alpha 6 us a hop, 10 GB/s, a 5 us launch) each wins a range of sizes, its flags on the wire.
TEST(CollectiveCost, ProtocolsBySizeAsNcclChoosesThem) {
  TwoLevelSpec spec;
  spec.intra_latency = 3e-6;
  spec.nic_latency = 0;
  const auto c = two_level_cluster(spec);
  NetworkParams p = ideal();
  p.collective_launch = Seconds(5e-6);
  p.protocols = true;
  const double lat = 6 * 6e-6, B = 10e9;
  auto time = [&](double S, double bw, double hop, double launch) {
    return 1.5 * S / (bw * B) + lat * hop + 5e-6 * launch;
  };
  auto cost = [&](double S) {
    return collective_cost(c, request(Collective::all_reduce, {0, 1, 2, 3}, S, Algorithm::ring), p);
  };
  // 1 KB and 100 KB: LL (10.6 and 40.3 us; Simple 41.2 and 56.0).
  for (double S : {1e3, 1e5}) {
    const auto ll = cost(S);
    EXPECT_EQ(ll.protocol, Protocol::ll) << S;
    EXPECT_NEAR(ll.time.value, time(S, 0.5, 0.6 / 3.4, 6.6 / 8.4), 1e-15) << S;
    EXPECT_NEAR(ll.latency.value, lat * 0.6 / 3.4 + 5e-6 * 6.6 / 8.4, 1e-15) << S;
    EXPECT_DOUBLE_EQ(load_on(ll, c, "nic0->core"), 1.5 * S / 0.5) << S;
  }
  // 300 KB: LL128 (77.4 us; Simple 86.0, LL 100.3).
  const auto ll128 = cost(3e5);
  EXPECT_EQ(ll128.protocol, Protocol::ll128);
  EXPECT_NEAR(ll128.time.value, time(3e5, 0.92, 1.9 / 3.4, 14.0 / 8.4), 1e-15);
  // 100 MB: Simple, the textbook time.
  const auto simple = cost(1e8);
  EXPECT_EQ(simple.protocol, Protocol::simple);
  EXPECT_DOUBLE_EQ(simple.time.value, time(1e8, 1, 1, 1));
  EXPECT_DOUBLE_EQ(load_on(simple, c, "nic0->core"), 1.5e8);
  // Without protocols, Simple at every size.
  p.protocols = false;
  EXPECT_EQ(cost(1e3).protocol, Protocol::simple);
  EXPECT_DOUBLE_EQ(cost(1e3).time.value, time(1e3, 1, 1, 1));
  // Send and receive never run LL128; a parameter server moves whole buffers.
  p.protocols = true;
  const auto send = collective_cost(c, request(Collective::p2p, {1, 2}, 3e5), p);
  EXPECT_NE(send.protocol, Protocol::ll128);
  const auto ps = collective_cost(c, request(Collective::ps_push_pull, {0, 1, 2, 3}, 1e3), p);
  EXPECT_EQ(ps.protocol, Protocol::simple);
}

TEST(CollectiveCost, RingLatencySumsItsHops) {
  const auto c = two_level_cluster({});
  const auto cost = collective_cost(
      c, request(Collective::all_reduce, {0, 1, 2, 3}, 1e8, Algorithm::ring), ideal());
  EXPECT_DOUBLE_EQ(cost.latency.value, 2 * 3.0 / 4 * kRingLatency);
}

TEST(CollectiveCost, EfficienciesAndLaunchApplyByLinkKind) {
  const auto c = two_level_cluster({});
  NetworkParams p = ideal();
  p.inter_node_efficiency = 0.5;
  p.intra_node_efficiency = 0.25;
  p.collective_launch = Seconds(7e-6);
  EXPECT_EQ(link_efficiency(c, 0, p), 0.25);  // g0->sw0
  const double S = 1e8;
  const auto cost =
      collective_cost(c, request(Collective::all_reduce, {3, 2, 1, 0}, S, Algorithm::ring), p);
  // NIC: 1.5 S / 5 GB/s = 30 ms; device uplink: 1.5 S / 25 GB/s = 6 ms.
  EXPECT_DOUBLE_EQ(cost.time.value, 1.5 * S / 5e9 + 1.5 * kRingLatency + 7e-6);
}

TEST(CollectiveCost, NothingToDoTakesNoTime) {
  const auto c = two_level_cluster({});
  EXPECT_EQ(collective_cost(c, request(Collective::all_reduce, {2}, 1e9), ideal()).time.value, 0);
  EXPECT_EQ(collective_cost(c, request(Collective::all_gather, {0, 1, 2}, 0), ideal()).time.value,
            0);
  EXPECT_TRUE(
      collective_cost(c, request(Collective::all_reduce, {0, 3}, 0), ideal()).loads.empty());
}

TEST(CollectiveCost, RingRunsOneChannelPerRail) {
  TwoLevelSpec s;
  s.devices_per_node = 4;
  s.rails = true;
  const auto c = two_level_cluster(s);
  const double S = 1e9, n = 8;
  const auto cost = collective_cost(
      c, request(Collective::all_reduce, all_devices(c), S, Algorithm::ring), ideal());
  // 4 channels, each leaving node 0 through a different NIC with a quarter of 2(n-1)/n S.
  for (int r = 0; r < 4; ++r)
    EXPECT_DOUBLE_EQ(load_on(cost, c, "nic0." + std::to_string(r) + "->core"),
                     2 * (n - 1) / n * S / 4);
  // Each channel crosses 3 hops of 2 us inside each node and one of 10 us (device->NIC->core->
  // NIC->device) to the next node.
  const double channel_latency = 2 * (3 * 2e-6 + 10e-6);
  EXPECT_NEAR(cost.time.value, 2 * (n - 1) / n * S / 4 / 10e9 + 2 * (n - 1) / n * channel_latency,
              1e-15);
}

TEST(CollectiveCost, HierarchicalBeatsRingAcrossSlowNics) {
  TwoLevelSpec s;
  s.devices_per_node = 4;
  s.nic_bandwidth = 1e9;
  const auto c = two_level_cluster(s);
  const double S = 1e9;
  const auto p = NetworkParams::defaults();
  const auto best = collective_cost(c, request(Collective::all_reduce, all_devices(c), S), p);
  const auto ring =
      collective_cost(c, request(Collective::all_reduce, all_devices(c), S, Algorithm::ring), p);
  const auto hier = collective_cost(
      c, request(Collective::all_reduce, all_devices(c), S, Algorithm::hierarchical), p);
  EXPECT_EQ(best.algorithm, Algorithm::hierarchical);
  EXPECT_EQ(hier.algorithm, Algorithm::hierarchical);
  EXPECT_LT(hier.time, ring.time);
  // Across nodes only S/k per device, 2(m-1)/m of it per rail: S in all through the single NIC.
  EXPECT_DOUBLE_EQ(load_on(hier, c, "nic0->core"), S);
  EXPECT_DOUBLE_EQ(load_on(ring, c, "nic0->core"), 2 * 7.0 / 8 * S);
}

TEST(CollectiveCost, HierarchicalNeedsSeveralDevicesOnSeveralNodes) {
  const auto c = two_level_cluster({});
  const auto one_node =
      collective_cost(c, request(Collective::all_reduce, {0, 1}, 1e9, Algorithm::hierarchical),
                      NetworkParams::defaults());
  EXPECT_NE(one_node.algorithm, Algorithm::hierarchical);
  const auto one_each =
      collective_cost(c, request(Collective::all_reduce, {0, 2}, 1e9, Algorithm::hierarchical),
                      NetworkParams::defaults());
  EXPECT_NE(one_each.algorithm, Algorithm::hierarchical);
}

TEST(CollectiveCost, TreeBeatsRingForTinyMessages) {
  TwoLevelSpec s;
  s.nodes = 8;
  s.devices_per_node = 1;
  const auto c = two_level_cluster(s);
  const auto p = NetworkParams::defaults();
  const auto tiny = collective_cost(c, request(Collective::all_reduce, all_devices(c), 64), p);
  EXPECT_EQ(tiny.algorithm, Algorithm::tree);
  const auto ring =
      collective_cost(c, request(Collective::all_reduce, all_devices(c), 64, Algorithm::ring), p);
  EXPECT_LT(tiny.time, ring.time);
  // 2 log2(8) = 6 latency steps against the ring's 14, both in LL (a sixth of Simple's per step).
  const double step = 0.6 / 3.4, fixed = 6.6 / 8.4;
  EXPECT_EQ(tiny.protocol, Protocol::ll);
  EXPECT_DOUBLE_EQ(tiny.latency.value,
                   6 * kInterNodeLatency * step + p.collective_launch.value * fixed);
  EXPECT_DOUBLE_EQ(ring.latency.value,
                   14 * kInterNodeLatency * step + p.collective_launch.value * fixed);
  const auto big = collective_cost(c, request(Collective::all_reduce, all_devices(c), 1e9), p);
  EXPECT_EQ(big.algorithm, Algorithm::ring);
}

TEST(CollectiveCost, PointToPoint) {
  const auto c = two_level_cluster({});
  const auto p = NetworkParams::defaults();
  const double S = 1e8;
  const auto cost = collective_cost(c, request(Collective::p2p, {1, 2}, S), p);
  EXPECT_EQ(cost.algorithm, Algorithm::direct);
  // NIC at 90% of 10 GB/s is slower than NVLink-like 65% of 100 GB/s.
  EXPECT_DOUBLE_EQ(cost.time.value,
                   S / (10e9 * 0.9) + kInterNodeLatency + p.collective_launch.value);
  EXPECT_EQ(cost.loads.size(), 6u);
  const auto local = collective_cost(c, request(Collective::p2p, {0, 1}, S), p);
  EXPECT_DOUBLE_EQ(local.time.value, S / (100e9 * 0.65) + 2e-6 + p.collective_launch.value);
}

TEST(CollectiveCost, UnevenAllGatherPicksPaddedOrGrouped) {
  const auto c = two_level_cluster({});
  auto req = request(Collective::all_gather, {0, 1, 2, 3}, 1e9);
  req.shares = {0.7, 0.1, 0.1, 0.1};
  const auto big = collective_cost(c, req, ideal());
  EXPECT_EQ(big.uneven_form, UnevenForm::grouped);
  req.uneven_form = UnevenForm::padded;
  const auto padded = collective_cost(c, req, ideal());
  EXPECT_EQ(padded.uneven_form, UnevenForm::padded);
  // Padded: (n-1) x max share x S per ring position, over the 10 GB/s NIC.
  EXPECT_DOUBLE_EQ(padded.time.value, 3 * 0.7 * 1e9 / 10e9 + 0.75 * kRingLatency);
  EXPECT_LT(big.time, padded.time);
  // Grouped: each shard crosses the ring once (S x per-byte time), n chains of n-1 steps.
  EXPECT_NEAR(big.time.value, 1e9 / 10e9 + 4 * 0.75 * kRingLatency, 1e-12);

  req.uneven_form.reset();
  req.bytes = Bytes(1e3);
  const auto tiny = collective_cost(c, req, NetworkParams::defaults());
  EXPECT_EQ(tiny.uneven_form, UnevenForm::padded);  // one launch beats four
}

TEST(CollectiveCost, EvenReduceScatterIsHalfARingAllReduce) {
  const auto c = two_level_cluster({});
  const double S = 1e8;
  const auto rs = collective_cost(c, request(Collective::reduce_scatter, {0, 1, 2, 3}, S), ideal());
  EXPECT_EQ(rs.uneven_form, UnevenForm::padded);
  EXPECT_DOUBLE_EQ(rs.time.value, 0.75 * S / 10e9 + 0.75 * kRingLatency);
}

TEST(CollectiveCost, BroadcastChainForLargeTreeForSmall) {
  TwoLevelSpec s;
  s.nodes = 8;
  s.devices_per_node = 1;
  const auto c = two_level_cluster(s);
  const double S = 1e9;
  const auto big = collective_cost(c, request(Collective::broadcast, all_devices(c), S), ideal());
  EXPECT_EQ(big.algorithm, Algorithm::ring);
  EXPECT_DOUBLE_EQ(big.time.value, S / 10e9 + 7 * kInterNodeLatency);
  const auto small = collective_cost(c, request(Collective::broadcast, all_devices(c), 8), ideal());
  EXPECT_EQ(small.algorithm, Algorithm::tree);
}

TEST(CollectiveCost, ParameterServerLoadsTheServer) {
  TwoLevelSpec s;
  s.nodes = 4;
  s.devices_per_node = 1;
  const auto c = two_level_cluster(s);
  const double S = 1e8;
  const auto ps = collective_cost(c, request(Collective::ps_push_pull, {0, 1, 2, 3}, S), ideal());
  EXPECT_EQ(ps.algorithm, Algorithm::parameter_server);
  EXPECT_DOUBLE_EQ(load_on(ps, c, "core->nic0"), 3 * S);  // pushes of three workers
  EXPECT_DOUBLE_EQ(load_on(ps, c, "nic0->core"), 3 * S);  // pulls
  EXPECT_DOUBLE_EQ(ps.time.value, 3 * S / 10e9 + 2 * kInterNodeLatency);
  // Sharded over all four: each NIC sends and receives 3/4 S.
  auto req = request(Collective::ps_push_pull, {0, 1, 2, 3}, S);
  req.shares = {0.25, 0.25, 0.25, 0.25};
  const auto sharded = collective_cost(c, req, ideal());
  EXPECT_DOUBLE_EQ(load_on(sharded, c, "core->nic0"), 1.5 * S);
  EXPECT_LT(sharded.time, ps.time);
}

TEST(CollectiveCost, AllToAllSendsEachPairItsBlock) {
  TwoLevelSpec s;
  s.nodes = 4;
  s.devices_per_node = 1;
  const auto c = two_level_cluster(s);
  const double S = 1.6e9;
  const auto a2a = collective_cost(c, request(Collective::all_to_all, {0, 1, 2, 3}, S), ideal());
  EXPECT_EQ(a2a.algorithm, Algorithm::direct);
  EXPECT_DOUBLE_EQ(load_on(a2a, c, "nic0->core"), 3 * S / 16);
  EXPECT_DOUBLE_EQ(a2a.time.value, 3 * S / 16 / 10e9 + 3 * kInterNodeLatency);
}

TEST(CollectiveCost, ManyDevicesStayCheap) {
  TwoLevelSpec s;
  s.nodes = 64;
  s.devices_per_node = 8;
  const auto c = two_level_cluster(s);
  const auto cost = collective_cost(c, request(Collective::all_reduce, all_devices(c), 1e9),
                                    NetworkParams::defaults());
  EXPECT_NE(cost.algorithm, Algorithm::tree);
  EXPECT_GT(cost.time.value, 0);
}

}  // namespace
}  // namespace hetplan::cost

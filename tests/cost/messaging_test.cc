#include "hetplan/cost/messaging.h"

#include <gtest/gtest.h>

#include <cmath>

#include "hetplan/cluster/cluster_file.h"

namespace hetplan::cost {
namespace {

cluster::Cluster parse(const std::string& yaml) {
  auto c = cluster::parse_cluster_yaml(yaml, "cpu.yaml");
  if (!c) throw std::runtime_error(c.error().message);
  return *c;
}

cluster::Cluster two_nodes_of_two_cpus() {
  return parse(R"(version: 1
nodes:
  - {group: host, count: 2, device: cpu, devices_per_node: 2,
     intra_node: {bandwidth: 5GB/s, latency: 20us}, nic: {bandwidth: 1GB/s, count: 1, latency: 50us}}
network: {kind: switch}
)");
}

double all_reduce(const cluster::Cluster& c, std::vector<int> devices, double bytes,
                  const NetworkParams& net) {
  CollectiveRequest req;
  req.kind = Collective::all_reduce;
  req.devices = std::move(devices);
  req.bytes = Bytes(bytes);
  return collective_cost(c, req, net).time.value;
}

TEST(Messaging, FitReproducesTwoPointsOnALine) {
  const auto net = NetworkParams::defaults();
  // t = launch + 2 x 400 us + S / 1 GB/s.
  const double launch = net.collective_launch.value;
  const std::vector<MessagingPoint> pts{{1e3, launch + 8e-4 + 1e-6}, {1e6, launch + 8e-4 + 1e-3}};
  const auto fit = fit_messaging(pts, net);
  ASSERT_TRUE(fit);
  EXPECT_NEAR(fit->latency.value, 4e-4, 1e-12);
  EXPECT_NEAR(fit->bandwidth.value, 1e9, 1e-3);
  // Sizes that do not matter: all latency, no bandwidth cap.
  const auto flat = fit_messaging({{1e3, 1e-3}, {1e6, 1e-3}}, net);
  ASSERT_TRUE(flat);
  EXPECT_NEAR(flat->latency.value, (1e-3 - launch) / 2, 1e-15);
  EXPECT_TRUE(std::isinf(flat->bandwidth.value));
  EXPECT_FALSE(fit_messaging({}, net));
}

TEST(Messaging, WorkersOfAHostAllReduceAsMeasured) {
  const auto net = NetworkParams::defaults();
  const double launch = net.collective_launch.value;
  CalibrationProfile prof;
  prof.device = "cpu";
  prof.messaging["cpu"] = {{1e3, launch + 8e-4 + 1e-6}, {1e6, launch + 8e-4 + 1e-3}};
  const auto before = two_nodes_of_two_cpus();
  const auto c = with_measured_messaging(before, prof, net);
  // Two workers of one host: the measured all-reduces, exactly.
  for (const auto& p : prof.messaging["cpu"])
    EXPECT_NEAR(all_reduce(c, {0, 1}, p.bytes, net), p.seconds, 1e-12);
  // Between hosts: the NIC's own latency and the measured software latency at both ends.
  EXPECT_NEAR(c.path_latency(0, 2).value, before.path_latency(0, 2).value + 4e-4, 1e-12);
  EXPECT_NEAR(c.path_bandwidth(0, 2).value, before.path_bandwidth(0, 2).value, 1e-3);
  // Workers slower than the NIC cap the path between hosts at their measured bandwidth.
  CalibrationProfile slow = prof;
  slow.messaging["cpu"] = {{1e3, launch + 8e-4 + 1e-5}, {1e6, launch + 8e-4 + 1e-2}};  // 100 MB/s
  const auto capped = with_measured_messaging(before, slow, net);
  EXPECT_NEAR(capped.path_bandwidth(0, 2).value * net.inter_node_efficiency, 1e8, 1e-3);
  // A profile of another device type changes nothing.
  CalibrationProfile other = prof;
  other.messaging = {{"H100-SXM5-80GB", prof.messaging["cpu"]}};
  EXPECT_EQ(with_measured_messaging(before, other, net), before);
}

TEST(Messaging, WorkersAtACpuShareRunTheirMessagingSoftwareThatMuchSlower) {
  const auto net = NetworkParams::defaults();
  const double launch = net.collective_launch.value;
  CalibrationProfile prof;
  prof.device = "cpu";
  prof.messaging["cpu"] = {{1e3, launch + 8e-4 + 1e-6}, {1e6, launch + 8e-4 + 1e-3}};  // 1 GB/s
  const auto before = parse(R"(version: 1
nodes:
  - {group: quarter, count: 1, device: cpu, devices_per_node: 2, cpu_share: 0.25,
     intra_node: {bandwidth: 5GB/s}, nic: {bandwidth: 10GB/s, count: 1, latency: 50us}}
  - {group: whole, count: 1, device: cpu, devices_per_node: 2,
     intra_node: {bandwidth: 5GB/s}, nic: {bandwidth: 10GB/s, count: 1, latency: 50us}}
network: {kind: switch}
)");
  const auto c = with_measured_messaging(before, prof, net);
  // Two workers at a quarter of a core: four times the measured latency (400 us a path end),
  // a quarter of the measured bandwidth.
  EXPECT_NEAR(c.path_latency(0, 1).value, 4 * 4e-4, 1e-12);
  EXPECT_NEAR(all_reduce(c, {0, 1}, 1e6, net), launch + 2 * 4 * 4e-4 + 4e-3, 1e-9);
  // Whole cores: as measured.
  EXPECT_NEAR(all_reduce(c, {2, 3}, 1e6, net), launch + 8e-4 + 1e-3, 1e-9);
  // Between the hosts: the NICs' latency, each end's share of the software latency (200 us / 0.25
  // and 200 us / 1), and the quarter-core end's bandwidth, 250 MB/s.
  EXPECT_NEAR(c.path_latency(0, 2).value, before.path_latency(0, 2).value + 8e-4 + 2e-4, 1e-12);
  EXPECT_NEAR(c.path_bandwidth(0, 2).value * net.inter_node_efficiency, 2.5e8, 1e-3);
}

}  // namespace
}  // namespace hetplan::cost

// hetplan run --emulate: ranks in their own network namespaces and CPU cgroups. Needs root and a
// kernel that allows namespaces; elsewhere the test is skipped with the reason hetplan gives.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../cli/run_command.h"

namespace hetplan::runtime {
namespace {

using cli::testing::run_hetplan;

constexpr const char* kMlp = "mlp:layers=2,hidden=64,in=32,out=10";

std::string cluster_file() {
  const auto file = std::filesystem::temp_directory_path() /
                    ("hetplan_emulate_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(file) << R"(version: 1
nodes:
  - {group: fast, count: 1, device: cpu, devices_per_node: 1, cpu_share: 0.75,
     intra_node: {bandwidth: 5GB/s}, nic: {bandwidth: 1Gbps, count: 1, latency: 50us}}
  - {group: slow, count: 1, device: cpu, devices_per_node: 1, cpu_share: 0.25,
     intra_node: {bandwidth: 5GB/s}, nic: {bandwidth: 100Mbps, count: 1, latency: 50us}}
network: {kind: switch}
)";
  return file.string();
}

// No namespace of an emulation is left behind by a process that has ended. An emulation's
// namespaces are named hp<tag>..., its tag the process id of the hetplan that made it (or c and
// the id of a test process): those of emulations still running beside this test (ctest -j runs
// the emulation tests side by side) belong to a live process and are not counted.
void expect_torn_down() {
  if (!std::filesystem::exists("/var/run/netns")) return;
  for (const auto& e : std::filesystem::directory_iterator("/var/run/netns")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("hp", 0) != 0) continue;
    std::size_t at = 2;
    if (at < name.size() && name[at] == 'c') ++at;
    std::size_t end = at;
    while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
    const std::string pid = name.substr(at, end - at);
    EXPECT_TRUE(!pid.empty() && std::filesystem::exists("/proc/" + pid))
        << e.path() << " is left behind by a process that has ended";
  }
}

TEST(EmulateCli, RunsInNamespacesAndMatchesOneProcess) {
  const std::string cluster = cluster_file();
  auto r = run_hetplan(std::string("run --json --steps 20 --model ") + kMlp + " --cluster " +
                       cluster + " --nprocs 2 --emulate --strategy dp=2,gbs=16");
  std::filesystem::remove(cluster);
  if (r.exit_code != 0 && r.err.find("--emulate:") != std::string::npos)
    GTEST_SKIP() << "this environment refuses emulation: " << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto emulated = nlohmann::json::parse(r.out)["losses"].get<std::vector<double>>();
  auto one =
      run_hetplan(std::string("run --json --steps 20 --model ") + kMlp + " --strategy dp=1,gbs=16");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto single = nlohmann::json::parse(one.out)["losses"].get<std::vector<double>>();
  ASSERT_EQ(emulated.size(), single.size());
  for (std::size_t i = 0; i < single.size(); ++i)
    EXPECT_NEAR(emulated[i], single[i], 1e-4 * std::abs(single[i]));
  expect_torn_down();  // everything it set up is gone
}

// DLCP's transport on two emulated paths (a leaf-spine of 2 spines: each rank a link per spine at
// half its NIC's bandwidth) with cross traffic on every rank's link 30% of the time: sprayed and
// hashed flows train as one process does, and a loss bound drops within it.
TEST(EmulateCli, TheTransportRunsOverTwoPathsBesideCrossTraffic) {
  const auto file = std::filesystem::temp_directory_path() /
                    ("hetplan_emulate_ls_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(file) << R"(version: 1
nodes:
  - {group: cpu, count: 2, device: cpu, devices_per_node: 1, cpu_share: 0.8,
     intra_node: {bandwidth: 5GB/s}, nic: {bandwidth: 200Mbps, count: 1, latency: 50us}}
network: {kind: leaf-spine, spines: 2, nodes_per_leaf: 1, background_load: 0.3}
)";
  const std::string base = std::string("run --json --steps 12 --model ") + kMlp + " --cluster " +
                           file.string() + " --nprocs 2 --emulate --grad-chunk 4KiB --strategy " +
                           "dp=2,gbs=16,grad_priority=layer";
  auto one =
      run_hetplan(std::string("run --json --steps 12 --model ") + kMlp + " --strategy dp=1,gbs=16");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto single = nlohmann::json::parse(one.out)["losses"].get<std::vector<double>>();
  for (const char* extra : {",multipath=spray", ",multipath=ecmp"}) {
    auto r = run_hetplan(base + extra);
    if (r.exit_code != 0 && r.err.find("--emulate:") != std::string::npos) {
      std::filesystem::remove(file);
      GTEST_SKIP() << "this environment refuses emulation: " << r.err;
    }
    ASSERT_EQ(r.exit_code, 0) << extra << ": " << r.err;
    EXPECT_EQ(r.err.find("one path"), std::string::npos) << r.err;  // it sprays here
    const auto emulated = nlohmann::json::parse(r.out)["losses"].get<std::vector<double>>();
    ASSERT_EQ(emulated.size(), single.size());
    for (std::size_t i = 0; i < single.size(); ++i)
      EXPECT_NEAR(emulated[i], single[i], 1e-4 * std::abs(single[i])) << extra << " step " << i;
  }
  auto lossy = run_hetplan(base + "+magnitude,multipath=spray,loss_bound=0.05 --grad-drop always");
  ASSERT_EQ(lossy.exit_code, 0) << lossy.err;
  for (const auto& rank : nlohmann::json::parse(lossy.out)["ranks"]) {
    EXPECT_GT(rank["grad_dropped_fraction"].get<double>(), 0.0);
    EXPECT_LE(rank["grad_dropped_fraction"].get<double>(), 0.05 + 1e-12);
  }
  std::filesystem::remove(file);
  expect_torn_down();
}

TEST(EmulateCli, NeedsWorkersAndACluster) {
  auto r = run_hetplan(std::string("run --model ") + kMlp + " --emulate --strategy dp=1,gbs=8");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--emulate: expected --nprocs"), std::string::npos) << r.err;
  r = run_hetplan(std::string("run --model ") + kMlp +
                  " --nprocs 2 --emulate --strategy dp=2,gbs=8");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--emulate: expected --cluster"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace hetplan::runtime

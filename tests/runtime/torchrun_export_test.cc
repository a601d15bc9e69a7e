// hetplan export --to torchrun, run for real: two torchrun agents (Debian's python3-torch) on this
// host, as two nodes of two CPU workers each, run a plan whose stages span both nodes. torchrun
// numbers the workers node by node; `hetplan run --ranks-by-device` maps them onto the plan's
// ranks, and the losses are those of `hetplan run --nprocs`.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../cli/run_command.h"
#include "hetplan/runtime/launch.h"

namespace hetplan::runtime {
namespace {

namespace fs = std::filesystem;
using cli::testing::run_hetplan;
using cli::testing::slurp;

constexpr const char* kGpt = "gpt:layers=2,hidden=64,heads=4,seq=32,vocab=256";
constexpr const char* kTorchrun = "/usr/bin/torchrun";

TEST(TorchrunExport, TwoNodesRunThePlanAsOneLaunchDoes) {
  if (!fs::exists(kTorchrun)) GTEST_SKIP() << "no " << kTorchrun << " (Debian's python3-torch)";
  const fs::path dir =
      fs::temp_directory_path() / ("hetplan_torchrun_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string cluster = (dir / "two-nodes.yaml").string();
  std::ofstream(cluster) << R"(version: 1
nodes:
  - {group: cpu, count: 2, device: cpu, devices_per_node: 2,
     intra_node: {bandwidth: 5GB/s}, nic: {bandwidth: 1Gbps, count: 1, latency: 50us}}
network: {kind: switch}
)";
  // Two stages, each a tensor-parallel pair across the nodes: the plan's rank order (stage,
  // replica, tp rank) is devices 0, 2, 1, 3; torchrun's is 0, 1, 2, 3.
  const std::string plan = (dir / "plan.json").string();
  std::ofstream(plan)
      << R"({"version": 1, "planner": "hand", "global_batch": 8, "num_microbatches": 2, "schedule": "1f1b",
    "stages": [
      {"first_layer": 0, "num_layers": 2, "replicas": [{"devices": [0, 2], "batch_share": 1}]},
      {"first_layer": 2, "num_layers": 2, "replicas": [{"devices": [1, 3], "batch_share": 1}]}]})";
  const std::string common = std::string(" --model ") + kGpt + " --cluster " + cluster;
  auto r = run_hetplan("export --to torchrun --plan " + plan + " --out " + (dir / "out").string() +
                       common);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("torchrun realises the plan as written"), std::string::npos) << r.out;

  r = run_hetplan("run --json --steps 4 --nprocs 4 --plan " + plan + common);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto want = nlohmann::json::parse(r.out)["losses"].get<std::vector<double>>();
  ASSERT_EQ(want.size(), 4u);

  // Debian 12's torchrun (python3-torch 1.13 on Python 3.11) fails before starting a worker:
  // Std.from_str("0") finds no member for 0 because Python 3.11 no longer iterates a flag's zero
  // member ("'NoneType' object has no attribute 'get'"). This wrapper maps that None back to
  // Std.NONE and is otherwise torchrun.
  const std::string wrapper = (dir / "torchrun").string();
  std::ofstream(wrapper) << R"(#!/usr/bin/python3
import sys
from torch.distributed.elastic.multiprocessing import api
_from_str = api.Std.from_str.__func__
def _fixed(cls, vm):
    r = _from_str(cls, vm)
    if isinstance(r, dict):
        return {k: cls.NONE if v is None else v for k, v in r.items()}
    return cls.NONE if r is None else r
api.Std.from_str = classmethod(_fixed)
from torch.distributed.run import main
sys.exit(main())
)";
  fs::permissions(wrapper, fs::perms::owner_exec, fs::perm_options::add);
  auto port = free_port();
  ASSERT_TRUE(port.ok());
  // Both nodes at once, as a cluster's nodes would start them.
  const std::string env = "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(*port) +
                          " HETPLAN=" + HETPLAN_BINARY + " TORCHRUN=" + wrapper + " ";
  std::string both;
  for (int node = 0; node < 2; ++node)
    both += "NODE_RANK=" + std::to_string(node) + " " + env + "timeout 300 bash " +
            (dir / "out" / "torchrun.sh").string() + " --steps 4 --json >" +
            (dir / ("out" + std::to_string(node))).string() + " 2>" +
            (dir / ("err" + std::to_string(node))).string() + " & p" + std::to_string(node) +
            "=$!; ";
  const int status =
      std::system((both + "wait $p0; s0=$?; wait $p1; s1=$?; exit $((s0 | s1))").c_str());
  const std::string out0 = slurp((dir / "out0").string());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << slurp((dir / "err0").string()) << slurp((dir / "err1").string());
  // Plan rank 0 (device 0, on node 0) prints the run's result.
  const auto j = nlohmann::json::parse(out0.substr(out0.find('{')));
  EXPECT_EQ(j["world_size"], 4);
  // Where each of the plan's ranks ran: plan rank r on device {0, 2, 1, 3}[r], which torchrun
  // numbers node by node: worker 0 (node 0's first), 2 (node 1's first), 1, 3.
  std::vector<int> launcher, local;
  for (const auto& rank : j["ranks"]) {
    launcher.push_back(rank["launcher_rank"].get<int>());
    local.push_back(rank["local_rank"].get<int>());
  }
  EXPECT_EQ(launcher, (std::vector<int>{0, 2, 1, 3}));
  EXPECT_EQ(local, (std::vector<int>{0, 0, 1, 1}));
  const auto got = j["losses"].get<std::vector<double>>();
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-4 * std::abs(want[i])) << "step " << i;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hetplan::runtime

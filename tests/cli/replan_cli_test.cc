// hetplan replan: the best plan for what is left of a cluster, in the whole cluster's device ids.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "run_command.h"

namespace hetplan::cli {
namespace {

using testing::run_hetplan;

std::string temp(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("hetplan_replan_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::set<int> devices_of(const nlohmann::json& plan) {
  std::set<int> out;
  for (const auto& s : plan["stages"])
    for (const auto& r : s["replicas"])
      for (int d : r["devices"]) out.insert(d);
  return out;
}

TEST(ReplanCli, PlansWithoutTheRemovedDevicesInTheWholeClustersIds) {
  const std::string before = temp("before.json"), after = temp("after.json");
  auto p = run_hetplan(
      "plan --model gpt3-125m --cluster heterog-mixed --global-batch 64 "
      "--algo uneven-dp --time-limit 5 -o " +
      before);
  ASSERT_EQ(p.exit_code, 0) << p.err;
  // The plan names its model and cluster; the removed devices by id and by name.
  auto r = run_hetplan("replan --plan " + before +
                       " --remove 1,p100/0/1 --time-limit 5 --json -o " + after);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("without v100/0/1, p100/0/1 (6 of 8 devices left)"), std::string::npos)
      << r.err;
  const auto j = nlohmann::json::parse(r.out);
  std::ifstream in(after);
  const auto written = nlohmann::json::parse(in);
  EXPECT_EQ(written, j["plan"]);
  EXPECT_EQ(written["global_batch"], 64);
  EXPECT_EQ(written["cluster"], "heterog-mixed");
  const auto used = devices_of(written);
  EXPECT_FALSE(used.empty());
  EXPECT_EQ(used.count(1), 0u);
  EXPECT_EQ(used.count(7), 0u);
  EXPECT_LE(*used.rbegin(), 7);
  // It simulates on the whole cluster as the replan priced it, and `run` executes it.
  auto s = run_hetplan("simulate --json --model gpt3-125m --cluster heterog-mixed --plan " + after);
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_NEAR(nlohmann::json::parse(s.out)["iteration_time_s"].get<double>(),
              j["iteration_time_s"].get<double>(), 1e-9 * j["iteration_time_s"].get<double>());
  auto c = run_hetplan("run --check --model gpt3-125m --cluster heterog-mixed --plan " + after);
  EXPECT_EQ(c.exit_code, 0) << c.out << c.err;
  EXPECT_NE(c.out.find("runnable: " + std::to_string(used.size()) + " ranks"), std::string::npos)
      << c.out;
  EXPECT_FALSE(written.contains("precision"));
  // A run in a precision replans in it: the new plan says it, and its times are that precision's.
  auto bf16 = run_hetplan(
      "plan --model gpt3-125m --cluster heterog-mixed --global-batch 64 --algo uneven-dp "
      "--time-limit 5 --precision bf16 -o " +
      before);
  ASSERT_EQ(bf16.exit_code, 0) << bf16.err;
  auto kept = run_hetplan("replan --plan " + before + " --remove 1,p100/0/1 --time-limit 5 --json");
  ASSERT_EQ(kept.exit_code, 0) << kept.err;
  const auto k = nlohmann::json::parse(kept.out);
  EXPECT_EQ(k["plan"]["precision"], "bf16");
  EXPECT_NE(k["plan_fingerprint"], j["plan_fingerprint"]);
  EXPECT_EQ(k["iteration_time_s"], j["iteration_time_s"]);  // the zoo's bf16, costed alike
  auto fp32 = run_hetplan("replan --plan " + before +
                          " --remove 1,p100/0/1 --time-limit 5 --json --precision fp32");
  ASSERT_EQ(fp32.exit_code, 0) << fp32.err;
  EXPECT_EQ(nlohmann::json::parse(fp32.out)["plan"]["precision"], "fp32");
  std::filesystem::remove(before);
  std::filesystem::remove(after);
}

TEST(ReplanCli, BadInput) {
  const std::string file = temp("bare.json");
  {
    std::ofstream out(file);
    out << R"({"version": 1, "global_batch": 8, "stages": [{"first_layer": 0, "num_layers": 4,
             "replicas": [{"devices": [0], "batch_share": 0.5}, {"devices": [1], "batch_share": 0.5}]}]})";
  }
  const std::string mlp = " --model mlp:layers=2,hidden=64,in=32,out=10";
  const std::pair<std::string, std::string> cases[] = {
      {"replan --plan " + file + " --remove 1", "--model: expected the model (" + file},
      {"replan --plan " + file + mlp + " --remove 1", "--cluster: expected the cluster ("},
      {"replan --plan " + file + mlp + " --cluster cpu:2 --remove 0,1",
       "--remove: removing every device of cpu:2 leaves nothing to plan for"},
      {"replan --plan " + file + mlp + " --cluster cpu:2 --remove 2",
       "--remove: \"2\" is neither a device id (0 to 1) nor a device name of cpu:2"},
      {"replan --plan " + file + ".missing --remove 1", ".missing"},
  };
  for (const auto& [args, expected] : cases) {
    auto r = run_hetplan(args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_NE(r.err.find(expected), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(r.err.find("terminate"), std::string::npos) << r.err;
  }
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace hetplan::cli

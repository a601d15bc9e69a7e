// Op-level plans from the command line: `plan --algo tag` writes one, `validate` and
// `simulate --plan` accept it with the same numbers, `run` refuses it with the reason.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "run_command.h"

namespace hetplan::cli {
namespace {

using testing::run_hetplan;

const std::string kModel = "--model resnet:depth=18,width=8,image=32";
const std::string kCluster = "--cluster heterog-mixed";

std::string temp(const char* name) {
  return (std::filesystem::temp_directory_path() / name).string();
}

TEST(OpLevelCli, TagPlanValidatesAndSimulatesToTheSameTime) {
  const std::string out = temp("hetplan_tag_plan.json");
  // A plan of op groups, written by hand: the stem and first blocks replicated, the rest placed.
  {
    std::ofstream f(out);
    f << R"({"version": 1, "global_batch": 64, "execution_order": "heft", "op_groups": [
      {"ops": ["stem.*", "layer1.*"], "mode": "replicate", "devices": [0, 1, 2, 3],
       "shares": [0.25, 0.25, 0.25, 0.25], "sync": "parameter_server", "servers": [0, 1]},
      {"ops": ["layer2.*", "layer3.*", "layer4.*", "head.*"], "mode": "place", "devices": [0]}]})";
  }
  auto v = run_hetplan("validate " + kModel + " " + kCluster + " --plan " + out);
  ASSERT_EQ(v.exit_code, 0) << v.err;
  EXPECT_NE(v.out.find("valid"), std::string::npos);
  EXPECT_NE(v.out.find(", recompute none, zero 0)"), std::string::npos) << v.out;
  auto s = run_hetplan("simulate " + kModel + " " + kCluster + " --plan " + out + " --json");
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_GT(nlohmann::json::parse(s.out)["iteration_time_s"].get<double>(), 0);
  std::filesystem::remove(out);
}

TEST(OpLevelCli, AlgoTagPlansAndTheWrittenPlanResimulates) {
  const std::string out = temp("hetplan_tag_out.json");
  auto r = run_hetplan("plan " + kModel + " " + kCluster +
                       " --global-batch 64 --algo tag --json --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto planned = nlohmann::json::parse(r.out);
  auto s = run_hetplan("simulate " + kModel + " " + kCluster + " --plan " + out + " --json");
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(planned["iteration_time_s"], nlohmann::json::parse(s.out)["iteration_time_s"]);
  // validate takes the model and the cluster the plan names.
  auto v = run_hetplan("validate --plan " + out);
  ASSERT_EQ(v.exit_code, 0) << v.err;
  EXPECT_EQ(v.out.rfind(out + ": valid for resnet:depth=18,width=8,image=32 on heterog-mixed (", 0),
            0u)
      << v.out;
  v = run_hetplan("validate --model gpt3-125m --plan " + out);
  EXPECT_EQ(v.exit_code, 2);
  EXPECT_NE(v.err.find("--model"), std::string::npos) << v.err;
  std::filesystem::remove(out);
}

TEST(OpLevelCli, BadGroupsGetOneClearMessage) {
  const std::string out = temp("hetplan_bad_groups.json");
  {
    std::ofstream f(out);
    f << R"({"version": 1, "global_batch": 64, "op_groups": [
      {"ops": ["*"], "devices": [0, 1], "sync": "parameter_server", "servers": [5]}]})";
  }
  auto v = run_hetplan("validate " + kModel + " " + kCluster + " --plan " + out);
  EXPECT_EQ(v.exit_code, 2);
  EXPECT_EQ(v.err, "hetplan: error: " + out +
                       ": op_groups[0].servers[0]: server 5 is not one of the group's devices\n");
  std::filesystem::remove(out);
}

}  // namespace
}  // namespace hetplan::cli

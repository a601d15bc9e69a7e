// Golden runs of `hetplan simulate` and the listing commands.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "run_command.h"

namespace hetplan::cli {
namespace {

using testing::run_hetplan;

TEST(SimulateCli, DefaultRunPrintsASummary) {
  auto r = run_hetplan("simulate");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("iteration"), std::string::npos);
  EXPECT_NE(r.out.find("fits"), std::string::npos);
}

TEST(SimulateCli, JsonHasTheDocumentedFields) {
  auto r = run_hetplan(
      "simulate --model gpt3-1.3b --cluster dgx-a100:1 --strategy dp=4,tp=2,mbs=2,gbs=64 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const char* key :
       {"iteration_time_s", "samples_per_s", "tokens_per_s", "tflops_per_device", "mfu"})
    EXPECT_TRUE(j.contains(key)) << key;
  ASSERT_TRUE(j.contains("memory"));
  EXPECT_EQ(j["memory"]["peak_bytes_per_device"].size(), 8u);
  EXPECT_TRUE(j["memory"]["fits"].get<bool>());
  EXPECT_GT(j["memory"]["max_peak_bytes"].get<double>(), 0);
  EXPECT_GT(j["iteration_time_s"].get<double>(), 0);
  EXPECT_NEAR(j["tokens_per_s"].get<double>(), j["samples_per_s"].get<double>() * 2048, 1e-6);
}

TEST(SimulateCli, APlanFileBringsItsModelAndCluster) {
  // simulate --plan without --model and --cluster uses the plan's (not the defaults, GPT-3 1.3B on
  // dgx-a100:2, on which this plan's device 16 does not exist); the same numbers as with them
  // given; a model or cluster given that is not the plan's is refused by name.
  const auto dir = std::filesystem::temp_directory_path();
  const std::string file = (dir / ("hetplan_sim_plan_" + std::to_string(::getpid()) + ".json"));
  auto r = run_hetplan(
      "plan --model gpt3-125m --cluster a100-v100 --global-batch 32 --algo dp "
      "--out " +
      file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto alone = run_hetplan("simulate --json --plan " + file);
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  auto given = run_hetplan("simulate --json --model gpt3-125m --cluster a100-v100 --plan " + file);
  ASSERT_EQ(given.exit_code, 0) << given.err;
  EXPECT_EQ(nlohmann::json::parse(alone.out)["iteration_time_s"],
            nlohmann::json::parse(given.out)["iteration_time_s"]);
  auto text = run_hetplan("simulate --plan " + file);
  EXPECT_NE(text.out.find("model      gpt3-125m"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("cluster    a100-v100 (32 devices, 32 used)"), std::string::npos)
      << text.out;
  auto model = run_hetplan("simulate --model gpt3-350m --plan " + file);
  EXPECT_EQ(model.exit_code, 2);
  EXPECT_NE(model.err.find("--model: gpt3-350m is not the plan's model"), std::string::npos)
      << model.err;
  auto cluster = run_hetplan("simulate --cluster heterog-mixed --plan " + file);
  EXPECT_EQ(cluster.exit_code, 2);
  EXPECT_NE(cluster.err.find("--cluster: heterog-mixed is not the plan's cluster"),
            std::string::npos)
      << cluster.err;
  // A cluster file's plan names the file: simulate finds it; where the file is gone, it asks for
  // --cluster.
  const std::string yaml = std::string(HETPLAN_SOURCE_DIR) + "/data/clusters/tag-5g.yaml";
  r = run_hetplan("plan --model gpt3-125m --cluster " + yaml +
                  " --global-batch 32 --algo dp --out " + file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto own = run_hetplan("simulate --plan " + file);
  EXPECT_EQ(own.exit_code, 0) << own.err;
  EXPECT_EQ(run_hetplan("simulate --cluster " + yaml + " --plan " + file).exit_code, 0);
  auto unnamed = testing::run_with_plan_cluster_gone("simulate", file);
  EXPECT_EQ(unnamed.exit_code, 2);
  EXPECT_NE(unnamed.err.find("its cluster does not load"), std::string::npos) << unnamed.err;
  EXPECT_NE(unnamed.err.find("give --cluster explicitly"), std::string::npos) << unnamed.err;
  std::filesystem::remove(file);
}

// An out-of-memory strategy exits 1 and names what would fit; the suggestion is checked by
// simulating it, and "largest micro-batch" by simulating twice that micro-batch.
TEST(SimulateCli, AnOutOfMemoryPlanSaysWhatWouldFit) {
  auto simulate = [](const std::string& model, const std::string& strategy) {
    return run_hetplan("simulate --model " + model + " --cluster dgx-a100:1 --strategy " +
                       strategy);
  };
  auto r = simulate("gpt3-1.3b", "dp=8,mbs=16,gbs=512");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("DOES NOT FIT"), std::string::npos);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m, std::regex("it fits with mbs=(\\d+) \\((\\d+) micro")))
      << r.err;
  const int mbs = std::stoi(m[1]);
  EXPECT_EQ(std::stoi(m[2]) * mbs * 8, 512);
  EXPECT_EQ(r.err.find("recompute"), std::string::npos) << "own settings first: " << r.err;
  EXPECT_EQ(simulate("gpt3-1.3b", "dp=8,gbs=512,mbs=" + std::to_string(mbs)).exit_code, 0);
  ASSERT_LT(mbs, 16);
  EXPECT_EQ(simulate("gpt3-1.3b", "dp=8,gbs=512,mbs=" + std::to_string(2 * mbs)).exit_code, 1);

  // 13B parameters with Adam on every A100: no micro-batch fits without ZeRO.
  r = simulate("gpt3-13b", "dp=8,mbs=1,gbs=64");
  EXPECT_EQ(r.exit_code, 1);
  ASSERT_TRUE(std::regex_search(r.err, m,
                                std::regex("it fits with mbs=(\\d+) \\(\\d+ micro-batch "
                                           "rounds\\)(, recompute (\\w+))?, zero (\\d)")))
      << r.err;
  std::string fixed = "dp=8,gbs=64,mbs=" + std::string(m[1]) + ",zero=" + std::string(m[4]);
  if (m[3].matched) fixed += ",recompute=" + std::string(m[3]);
  EXPECT_EQ(simulate("gpt3-13b", fixed).exit_code, 0) << fixed;
}

// The result says how many samples each device type processes, stage by stage.
TEST(SimulateCli, SamplesPerDeviceType) {
  const std::string plan = testing::source_path("data/plans/gpt3-125m-heterog-2stage.json");
  auto r = run_hetplan("simulate --plan " + plan);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("samples    stage 0: V100-PCIE-16GB x4: 64; stage 1: GTX-1080Ti x2: 24, "
                       "P100-PCIE-16GB x2: 40 (of 64 per iteration)"),
            std::string::npos)
      << r.out;
  r = run_hetplan("simulate --json --plan " + plan);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["samples_by_device_type"].size(), 3u);
  EXPECT_EQ(j["samples_by_device_type"][2]["device_type"], "P100-PCIE-16GB");
  EXPECT_EQ(j["samples_by_device_type"][2]["stage"], 1);
  EXPECT_EQ(j["samples_by_device_type"][2]["devices"], 2);
  EXPECT_DOUBLE_EQ(j["samples_by_device_type"][2]["samples"].get<double>(), 40);
  // Uneven data parallelism on one stage: one line, the types' shares of the batch.
  r = run_hetplan("simulate --model gpt3-125m --cluster dgx-a100:1 --strategy dp=8,mbs=2,gbs=64");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("samples    A100-SXM4-80GB x8: 64 (of 64 per iteration)"), std::string::npos)
      << r.out;
}

TEST(SimulateCli, WritesAChromeTrace) {
  const std::string trace =
      (std::filesystem::temp_directory_path() / "hetplan_cli_trace.json").string();
  auto r = run_hetplan(
      "simulate --model gpt3-125m --cluster dgx-a100:1 --strategy pp=2,dp=4,gbs=32 --trace " +
      trace);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(testing::slurp(trace));
  ASSERT_TRUE(j.contains("traceEvents"));
  int complete = 0;
  for (const auto& e : j["traceEvents"]) complete += e["ph"] == "X";
  EXPECT_GT(complete, 0);
  std::filesystem::remove(trace);
}

TEST(SimulateCli, ListingsWork) {
  auto models = run_hetplan("models");
  EXPECT_EQ(models.exit_code, 0);
  EXPECT_NE(models.out.find("llama3-405b"), std::string::npos);
  auto one = run_hetplan("models llama2-7b --json");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_GT(nlohmann::json::parse(one.out)["parameters"].get<double>(), 6.6e9);
  auto devices = run_hetplan("devices");
  EXPECT_EQ(devices.exit_code, 0);
  EXPECT_NE(devices.out.find("MI300X"), std::string::npos);
  EXPECT_NE(devices.out.find("tf32"), std::string::npos);
  auto catalog = run_hetplan("devices --json");
  ASSERT_EQ(catalog.exit_code, 0) << catalog.err;
  int checked = 0;
  for (const auto& d : nlohmann::json::parse(catalog.out)) {
    if (d["name"] == "H100-SXM5-80GB") {
      EXPECT_EQ(d["peak_tf32_flops"].get<double>(), 494.7e12);
      ++checked;
    }
    if (d["name"] == "V100-SXM2-32GB") {
      EXPECT_EQ(d["peak_tf32_flops"].get<double>(), 0);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2);
  auto clusters = run_hetplan("clusters");
  EXPECT_EQ(clusters.exit_code, 0);
  EXPECT_NE(clusters.out.find("dgx-a100"), std::string::npos);
  auto help = run_hetplan("simulate --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--strategy"), std::string::npos);
}

TEST(SimulateCli, CheckClusterPrintsASummary) {
  auto r =
      run_hetplan("check-cluster " + testing::source_path("tests/cli/data/issue_example.yaml"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("A100-SXM4-80GB"), std::string::npos);
  EXPECT_NE(r.out.find("V100-SXM2-32GB"), std::string::npos);
}

}  // namespace
}  // namespace hetplan::cli

// Golden runs of `hetplan simulate` and the listing commands.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

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

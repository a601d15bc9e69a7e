// hetplan plan and hetplan pareto from the command line.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "run_command.h"

namespace hetplan::cli {
namespace {

using testing::run_hetplan;
using testing::source_path;

const std::string kSmall =
    "--model gpt:layers=4,hidden=1024,heads=16,seq=512,vocab=32000 --cluster " +
    source_path("tests/search/data/two-kinds-8.yaml") + " --global-batch 64";

TEST(PlanCli, JsonHasTheAnswerTheBaselinesAndThePlan) {
  auto r = run_hetplan("plan " + kSmall + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"iteration_time_s", "samples_per_s", "search_time_s", "memory", "plan",
                          "baselines", "plan_fingerprint", "timed_out"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_TRUE(j["memory"]["fits"].template get<bool>());
  ASSERT_EQ(j["baselines"].size(), 3u);
  EXPECT_EQ(j["baselines"][0]["name"], "even-dp");
  EXPECT_EQ(j["baselines"][1]["name"], "proportional-dp");
  EXPECT_EQ(j["baselines"][2]["name"], "megatron");
  for (const auto& b : j["baselines"]) {
    EXPECT_TRUE(b.contains("fits"));
    if (b["fits"].template get<bool>()) {
      EXPECT_LE(j["iteration_time_s"].get<double>(), b["iteration_time_s"].get<double>());
    }
  }
}

TEST(PlanCli, AWrittenPlanSimulatesToTheSameNumbers) {
  const auto out = (std::filesystem::temp_directory_path() / "hetplan_plan_cli_plan.json").string();
  auto r = run_hetplan("plan " + kSmall + " --json --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto planned = nlohmann::json::parse(r.out);
  auto s = run_hetplan(
      "simulate --model gpt:layers=4,hidden=1024,heads=16,seq=512,vocab=32000 "
      "--cluster " +
      source_path("tests/search/data/two-kinds-8.yaml") + " --plan " + out + " --json");
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const auto simulated = nlohmann::json::parse(s.out);
  EXPECT_EQ(planned["iteration_time_s"], simulated["iteration_time_s"]);
  EXPECT_EQ(planned["memory"], simulated["memory"]);
  std::filesystem::remove(out);
}

TEST(PlanCli, TheSameInputsGiveTheSameFingerprint) {
  auto a = run_hetplan("plan " + kSmall + " --json");
  auto b = run_hetplan("plan " + kSmall + " --json --threads 2");
  ASSERT_EQ(a.exit_code, 0);
  ASSERT_EQ(b.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(a.out)["plan_fingerprint"],
            nlohmann::json::parse(b.out)["plan_fingerprint"]);
}

TEST(PlanCli, SummaryNamesThePlannerAndTheBaselines) {
  auto r = run_hetplan("plan " + kSmall);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* part : {"planner", "even-dp", "proportional-dp", "megatron", "speed-up"})
    EXPECT_NE(r.out.find(part), std::string::npos) << part << " in\n" << r.out;
}

TEST(PlanCli, BadArgumentsAndModelsThatCannotFit) {
  auto algo = run_hetplan("plan " + kSmall + " --algo magic");
  EXPECT_EQ(algo.exit_code, 2);
  EXPECT_NE(algo.err.find("--algo: expected one of auto|dp|megatron|uneven-dp|hap|pipeline|ft"),
            std::string::npos)
      << algo.err;
  auto obj = run_hetplan("plan " + kSmall + " --objective speed");
  EXPECT_EQ(obj.exit_code, 2);
  EXPECT_NE(obj.err.find("--objective: expected time|memory"), std::string::npos) << obj.err;
  auto batch = run_hetplan("plan " + kSmall + " --global-batch 0");
  EXPECT_EQ(batch.exit_code, 2);
  EXPECT_NE(batch.err.find("--global-batch"), std::string::npos) << batch.err;
  auto big = run_hetplan("plan --model gpt3-175b --cluster heterog-mixed --global-batch 16");
  EXPECT_EQ(big.exit_code, 2);
  EXPECT_EQ(big.out, "");
  EXPECT_NE(big.err.find("does not fit: the plan closest to fitting"), std::string::npos)
      << big.err;
  EXPECT_NE(big.err.find("GiB more on device"), std::string::npos) << big.err;
}

TEST(ParetoCli, FrontierPointsAreNonDominated) {
  auto r = run_hetplan("pareto " + kSmall + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& pts = j["points"];
  ASSERT_GE(pts.size(), 2u);
  for (std::size_t i = 0; i < pts.size(); ++i) {
    EXPECT_TRUE(pts[i].contains("plan"));
    if (i == 0) continue;
    // Sorted by time; each slower point must use less memory.
    EXPECT_GT(pts[i]["iteration_time_s"].get<double>(),
              pts[i - 1]["iteration_time_s"].get<double>());
    EXPECT_LT(pts[i]["max_peak_bytes"].get<double>(), pts[i - 1]["max_peak_bytes"].get<double>());
  }
  // The fastest point is as fast as the time-optimal pipeline plan.
  auto p = run_hetplan("plan " + kSmall + " --algo pipeline --json");
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_LE(pts[0]["iteration_time_s"].get<double>(),
            nlohmann::json::parse(p.out)["iteration_time_s"].get<double>() * 1.0 + 1e-12);
}

}  // namespace
}  // namespace hetplan::cli

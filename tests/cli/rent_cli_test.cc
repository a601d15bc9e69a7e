// hetplan plan with prices: --objective cost, --budget-per-hour, --max-iteration-time, the
// price line of plan and simulate, and the report's time against money.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "run_command.h"

namespace hetplan::cli {
namespace {

using testing::run_hetplan;
using testing::slurp;
using testing::source_path;

const std::string kRent = "--model gpt:layers=2,hidden=512,heads=8,seq=256,vocab=8000 --cluster " +
                          source_path("tests/cli/data/rent.yaml") +
                          " --global-batch 32 --algo pipeline";

// Devices of `type` the plan of a `plan --json` result uses, by its samples per device type.
int devices_of(const nlohmann::json& j, const std::string& type) {
  int n = 0;
  for (const auto& t : j["samples_by_device_type"])
    if (t["device_type"] == type) n += t["devices"].get<int>();
  return n;
}

TEST(RentCli, CostUsesFewerDearGpusThanTimeAndSaysWhy) {
  auto time = run_hetplan("plan " + kRent + " --json");
  ASSERT_EQ(time.exit_code, 0) << time.err;
  auto cost = run_hetplan("plan " + kRent + " --objective cost --json");
  ASSERT_EQ(cost.exit_code, 0) << cost.err;
  const auto t = nlohmann::json::parse(time.out), c = nlohmann::json::parse(cost.out);
  EXPECT_LT(devices_of(c, "H100-SXM5-80GB"), devices_of(t, "H100-SXM5-80GB"));
  // Both are priced, and the cheaper one costs less per iteration but takes longer.
  const double t_usd = t["price"]["usd_per_iteration"], c_usd = c["price"]["usd_per_iteration"];
  EXPECT_LT(c_usd, t_usd);
  EXPECT_GT(c["iteration_time_s"].get<double>(), t["iteration_time_s"].get<double>());
  // The subsets it searched: the chosen one is the cheapest that fits, the fastest is marked.
  const auto& rent = c["rent"];
  ASSERT_TRUE(rent["subsets"].is_array());
  const auto& chosen = rent["subsets"][rent["chosen"].get<int>()];
  EXPECT_NEAR(chosen["usd_per_iteration"].get<double>(), c_usd, 1e-12);
  for (const auto& s : rent["subsets"])
    if (s["fits"].get<bool>()) {
      EXPECT_GE(s["usd_per_iteration"].get<double>(), c_usd);
    }
  const auto& fastest = rent["subsets"][rent["fastest"].get<int>()];
  EXPECT_LE(fastest["iteration_time_s"].get<double>(), t["iteration_time_s"].get<double>() + 1e-12);
  // throughput-per-dollar asks the same question for a fixed batch.
  auto tpd = run_hetplan("plan " + kRent + " --objective throughput-per-dollar --json");
  ASSERT_EQ(tpd.exit_code, 0) << tpd.err;
  EXPECT_EQ(nlohmann::json::parse(tpd.out)["plan_fingerprint"], c["plan_fingerprint"]);

  auto text = run_hetplan("plan " + kRent + " --objective cost");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  for (const char* want : {"objective  cost: ", "samples per dollar", "fastest    ", "unused     ",
                           "fewer dollars per iteration than the fastest plan", "chosen",
                           "devices offered", "price      $"})
    EXPECT_NE(text.out.find(want), std::string::npos) << want << "\n" << text.out;
}

TEST(RentCli, BudgetKeepsThePriceAndTheReportShowsBothPoints) {
  const auto report = std::filesystem::temp_directory_path() /
                      ("hetplan_rent_report_" + std::to_string(::getpid()) + ".html");
  auto r =
      run_hetplan("plan " + kRent + " --budget-per-hour 13 --json --report " + report.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_LE(j["price"]["usd_per_hour"].get<double>(), 13.0);
  auto text = run_hetplan("plan " + kRent + " --budget-per-hour 13");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("every device together costs $48.80 per hour, over the budget of $13.00"),
            std::string::npos)
      << text.out;
  EXPECT_EQ(j["rent"]["objective"], "time");
  EXPECT_EQ(j["rent"]["budget_per_hour_usd"], 13.0);
  const std::string html = slurp(report.string());
  std::filesystem::remove(report);
  EXPECT_NE(html.find("Time against money"), std::string::npos);
  EXPECT_NE(html.find("US dollars per iteration"), std::string::npos);
  EXPECT_NE(html.find(">chosen<"), std::string::npos);
  EXPECT_NE(html.find("over the budget"), std::string::npos);
}

TEST(RentCli, BadPricesAndLimitsAreOneClearError) {
  struct Case {
    std::string args, message;
  } cases[] = {
      {kRent + " --objective dollars",
       "--objective: expected time|memory|cost|throughput-per-dollar"},
      {kRent + " --budget-per-hour -3", "--budget-per-hour: expected US dollars per hour"},
      {kRent + " --max-iteration-time -1", "--max-iteration-time: expected seconds"},
      {kRent + " --objective memory --budget-per-hour 10", "--objective memory: "},
      {kRent + " --budget-per-hour 0.1",
       "no devices of rent are within the budget of $0.1 per hour"},
      {kRent + " --objective cost --max-iteration-time 1e-9",
       "no devices of rent can reach an iteration time of 1e-09 s"},
      {"--model gpt:layers=2,hidden=512,heads=8,seq=256,vocab=8000 --cluster heterog-mixed "
       "--global-batch 32 --algo pipeline --objective cost",
       "no price for GTX-1080Ti"},
  };
  for (const auto& k : cases) {
    auto r = run_hetplan("plan " + k.args);
    EXPECT_EQ(r.exit_code, 2) << k.args << "\n" << r.err;
    EXPECT_NE(r.err.find(k.message), std::string::npos) << k.args << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST(RentCli, SimulateAndClustersShowPricesAndAliases) {
  auto r = run_hetplan(
      "simulate --model gpt:layers=2,hidden=512,heads=8,seq=256,vocab=8000 "
      "--cluster " +
      source_path("tests/cli/data/rent.yaml") + " --strategy dp=8,gbs=32");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 4 x $12 + 4 x $0.20 per hour.
  EXPECT_NE(r.out.find("per iteration ($48.80 per hour for 8 devices)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("'h100' is taken to be H100-SXM5-80GB"), std::string::npos) << r.out;
  auto j = run_hetplan(
      "simulate --model gpt:layers=2,hidden=512,heads=8,seq=256,vocab=8000 "
      "--cluster " +
      source_path("tests/cli/data/rent.yaml") + " --strategy dp=8,gbs=32 --json");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto sim = nlohmann::json::parse(j.out);
  EXPECT_EQ(sim["device_type_aliases"]["h100"], "H100-SXM5-80GB");
  EXPECT_NEAR(sim["price"]["usd_per_hour"].get<double>(), 48.8, 1e-9);
  EXPECT_NEAR(sim["price"]["usd_per_iteration"].get<double>(),
              48.8 * sim["iteration_time_s"].get<double>() / 3600, 1e-12);
  auto v = run_hetplan("check-cluster " + source_path("tests/cli/data/rent.yaml"));
  ASSERT_EQ(v.exit_code, 0) << v.err;
  EXPECT_NE(v.out.find("'h100' is taken to be H100-SXM5-80GB"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("price: $48.80 per hour"), std::string::npos) << v.out;
  auto d = run_hetplan("devices --json");
  ASSERT_EQ(d.exit_code, 0);
  bool seen = false;
  for (const auto& t : nlohmann::json::parse(d.out))
    if (t["name"] == "H100-SXM5-80GB") {
      seen = true;
      EXPECT_EQ(t["price_per_hour_usd"], 6.88);
    }
  EXPECT_TRUE(seen);
}

}  // namespace
}  // namespace hetplan::cli

// DLCP's gradient transport through the command line: the judged scenario (data parallelism on a
// leaf-spine cluster of unlike GPUs with 30% cross traffic), the lossy report, the planner's
// --dlcp, and the warnings and errors of bad settings.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "run_command.h"

namespace hetplan::cli {
namespace {

using testing::run_hetplan;

nlohmann::json simulate(const std::string& model, const std::string& strategy) {
  auto r = run_hetplan("simulate --model " + model + " --cluster leaf-spine-mixed --strategy " +
                       strategy + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json{};
}

double time_of(const nlohmann::json& j) { return j.value("iteration_time_s", 0.0); }

// GPT-3 1.3B and ResNet-50 over all 32 GPUs (16 A100 + 16 V100, 4 leaves, 2 spines at 2:1).
struct Case {
  const char* model;
  const char* base;
};
const Case kCases[] = {{"gpt3-1.3b", "dp=32,gbs=256,recompute=full"},
                       {"resnet50", "dp=32,gbs=1024"}};

TEST(DlcpCli, LayerPriorityBeatsNoneAndSprayBeatsCollidingEcmp) {
  for (const Case& c : kCases) {
    const std::string base = c.base;
    const double none = time_of(simulate(c.model, base));
    const double layer = time_of(simulate(c.model, base + ",grad_priority=layer"));
    const double spray = time_of(simulate(c.model, base + ",multipath=spray"));
    const double both = time_of(simulate(c.model, base + ",grad_priority=layer,multipath=spray"));
    ASSERT_GT(none, 0) << c.model;
    EXPECT_LT(layer, none) << c.model;
    EXPECT_LT(spray, none) << c.model;
    EXPECT_LT(both, layer) << c.model;
    EXPECT_LT(both, spray) << c.model;
  }
}

TEST(DlcpCli, ALossBoundDropsWithinItAndTheMagnitudeOrderDropsLittleNorm) {
  const std::string base = std::string(kCases[1].base) + ",multipath=spray";
  const double lossless = time_of(simulate("resnet50", base + ",grad_priority=layer"));
  const auto j =
      simulate("resnet50", base + ",grad_priority=layer+magnitude,loss_bound=0.05");
  ASSERT_TRUE(j.contains("gradients"));
  const auto& g = j["gradients"];
  EXPECT_EQ(g["grad_priority"], "layer+magnitude");
  EXPECT_EQ(g["loss_bound"], 0.05);
  EXPECT_GT(g["dropped_fraction"].get<double>(), 0);
  EXPECT_LE(g["dropped_fraction"].get<double>(), 0.05 + 1e-12);
  EXPECT_LT(g["dropped_norm_fraction"].get<double>(), g["dropped_fraction"].get<double>());
  EXPECT_LT(time_of(j), lossless);
  // The summary says it in words.
  auto r = run_hetplan("simulate --model resnet50 --cluster leaf-spine-mixed --strategy " + base +
                       ",grad_priority=layer+magnitude,loss_bound=0.05");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("gradients  priority layer+magnitude, multipath spray, loss bound 5%: "
                       "dropped "),
            std::string::npos)
      << r.out;
}

TEST(DlcpCli, PlanTriesTheTransportAndTheWrittenPlanResimulates) {
  const std::string out =
      (std::filesystem::temp_directory_path() / ("hetplan_dlcp_" + std::to_string(getpid())))
          .string();
  auto r = run_hetplan("plan --model resnet50 --cluster leaf-spine-mixed --global-batch 1024 "
                       "--algo uneven-dp --dlcp --json --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("plain_transport_iteration_time_s")) << r.out;
  EXPECT_LT(j["iteration_time_s"].get<double>(),
            j["plain_transport_iteration_time_s"].get<double>());
  EXPECT_NE(j["plan"].value("grad_priority", "none"), "none");
  auto again =
      run_hetplan("simulate --model resnet50 --cluster leaf-spine-mixed --json --plan " + out);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(again.out)["iteration_time_s"].get<double>(),
                   j["iteration_time_s"].get<double>());
  std::filesystem::remove(out);
  // Without --dlcp the plan is the plain one; a loss bound only with --allow-lossy-sync.
  auto plain = run_hetplan("plan --model resnet50 --cluster leaf-spine-mixed --global-batch 1024 "
                           "--algo uneven-dp --json");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_FALSE(nlohmann::json::parse(plain.out)["plan"].contains("grad_priority"));
  EXPECT_FALSE(j["plan"].contains("loss_bound"));
}

TEST(DlcpCli, BadSettingsGetOneClearMessage) {
  auto spray = run_hetplan(
      "simulate --model gpt3-125m --cluster dgx-a100:2 --strategy dp=16,multipath=spray");
  EXPECT_EQ(spray.exit_code, 0) << spray.err;
  EXPECT_NE(spray.err.find("hetplan: warning: --strategy: multipath=spray: cluster dgx-a100:2 "
                           "has one route between every two devices"),
            std::string::npos)
      << spray.err;
  auto chunk = run_hetplan(
      "simulate --model gpt3-125m --cluster dgx-a100:1 --strategy dp=8,grad_priority=layer "
      "--grad-chunk 1B");
  EXPECT_NE(chunk.exit_code, 0);
  EXPECT_EQ(chunk.err,
            "hetplan: error: --grad-chunk: expected a size from 4KiB to 1GiB (e.g. 256KiB), got "
            "'1B'\n");
  auto bound = run_hetplan(
      "simulate --model gpt3-125m --cluster dgx-a100:1 --strategy dp=8,grad_priority=layer,"
      "loss_bound=0.2");
  EXPECT_NE(bound.exit_code, 0);
  EXPECT_NE(bound.err.find("loss_bound=0.2: expected a number in [0, 0.1]"), std::string::npos)
      << bound.err;
  auto lossy = run_hetplan(
      "plan --model resnet50 --cluster leaf-spine-mixed --allow-lossy-sync 0.5");
  EXPECT_NE(lossy.exit_code, 0);
  EXPECT_EQ(lossy.err,
            "hetplan: error: --allow-lossy-sync: expected a fraction in [0, 0.1] of the gradient "
            "bytes, got 0.5\n");
}

}  // namespace
}  // namespace hetplan::cli

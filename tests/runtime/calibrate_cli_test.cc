// hetplan calibrate: a profile of every op kind, which the cost model reads back.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "../cli/run_command.h"
#include "hetplan/cost/compute_cost.h"

namespace hetplan::runtime {
namespace {

using cli::testing::run_hetplan;

TEST(CalibrateCli, WritesAProfileTheSimulatorReads) {
  const auto file = std::filesystem::temp_directory_path() /
                    ("hetplan_calibrate_" + std::to_string(::getpid()) + ".json");
  auto r = run_hetplan("calibrate --sizes 3 --seconds-per-point 0.001 --out " + file.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto prof = cost::read_calibration_profile(file.string());
  ASSERT_TRUE(prof) << prof.error().message;
  ASSERT_EQ(prof->points.count("cpu"), 1u);
  EXPECT_EQ(prof->points.at("cpu").size(), 12u);  // every op kind
  for (const auto& [kind, pts] : prof->points.at("cpu")) {
    EXPECT_EQ(pts.size(), 3u) << model::to_string(kind);
    for (const auto& p : pts) EXPECT_GT(p.seconds, 0);
  }
  // A larger GEMM takes longer than the smallest.
  const auto& mm = prof->points.at("cpu").at(model::OpKind::matmul);
  EXPECT_GT(mm.back().seconds, mm.front().seconds);
  // All-reduces between two worker processes, 64 B to 4 MiB.
  ASSERT_EQ(prof->messaging.count("cpu"), 1u);
  const auto& msgs = prof->messaging.at("cpu");
  ASSERT_EQ(msgs.size(), 5u);
  EXPECT_EQ(msgs.front().bytes, 64);
  EXPECT_EQ(msgs.back().bytes, 4 << 20);
  for (const auto& p : msgs) EXPECT_GT(p.seconds, 0);
  // Adam steps of 1 Ki, 4 Ki and 16 Ki parameters.
  ASSERT_EQ(prof->optimizer.count("cpu"), 1u);
  const auto& steps = prof->optimizer.at("cpu");
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps.front().bytes, 1024);
  EXPECT_EQ(steps.back().bytes, 16384);
  for (const auto& p : steps) EXPECT_GT(p.seconds, 0);
  // The host's time per op of a pass: microseconds, a backward op's more than nothing.
  ASSERT_EQ(prof->host.count("cpu"), 1u);
  const cost::HostOpTimes host = prof->host.at("cpu");
  EXPECT_GT(host.forward_seconds, 1e-7);
  EXPECT_LT(host.forward_seconds, 1e-3);
  EXPECT_GT(host.backward_seconds, 1e-7);
  EXPECT_LT(host.backward_seconds, 1e-3);

  // The simulator prices a CPU run with it, and differently from the roofline.
  const std::string sim =
      "simulate --model mlp:layers=2,hidden=256,in=64,out=10,dtype=fp32 --cluster cpu:2 "
      "--strategy dp=2,gbs=64 --json";
  auto with = run_hetplan(sim + " --calibration " + file.string());
  auto without = run_hetplan(sim);
  ASSERT_EQ(with.exit_code, 0) << with.err;
  ASSERT_EQ(without.exit_code, 0) << without.err;
  const double t1 = nlohmann::json::parse(with.out)["iteration_time_s"].get<double>();
  const double t0 = nlohmann::json::parse(without.out)["iteration_time_s"].get<double>();
  EXPECT_GT(t1, 0);
  EXPECT_NE(t1, t0);
  std::filesystem::remove(file);
}

TEST(CalibrateCli, SkipsMessagingWhenAsked) {
  const auto file = std::filesystem::temp_directory_path() /
                    ("hetplan_calibrate_nomsg_" + std::to_string(::getpid()) + ".json");
  auto r = run_hetplan("calibrate --sizes 2 --seconds-per-point 0.001 --no-messaging --out " +
                       file.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto prof = cost::read_calibration_profile(file.string());
  std::filesystem::remove(file);
  ASSERT_TRUE(prof) << prof.error().message;
  EXPECT_TRUE(prof->messaging.empty());
  r = run_hetplan("calibrate --sizes 2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--out: expected the profile to write"), std::string::npos) << r.err;
}

TEST(CalibrateCli, BadArgumentsAreNamed) {
  const std::string out = (std::filesystem::temp_directory_path() /
                           ("hetplan_bad_calibrate_" + std::to_string(::getpid()) + ".json"))
                              .string();
  auto r = run_hetplan("calibrate --device tpu --out " + out);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--device: expected cpu or cuda, got \"tpu\""), std::string::npos) << r.err;
  r = run_hetplan("calibrate --device-type XYZ-9000 --out " + out);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--device-type: \"XYZ-9000\" is not in the device catalog"),
            std::string::npos)
      << r.err;
  r = run_hetplan("calibrate --sizes 1 --out " + out);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--sizes: expected 2 to 10"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace hetplan::runtime

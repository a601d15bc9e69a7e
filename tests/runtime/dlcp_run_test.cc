// hetplan run with DLCP's transport (chunk_transport.h): gradients in prioritised chunks over the
// runtime's own connections give the losses of one process (no loss bound) in both forms; under a
// loss bound the dropped share stays within it and the run still learns; plans the transport does
// not carry are refused with the reason.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../cli/run_command.h"

namespace hetplan::runtime {
namespace {

using cli::testing::run_hetplan;

constexpr const char* kGpt = "gpt:layers=2,hidden=64,heads=4,seq=32,vocab=256";

nlohmann::json run_json(const std::string& args) {
  auto r = run_hetplan("run --json --steps 20 --model " + std::string(kGpt) + " " + args);
  EXPECT_EQ(r.exit_code, 0) << args << ":\n" << r.err;
  if (r.exit_code != 0) return {};
  return nlohmann::json::parse(r.out);
}

std::vector<double> losses_of(const nlohmann::json& j) {
  return j.is_null() ? std::vector<double>{} : j["losses"].get<std::vector<double>>();
}

std::string write_file(const std::string& name, const std::string& text) {
  const auto file = std::filesystem::temp_directory_path() /
                    ("hetplan_" + name + "_" + std::to_string(::getpid()) + ".json");
  std::ofstream(file) << text;
  return file.string();
}

void expect_same(const std::vector<double>& a, const std::vector<double>& b, const char* what) {
  ASSERT_EQ(a.size(), 20u) << what;
  ASSERT_EQ(b.size(), 20u) << what;
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(a[i], b[i], 1e-4 * std::abs(a[i])) << what << ", step " << i;
}

TEST(DlcpRun, WithoutALossBoundTheTransportTrainsAsOneProcess) {
  const auto one = losses_of(run_json("--strategy dp=1,gbs=12"));
  // Ring all-reduce per chunk, chunks of 4 KiB so that the model's layers cut into many.
  for (const char* priority : {"layer", "layer+magnitude"})
    expect_same(one,
                losses_of(run_json(std::string("--nprocs 2 --grad-chunk 4KiB --strategy "
                                               "dp=2,gbs=12,grad_priority=") +
                                   priority)),
                priority);
  // Parameter servers (every grad_sync rule), three uneven replicas, no priority.
  const auto ps = write_file("dlcp_ps", R"({"version": 1, "global_batch": 12,
    "num_microbatches": 2, "grad_sync": [{"ops": "*", "method": "parameter_server"}],
    "stages": [{"first_layer": 0, "num_layers": 4, "replicas": [
      {"devices": [0], "batch_share": 0.5}, {"devices": [1], "batch_share": 0.25},
      {"devices": [2], "batch_share": 0.25}]}]})");
  expect_same(one, losses_of(run_json("--nprocs 3 --grad-chunk 4KiB --plan " + ps)),
              "parameter servers");
  std::filesystem::remove(ps);
}

TEST(DlcpRun, UnderALossBoundTheDroppedShareStaysWithinIt) {
  const auto lossless = losses_of(run_json("--strategy dp=1,gbs=12"));
  // The bound's worst case: every droppable chunk skipped, every step.
  const auto j = run_json(
      "--nprocs 2 --grad-chunk 4KiB --grad-drop always --strategy "
      "dp=2,gbs=12,grad_priority=layer+magnitude,loss_bound=0.05");
  ASSERT_FALSE(j.is_null());
  for (const auto& rank : j["ranks"]) {
    const double dropped = rank["grad_dropped_fraction"], norm = rank["grad_dropped_norm_fraction"];
    EXPECT_GT(dropped, 0.02);  // 4 KiB chunks fit well under 5% of 115 K parameters
    EXPECT_LE(dropped, 0.05 + 1e-12);
    EXPECT_GT(norm, 0.0);
    EXPECT_LT(norm, dropped);  // the smallest chunks go: less of the norm than of the elements
  }
  const auto lossy = losses_of(j);
  ASSERT_EQ(lossy.size(), 20u);
  EXPECT_LT(lossy.back(), lossy.front());  // it learns
  EXPECT_NE(lossy, lossless);              // and something was dropped
  EXPECT_NEAR(lossy.back(), lossless.back(), 0.02 * lossless.back());
}

TEST(DlcpRun, PlansTheTransportDoesNotCarryAreRefused) {
  // Replicas of unlike tensor-parallel degrees sum gradients in the whole layout.
  const auto unlike = write_file("dlcp_unlike", R"({"version": 1, "global_batch": 12,
    "grad_priority": "layer", "loss_bound": 0.05,
    "stages": [{"first_layer": 0, "num_layers": 4, "replicas": [
      {"devices": [0, 1], "batch_share": 0.5}, {"devices": [2], "batch_share": 0.5}]}]})");
  auto r = run_hetplan("run --check --cluster dgx-a100:1 --model " + std::string(kGpt) +
                       " --plan " + unlike);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE((r.out + r.err).find("loss_bound: 0.05: stages[0]: replicas that split layers "
                                 "differently"),
            std::string::npos)
      << r.out << r.err;
  std::filesystem::remove(unlike);
  r = run_hetplan("run --model " + std::string(kGpt) + " --grad-chunk 1KiB --strategy dp=1,gbs=4");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--grad-chunk: expected a size from 4KiB to 1GiB"), std::string::npos)
      << r.err;
  r = run_hetplan("run --model " + std::string(kGpt) + " --grad-drop sometimes --strategy dp=1,gbs=4");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--grad-drop"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace hetplan::runtime

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "hetplan/cost/compute_cost.h"

namespace hetplan::cost {
namespace {

cluster::DeviceType fake_device(const std::string& name) {
  cluster::DeviceType t;
  t.name = name;
  t.peak_fp16 = FlopsPerSecond(100e12);
  t.peak_fp32 = FlopsPerSecond(10e12);
  t.memory_bandwidth = BytesPerSecond(1e12);
  return t;
}

const char* kProfile = R"({
  "version": 2, "device": "FAKE-GPU", "measured_on": "2026-11-22", "notes": "bench",
  "entries": [
    {"op_kind": "matmul", "points": [{"flops": 1e11, "bytes": 1e8, "seconds": 5e-4},
                                     {"flops": 1e9, "bytes": 1e6, "seconds": 1e-5}]},
    {"device": "OTHER-GPU", "op_kind": "layernorm", "points": [{"bytes": 1e6, "seconds": 2e-6}]}
  ]
})";

model::TrainOp train_op(model::OpKind kind, double flops, double bytes) {
  model::TrainOp op;
  op.kind = kind;
  op.flops = flops;
  op.bytes = bytes;
  return op;
}

std::string temp_file(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << text;
  return path.string();
}

TEST(CalibrationProfile, ParsesAndSortsPoints) {
  auto prof = parse_calibration_profile(kProfile, "prof.json");
  ASSERT_TRUE(prof.ok()) << prof.error().message;
  EXPECT_EQ(prof->device, "FAKE-GPU");
  EXPECT_EQ(prof->measured_on, "2026-11-22");
  const auto& pts = prof->points.at("FAKE-GPU").at(model::OpKind::matmul);
  ASSERT_EQ(pts.size(), 2u);
  EXPECT_EQ(pts[0].flops, 1e9);
  EXPECT_EQ(prof->points.at("OTHER-GPU").at(model::OpKind::layernorm).size(), 1u);
}

TEST(CalibrationProfile, InterpolatesRateLogLinearlyAndClamps) {
  auto prof = parse_calibration_profile(kProfile, "prof.json");
  ASSERT_TRUE(prof.ok());
  const auto& pts = prof->points.at("FAKE-GPU").at(model::OpKind::matmul);
  // Rates 1e14 at 1e9 FLOPs and 2e14 at 1e11: halfway in log size gives 1.5e14.
  EXPECT_DOUBLE_EQ(interpolate_calibrated_time(pts, model::OpKind::matmul, 1e10, 0).value,
                   1e10 / 1.5e14);
  // Below the smallest point: its time (1e9 FLOPs at 1e14 FLOP/s), a kernel's fixed cost; a third
  // of it for a pass that launches a third of the point's kernels, but no less than at its rate.
  EXPECT_DOUBLE_EQ(interpolate_calibrated_time(pts, model::OpKind::matmul, 1e8, 0).value,
                   1e9 / 1e14);
  EXPECT_DOUBLE_EQ(interpolate_calibrated_time(pts, model::OpKind::matmul, 1e8, 0, 1.0 / 3).value,
                   1e9 / 1e14 / 3);
  EXPECT_DOUBLE_EQ(interpolate_calibrated_time(pts, model::OpKind::matmul, 5e8, 0, 0.1).value,
                   5e8 / 1e14);
  EXPECT_DOUBLE_EQ(interpolate_calibrated_time(pts, model::OpKind::matmul, 1e12, 0).value,
                   1e12 / 2e14);
  EXPECT_DOUBLE_EQ(interpolate_calibrated_time(pts, model::OpKind::matmul, 1e11, 0).value, 5e-4);
}

TEST(CalibrationProfile, OverridesRooflineOnlyForItsDeviceAndKind) {
  auto prof = parse_calibration_profile(kProfile, "prof.json");
  ASSERT_TRUE(prof.ok());
  auto shared = std::make_shared<const CalibrationProfile>(*prof);
  const ComputeCostModel calibrated(ComputeParams::defaults(), shared);
  const ComputeCostModel roofline(ComputeParams::defaults());
  const auto gemm = train_op(model::OpKind::matmul, 1e9, 1e3);
  // 2 samples: a 2e9-FLOP call, rate 1e14 + 1e14 * log(2)/log(100).
  const double rate = 1e14 * (1 + std::log(2.0) / std::log(100.0));
  EXPECT_DOUBLE_EQ(
      calibrated.op_time(fake_device("FAKE-GPU"), gemm, 2, 1, model::DType::bf16).value,
      2e9 / rate);
  EXPECT_EQ(calibrated.op_time(fake_device("NEW-GPU"), gemm, 2, 1, model::DType::bf16),
            roofline.op_time(fake_device("NEW-GPU"), gemm, 2, 1, model::DType::bf16));
  const auto norm = train_op(model::OpKind::layernorm, 1e3, 4e6);
  EXPECT_EQ(calibrated.op_time(fake_device("FAKE-GPU"), norm, 1, 1, model::DType::bf16),
            roofline.op_time(fake_device("FAKE-GPU"), norm, 1, 1, model::DType::bf16));
  // Non-GEMM kinds are keyed by bytes: 4e6 bytes at the single point's 5e11 B/s.
  EXPECT_DOUBLE_EQ(
      calibrated.op_time(fake_device("OTHER-GPU"), norm, 1, 1, model::DType::bf16).value,
      4e6 / 5e11);
}

// A GEMM that moves many bytes for its FLOPs (a matrix-vector product's weights) is no faster than
// the device's measured streaming rate (its elementwise points) moves them.
TEST(CalibrationProfile, SkinnyGemmsAreBoundByTheMeasuredStreamingRate) {
  const char* text = R"({"version": 2, "device": "FAKE-CPU", "entries": [
    {"op_kind": "matmul", "points": [{"flops": 1e6, "seconds": 1e-5}, {"flops": 1e9, "seconds": 1e-2}]},
    {"op_kind": "elementwise", "points": [{"bytes": 1e4, "seconds": 2e-6}, {"bytes": 1e8, "seconds": 1e-2}]}]})";
  auto prof = parse_calibration_profile(text, "prof.json");
  ASSERT_TRUE(prof.ok()) << prof.error().message;
  const ComputeCostModel calibrated(ComputeParams::defaults(),
                                    std::make_shared<const CalibrationProfile>(*prof));
  const auto dev = fake_device("FAKE-CPU");
  // 1e8 FLOPs at 1e11 FLOP/s take 1e-3 s; its 1e8 bytes stream in 1e-2 s at 1e10 B/s.
  const auto gemv = train_op(model::OpKind::matmul, 1e8, 1e8);
  EXPECT_DOUBLE_EQ(calibrated.op_time(dev, gemv, 1, 1, model::DType::fp32).value, 1e-2);
  // A square GEMM's 1e6 bytes stream in 1e-4 s: its FLOPs decide.
  const auto square = train_op(model::OpKind::matmul, 1e8, 1e6);
  EXPECT_DOUBLE_EQ(calibrated.op_time(dev, square, 1, 1, model::DType::fp32).value, 1e-3);
}

// A batched GEMM's points are per matrix of the batch: an op of many small matrices runs at a
// small matrix's rate, however many FLOPs it has in all.
TEST(CalibrationProfile, BatchedGemmsArePricedPerMatrix) {
  const char* text = R"({"version": 2, "device": "FAKE-CPU", "entries": [
    {"op_kind": "batched_matmul", "points": [{"flops": 1e6, "seconds": 1e-4},
                                             {"flops": 1e8, "seconds": 1e-3}]}]})";
  auto prof = parse_calibration_profile(text, "prof.json");
  ASSERT_TRUE(prof.ok()) << prof.error().message;
  const ComputeCostModel calibrated(ComputeParams::defaults(),
                                    std::make_shared<const CalibrationProfile>(*prof));
  auto op = train_op(model::OpKind::batched_matmul, 4e6, 1e3);
  op.phase = model::Phase::backward;
  op.gemm = model::GemmShape{64, 64, 32, 4};  // 4 matrices per sample
  // 2 samples, half the heads: 4 matrices of 1e6 FLOPs each, at the 1e6-FLOP point's rate.
  EXPECT_DOUBLE_EQ(
      calibrated.op_time(fake_device("FAKE-CPU"), op, 2, 0.5, model::DType::fp32).value, 4 * 1e-4);
  // Without a batch count the op is one matrix: 8e6 FLOPs, between the points.
  op.gemm.batch_count = 0;
  const double rate = 1e10 + (1e11 - 1e10) * std::log(8.0) / std::log(100.0);
  EXPECT_DOUBLE_EQ(calibrated.op_time(fake_device("FAKE-CPU"), op, 2, 1, model::DType::fp32).value,
                   8e6 / rate);
}

// Optimizer steps are priced from the device's measured steps, keyed by parameters (the step's
// share of them), whatever the op's kind; devices without them keep the roofline.
TEST(CalibrationProfile, OptimizerStepsArePricedFromMeasuredSteps) {
  const char* text = R"({"version": 2, "device": "FAKE-CPU", "entries": [],
    "optimizer": [{"points": [{"params": 1e6, "seconds": 2e-3}, {"params": 1e4, "seconds": 5e-5}]}]})";
  auto prof = parse_calibration_profile(text, "prof.json");
  ASSERT_TRUE(prof.ok()) << prof.error().message;
  ASSERT_EQ(prof->optimizer.at("FAKE-CPU").size(), 2u);
  EXPECT_EQ(prof->optimizer.at("FAKE-CPU").front().bytes, 1e4);  // sorted by size
  const ComputeCostModel calibrated(ComputeParams::defaults(),
                                    std::make_shared<const CalibrationProfile>(*prof));
  const ComputeCostModel roofline(ComputeParams::defaults());
  auto step = train_op(model::OpKind::matmul, 14e6, 30e6);
  step.phase = model::Phase::optimizer;
  step.params = 1e6;
  // Half the parameters (a shard of 0.5): 5e5, between the points (2e8 and 5e8 per second).
  const double rate = 2e8 + (5e8 - 2e8) * std::log(50.0) / std::log(100.0);
  EXPECT_DOUBLE_EQ(
      calibrated.op_time(fake_device("FAKE-CPU"), step, 1, 0.5, model::DType::fp32).value,
      5e5 / rate);
  // Fewer parameters than the smallest point: at least its time (the step's fixed cost).
  step.params = 100;
  EXPECT_DOUBLE_EQ(
      calibrated.op_time(fake_device("FAKE-CPU"), step, 1, 1, model::DType::fp32).value, 5e-5);
  EXPECT_EQ(calibrated.op_time(fake_device("FAKE-GPU"), step, 1, 1, model::DType::fp32),
            roofline.op_time(fake_device("FAKE-GPU"), step, 1, 1, model::DType::fp32));
}

TEST(CalibrationProfile, HostTimesAreTheDevicesMeasuredOnesOrTheDefaults) {
  const char* text = R"({"version": 2, "device": "FAKE-GPU", "entries": [],
    "host": [{"forward_seconds": 2e-5, "backward_seconds": 5e-5}]})";
  auto prof = parse_calibration_profile(text, "prof.json");
  ASSERT_TRUE(prof.ok()) << prof.error().message;
  EXPECT_EQ(prof->host.at("FAKE-GPU"), (HostOpTimes{2e-5, 5e-5}));
  const ComputeParams defaults = ComputeParams::defaults();
  const ComputeCostModel calibrated(defaults, std::make_shared<const CalibrationProfile>(*prof));
  EXPECT_EQ(calibrated.host_op_time(fake_device("FAKE-GPU"), true).value, 2e-5);
  EXPECT_EQ(calibrated.host_op_time(fake_device("FAKE-GPU"), false).value, 5e-5);
  // Another GPU: the defaults; a CPU worker issues its ops where it runs them: none.
  EXPECT_EQ(calibrated.host_op_time(fake_device("OTHER-GPU"), true), defaults.host_forward_op);
  EXPECT_EQ(calibrated.host_op_time(fake_device("OTHER-GPU"), false), defaults.host_backward_op);
  cluster::DeviceType cpu = fake_device("FAKE-GPU");
  cpu.architecture = cluster::Architecture::cpu;
  EXPECT_EQ(calibrated.host_op_time(cpu, true).value, 0);
  EXPECT_EQ(ComputeCostModel(defaults).host_op_time(cpu, false).value, 0);
}

TEST(CalibrationProfile, RoundTripsThroughAFile) {
  auto prof = parse_calibration_profile(kProfile, "prof.json");
  ASSERT_TRUE(prof.ok());
  prof->messaging["FAKE-GPU"] = {{64, 1e-3}, {4096, 2e-3}};
  prof->optimizer["FAKE-GPU"] = {{0, 1024, 1e-5}, {0, 4096, 3e-5}};
  prof->host["FAKE-GPU"] = {7e-6, 1.5e-5};
  const std::string file =
      temp_file("hetplan_cost_roundtrip.json", calibration_profile_to_json(*prof));
  auto back = read_calibration_profile(file);
  std::remove(file.c_str());
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, *prof);
}

void expect_error(const std::string& text, const std::string& needle) {
  auto prof = parse_calibration_profile(text, "prof.json");
  ASSERT_FALSE(prof.ok()) << "accepted: " << text;
  EXPECT_NE(prof.error().message.find("prof.json: "), std::string::npos) << prof.error().message;
  EXPECT_NE(prof.error().message.find(needle), std::string::npos) << prof.error().message;
}

TEST(CalibrationProfile, ErrorsNameFileAndField) {
  expect_error(R"({"device": "X", "entries": []})", "version");
  expect_error(R"({"version": 3, "device": "X", "entries": []})", "version: expected 2");
  expect_error(R"({"version": 1, "device": "X", "entries": []})", "run hetplan calibrate again");
  expect_error(R"({"version": 2, "entries": []})", "device");
  expect_error(R"({"version": 2, "device": "X"})", "entries");
  expect_error(
      R"({"version": 2, "device": "X", "entries": [{"op_kind": "fft", "points": [{"flops": 1, "seconds": 1}]}]})",
      "entries[0].op_kind: unknown op kind 'fft'");
  expect_error(
      R"({"version": 2, "device": "X", "entries": [{"op_kind": "matmul", "points": [{"flops": 1, "seconds": -1}]}]})",
      "entries[0].points[0].seconds");
  expect_error(
      R"({"version": 2, "device": "X", "entries": [{"op_kind": "matmul", "points": [{"bytes": 1, "seconds": 1}]}]})",
      "entries[0].points[0].flops");
  expect_error(
      R"({"version": 2, "device": "X", "entries": [{"op_kind": "softmax", "points": []}]})",
      "entries[0].points");
  expect_error(
      R"({"version": 2, "device": "X", "entries": [{"op_kind": "softmax", "points": [{"bytes": "a", "seconds": 1}]}]})",
      "entries[0].points[0].bytes");
  expect_error(R"({"version": 2, "device": "X", "entries": [], "note": "typo"})",
               "note: unknown field (did you mean 'notes'?)");
  expect_error(
      R"({"version": 2, "device": "X", "entries": [{"op_kind": "matmul", "points": [{"flops": 1, "second": 1}]}]})",
      "entries[0].points[0].second: unknown field (did you mean 'seconds'?)");
  expect_error(R"({"version": 2, "device": "X", "entries": [{"op": "matmul", "points": []}]})",
               "entries[0].op: unknown field");
  expect_error("{not json", "not valid JSON");
  expect_error(R"({"version": 2, "device": "X", "entries": [], "messaging": {}})", "messaging");
  expect_error(
      R"({"version": 2, "device": "X", "entries": [], "messaging": [{"points": [{"bytes": 0, "seconds": 1}]}]})",
      "messaging[0].points[0].bytes");
  expect_error(
      R"({"version": 2, "device": "X", "entries": [], "messaging": [{"points": [{"bytes": 8}]}]})",
      "messaging[0].points[0]");
  expect_error(R"({"version": 2, "device": "X", "entries": [], "messaging": [{"points": []}]})",
               "messaging[0].points");
  expect_error(R"({"version": 2, "device": "X", "entries": [], "optimizer": {}})", "optimizer");
  expect_error(
      R"({"version": 2, "device": "X", "entries": [], "optimizer": [{"points": [{"params": -1, "seconds": 1}]}]})",
      "optimizer[0].points[0].params: expected a number > 0");
  expect_error(
      R"({"version": 2, "device": "X", "entries": [], "optimizer": [{"points": [{"bytes": 8, "seconds": 1}]}]})",
      "optimizer[0].points[0]");
  expect_error(R"({"version": 2, "device": "X", "entries": [], "host": {}})",
               "host: expected an array");
  expect_error(
      R"({"version": 2, "device": "X", "entries": [], "host": [{"forward_seconds": 1e-5}]})",
      "host[0].backward_seconds");
  expect_error(
      R"({"version": 2, "device": "X", "entries": [], "host": [{"forward_seconds": 0, "backward_seconds": 1}]})",
      "host[0].forward_seconds: expected a number > 0");
  expect_error(
      R"({"version": 2, "device": "X", "entries": [], "host": [{"forward_seconds": 1, "backward_seconds": 1, "seconds": 1}]})",
      "host[0].seconds: unknown field");
  expect_error(
      R"({"version": 2, "device": "X", "entries": [], "host": [{"forward_seconds": 1, "backward_seconds": 1}, {"device": "X", "forward_seconds": 1, "backward_seconds": 1}]})",
      "host[1]: a second entry for device 'X'");
}

TEST(CalibrationProfile, MissingFileIsAnError) {
  auto prof = read_calibration_profile("/nonexistent/prof.json");
  ASSERT_FALSE(prof.ok());
  EXPECT_NE(prof.error().message.find("/nonexistent/prof.json"), std::string::npos);
}

}  // namespace
}  // namespace hetplan::cost

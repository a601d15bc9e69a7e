// Bad input never crashes: one line naming the file or argument, the field and what was expected,
// and a non-zero exit; no stack trace, no "terminate called", no partial output file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "run_command.h"

namespace hetplan::cli {
namespace {

using testing::run_hetplan;

std::string write_temp(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << text;
  return path.string();
}

struct BadCase {
  std::string args;
  std::vector<std::string> message_parts;  // all must appear in stderr
};

void expect_clean_failure(const BadCase& c) {
  auto r = run_hetplan(c.args);
  EXPECT_NE(r.exit_code, 0) << c.args;
  EXPECT_EQ(r.out, "") << c.args;
  EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("Aborted"), std::string::npos) << r.err;
  // One line.
  ASSERT_FALSE(r.err.empty()) << c.args;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  for (const auto& part : c.message_parts)
    EXPECT_NE(r.err.find(part), std::string::npos) << "want '" << part << "' in: " << r.err;
}

TEST(BadInputCli, Strategy) {
  expect_clean_failure(
      {"simulate --model llama2-7b --cluster dgx-a100:1 --strategy tp=3", {"--strategy", "tp"}});
  expect_clean_failure({"simulate --model gpt3-1.3b --cluster dgx-a100:1 --strategy dp=8,tp=8",
                        {"--strategy", "devices"}});
  expect_clean_failure({"simulate --model gpt3-1.3b --cluster dgx-a100:1 --strategy banana=1",
                        {"--strategy", "banana"}});
  expect_clean_failure(
      {"simulate --model gpt3-1.3b --cluster dgx-a100:1 --strategy tp=-2", {"--strategy", "tp"}});
}

TEST(BadInputCli, BlankStrategy) {
  // A blank --strategy would otherwise run the default strategy and exit 0.
  expect_clean_failure({"simulate --model gpt3-1.3b --cluster dgx-a100:1 --strategy ''",
                        {"--strategy", "empty value"}});
  expect_clean_failure(
      {"simulate --model gpt3-1.3b --cluster dgx-a100:1 -s ' '", {"--strategy", "empty value"}});
  expect_clean_failure({"run --strategy ''", {"--strategy", "empty value"}});
}

// Sizes past the caps get an error at once (2^31 samples once hung simulate and plan, their
// memory growing).
TEST(BadInputCli, SizesPastTheCaps) {
  expect_clean_failure({"simulate --model gpt3-1.3b --cluster dgx-a100:2 -s gbs=2147483648",
                        {"--strategy", "gbs=2147483648", "1..1048576"}});
  expect_clean_failure({"simulate --model gpt3-1.3b --cluster dgx-a100:1 -s dp=1,tp=8,gbs=1048576",
                        {"--strategy", "num_microbatches", "1..65536", "1048576"}});
  expect_clean_failure({"plan --model resnet50 --cluster tag-mixed -b 2147483648",
                        {"--global-batch", "1..1048576"}});
  const auto plan = write_temp("hp_huge_batch.json",
                               R"({"version": 1, "global_batch": 2147483648, "stages": []})");
  expect_clean_failure({"validate --model gpt3-1.3b --cluster dgx-a100:1 --plan " + plan,
                        {"hp_huge_batch.json", "global_batch", "1..1048576"}});
}

// A key given twice is refused wherever it is (the first used to win, and the second skipped
// every check: a negative bandwidth passed); a mistyped key gets the one near name suggested.
TEST(BadInputCli, DuplicateAndMistypedKeys) {
  const std::string group =
      "version: 1\nnodes:\n  - group: a\n    count: 1\n    device: A100-SXM4-80GB\n"
      "    devices_per_node: 2\n    intra_node: {bandwidth: 300GB/s, latency: 2us}\n";
  const auto dup_yaml =
      write_temp("hp_dup_key.yaml", group +
                                        "    nic: {bandwidth: 25GB/s, count: 1, latency: 5us}\n"
                                        "    nic: {bandwidth: -1GB/s, count: 1, latency: 5us}\n");
  expect_clean_failure(
      {"check-cluster " + dup_yaml, {"hp_dup_key.yaml", "nodes[0].nic", "duplicate key"}});
  const auto typo_yaml = write_temp(
      "hp_typo_key.yaml", group + "    nic: {bandwith: 25GB/s, count: 1, latency: 5us}\n");
  expect_clean_failure(
      {"check-cluster " + typo_yaml,
       {"hp_typo_key.yaml", "nodes[0].nic", "'bandwith'", "did you mean 'bandwidth'"}});
  const auto dup_plan =
      write_temp("hp_dup_key.json",
                 R"({"version": 1, "global_batch": 8, "stages": [{"first_layer": 0, "num_layers": 1,
          "replicas": [{"devices": [0], "devices": [1]}]}]})");
  expect_clean_failure({"validate --model gpt3-1.3b --cluster dgx-a100:1 --plan " + dup_plan,
                        {"hp_dup_key.json", "stages[0].replicas[0].devices", "duplicate key"}});
  const auto typo_plan =
      write_temp("hp_typo_key.json", R"({"version": 1, "global_bach": 8, "stages": []})");
  expect_clean_failure({"validate --model gpt3-1.3b --cluster dgx-a100:1 --plan " + typo_plan,
                        {"hp_typo_key.json", "global_bach", "did you mean 'global_batch'"}});
  const auto dup_graph =
      write_temp("hp_dup_key_graph.json", R"({"name": "g", "name": "h", "ops": [], "layers": []})");
  expect_clean_failure({"simulate --cluster dgx-a100:1 --model " + dup_graph,
                        {"hp_dup_key_graph.json", "name", "duplicate key"}});
  expect_clean_failure({"simulate --model gpt3-1.3b --cluster dgx-a100:1 -s tp=2,recompte=full",
                        {"--strategy", "recompte=full", "did you mean 'recompute'"}});
}

TEST(BadInputCli, MeasuredRunFiles) {
  const std::string sim = "simulate --model gpt3-1.3b --cluster dgx-a100:1 --measured ";
  expect_clean_failure({sim + "/nonexistent/run.json", {"--measured", "cannot read"}});
  expect_clean_failure(
      {sim + write_temp("hetplan_measured_notjson.json", "{"), {"--measured", "not JSON"}});
  expect_clean_failure({sim + write_temp("hetplan_measured_other.json", R"({"version": 1})"),
                        {"--measured", "hetplan measured run"}});
  expect_clean_failure(
      {sim +
           write_temp("hetplan_measured_mean.json",
                      R"({"version": 1, "kind": "hetplan measured run", "mean_step_time_s": -1})"),
       {"--measured", "mean_step_time_s", "positive"}});
  expect_clean_failure(
      {sim + write_temp("hetplan_measured_ranks.json",
                        R"({"version": 1, "kind": "hetplan measured run", "mean_step_time_s": 1,
                            "step_times_s": [1], "model": "m", "cluster": "c",
                            "ranks": [{"rank": "zero"}]})"),
       {"--measured", "hetplan_measured_ranks.json"}});
  expect_clean_failure(
      {sim + write_temp("hetplan_measured_twice.json",
                        R"({"version": 1, "kind": "hetplan measured run", "mean_step_time_s": 1,
                            "mean_step_time_s": 2})"),
       {"--measured", "mean_step_time_s", "duplicate key"}});
}

TEST(BadInputCli, ModelSpec) {
  expect_clean_failure(
      {"simulate --model gpt5-ultra --cluster dgx-a100:1", {"--model", "gpt5-ultra"}});
  expect_clean_failure(
      {"simulate --model gpt:layers=abc --cluster dgx-a100:1", {"--model", "layers"}});
  // A mistyped required key is named as the mistake, not as the key it stands for missing.
  expect_clean_failure({"simulate --model gpt:layers=2,hiden=64,heads=4,seq=32,vocab=128 --cluster "
                        "dgx-a100:1",
                        {"--model", "hiden=64", "unknown key", "did you mean 'hidden'"}});
}

TEST(BadInputCli, ClusterFiles) {
  const auto unknown =
      write_temp("hp_unknown_device.yaml",
                 "version: 1\nnodes:\n  - {group: a, count: 1, device: V200, devices_per_node: 2,"
                 " intra_node: {bandwidth: 10GB/s}, nic: {bandwidth: 10Gbps, count: 1}}\n");
  expect_clean_failure({"check-cluster " + unknown, {unknown, "device", "V200"}});
  const auto negative =
      write_temp("hp_negative_bw.yaml",
                 "version: 1\nnodes:\n  - {group: a, count: 1, device: A100-SXM4-80GB,"
                 " devices_per_node: 2, intra_node: {bandwidth: -10GB/s}, nic: {bandwidth: 10Gbps, "
                 "count: 1}}\n");
  expect_clean_failure({"check-cluster " + negative, {negative, "bandwidth"}});
  const auto missing = write_temp(
      "hp_missing_bw.yaml",
      "version: 1\nnodes:\n  - {group: a, count: 1, device: A100-SXM4-80GB,"
      " devices_per_node: 2, intra_node: {latency: 2us}, nic: {bandwidth: 10Gbps, count: 1}}\n");
  expect_clean_failure({"check-cluster " + missing, {missing, "bandwidth"}});
  const auto garbage = write_temp("hp_garbage.yaml", "version: 1\nnodes: [ {group: a\n");
  expect_clean_failure({"check-cluster " + garbage, {garbage}});
  expect_clean_failure({"check-cluster /nonexistent/c.yaml", {"/nonexistent/c.yaml"}});
}

TEST(BadInputCli, GraphWithACycle) {
  const auto file =
      write_temp("hp_cycle.json", R"({"version": 1, "name": "cyc", "family": "cnn", "dtype": "fp32",
    "ops": [{"name": "a", "kind": "matmul", "shard": "replicated", "layer": 0, "inputs": [1], "flops": 1},
            {"name": "b", "kind": "matmul", "shard": "replicated", "layer": 0, "inputs": [0], "flops": 1}],
    "layers": [{"name": "l0", "kind": "other", "first_op": 0, "num_ops": 2}]})");
  expect_clean_failure({"simulate --model " + file + " --cluster dgx-a100:1", {file}});
}

// Inputs past any sensible size are refused at once and briefly: a file over 256 MiB, a graph of
// more than 100,000 ops, a key a thousand characters long or with control characters in it (the
// message stays one line of at most 1,000 bytes).
TEST(BadInputCli, HugeInputsAreRefusedBriefly) {
  const auto huge = std::filesystem::temp_directory_path() / "hp_huge_cluster.yaml";
  { std::ofstream(huge) << "version: 1\n"; }
  std::filesystem::resize_file(huge, (std::uintmax_t{256} << 20) + 1);  // sparse: no disk used
  expect_clean_failure({"check-cluster " + huge.string(), {huge.string(), "at most 256 MiB"}});
  std::filesystem::remove(huge);

  std::string ops;
  for (int i = 0; i <= 100000; ++i) ops += i ? ",{}" : "{}";
  const auto many =
      write_temp("hp_many_ops.json", R"({"version": 1, "name": "m", "family": "cnn", "ops": [)" +
                                         ops + R"(], "layers": []})");
  expect_clean_failure({"simulate --cluster dgx-a100:1 --model " + many,
                        {"hp_many_ops.json", "ops", "at most 100000 ops"}});

  // (yaml-cpp reads keys of at most 1,024 characters.)
  const auto long_key =
      write_temp("hp_long_key.yaml", "version: 1\n" + std::string(1000, 'k') + ": 1\n");
  auto r = run_hetplan("check-cluster " + long_key);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LE(r.err.size(), 1100u) << r.err.substr(0, 200);
  EXPECT_NE(r.err.find("hp_long_key.yaml"), std::string::npos) << r.err.substr(0, 200);
  EXPECT_NE(r.err.find("bytes left out"), std::string::npos) << r.err.substr(0, 200);
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1);

  const auto control = write_temp("hp_control_key.yaml", "version: 1\n\"a\\nb\\e[31m\": 1\n");
  expect_clean_failure({"check-cluster " + control, {"hp_control_key.yaml", "a\\x0ab\\x1b[31m"}});
}

TEST(BadInputCli, PlanFiles) {
  const auto unassigned = write_temp("hp_unassigned_plan.json",
                                     R"({"version": 1, "global_batch": 8, "num_microbatches": 1,
    "stages": [{"first_layer": 0, "num_layers": 3, "replicas": [{"devices": [0], "batch_share": 1.0}]}]})");
  expect_clean_failure({"simulate --model gpt3-125m --cluster dgx-a100:1 --plan " + unassigned,
                        {unassigned, "stages"}});
  const auto bad_json = write_temp("hp_bad_plan.json", "{\"version\": 1, ");
  expect_clean_failure(
      {"simulate --model gpt3-125m --cluster dgx-a100:1 --plan " + bad_json, {bad_json}});
}

TEST(BadInputCli, TraceIntoAMissingDirectoryLeavesNoFile) {
  expect_clean_failure(
      {"simulate --model gpt3-125m --cluster dgx-a100:1 --strategy dp=8,gbs=64 --trace "
       "/nonexistent/dir/t.json",
       {"/nonexistent/dir/t.json"}});
}

// Output files are checked before any work: a report into a missing directory used to fail after
// the whole search and 15 s of report; calibrate --out after the whole measurement.
TEST(BadInputCli, OutputsThatCannotBeWrittenFailFirst) {
  const std::string missing = "/nonexistent/dir/out.json";
  for (const std::string args :
       {"plan --model resnet50 --cluster tag-mixed -b 256 --algo hap -o ",
        "plan --model resnet50 --cluster tag-mixed -b 256 --algo hap --report ",
        "pareto --model gpt3-125m --cluster dgx-a100:1 --report ", "calibrate --out ",
        "train-policy --iterations 1 -o ", "run --nprocs 2 --measured-out "})
    expect_clean_failure({args + missing, {missing, "no directory /nonexistent/dir"}});
  const auto dir = std::filesystem::temp_directory_path().string();
  expect_clean_failure(
      {"plan --model resnet50 --cluster tag-mixed -o " + dir, {dir, "is a directory"}});
}

TEST(BadInputCli, UnknownOption) {
  expect_clean_failure({"simulate --frobnicate", {"frobnicate"}});
}

}  // namespace
}  // namespace hetplan::cli

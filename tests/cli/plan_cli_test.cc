// hetplan plan and hetplan pareto from the command line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
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

// A plan names its model and cluster: `run --check` takes them where --model and --cluster are
// not given, as simulate does, and judges the plan as with them given.
TEST(PlanCli, RunCheckTakesThePlansOwnModelAndCluster) {
  const auto out = (std::filesystem::temp_directory_path() /
                    ("hetplan_plan_cli_own_" + std::to_string(::getpid()) + ".json"))
                       .string();
  const std::string inputs =
      "--model gpt:layers=2,hidden=128,heads=4,seq=64,vocab=500 "
      "--cluster heterog-mixed";
  auto r = run_hetplan("plan " + inputs + " --global-batch 32 --time-limit 1 --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto given = run_hetplan("run --check " + inputs + " --plan " + out);
  auto own = run_hetplan("run --check --plan " + out);
  EXPECT_EQ(given.exit_code, 0) << given.out << given.err;
  EXPECT_EQ(own.exit_code, 0) << own.out << own.err;
  EXPECT_EQ(own.out.rfind("runnable: ", 0), 0u) << own.out;
  // (Their next line says what the host had available then, which moves.)
  EXPECT_EQ(own.out.substr(0, own.out.find('\n')), given.out.substr(0, given.out.find('\n')));
  std::filesystem::remove(out);
}

// A plan made on a cluster file names the file (absolute), not its stem: run --check and simulate
// find it without --cluster, even where the stem is a preset's name (here a file of 2 A100s called
// heterog-mixed.yaml, against the preset's 8 GPUs).
TEST(PlanCli, APlanOnAClusterFileNamesTheFile) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("hetplan_plan_cli_file_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto cluster = dir / "heterog-mixed.yaml";
  std::ofstream(cluster)
      << "version: 1\n"
         "nodes:\n"
         "  - {group: a, count: 1, device: A100-SXM4-40GB, devices_per_node: 2,\n"
         "     intra_node: {bandwidth: 300GB/s}, nic: {bandwidth: 100Gbps}}\n";
  const auto out = (dir / "plan.json").string();
  auto r = run_hetplan("plan --model gpt:layers=2,hidden=128,heads=4,seq=64,vocab=500 --cluster " +
                       cluster.string() + " --global-batch 16 --time-limit 1 --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(testing::slurp(out))["cluster"], cluster.string());
  auto check = run_hetplan("run --check --plan " + out);
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_EQ(check.out.rfind("runnable: ", 0), 0u) << check.out;
  auto sim = run_hetplan("simulate --plan " + out);
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_NE(sim.out.find("heterog-mixed (2 devices"), std::string::npos) << sim.out;
  // The file given again agrees with the plan; the preset of that name does not.
  EXPECT_EQ(run_hetplan("simulate --plan " + out + " --cluster " + cluster.string()).exit_code, 0);
  auto preset = run_hetplan("simulate --plan " + out + " --cluster heterog-mixed");
  EXPECT_EQ(preset.exit_code, 2);
  EXPECT_NE(preset.err.find("is not the plan's cluster"), std::string::npos) << preset.err;
  std::filesystem::remove_all(dir);
}

TEST(PlanCli, FlashAttentionPlansKeepNoScores) {
  // The same search with a fused attention core: the plan says so, simulates to the same numbers,
  // and keeps less than the plain plan at the same settings.
  const auto out =
      (std::filesystem::temp_directory_path() / "hetplan_plan_cli_flash.json").string();
  auto r = run_hetplan("plan " + kSmall + " --algo pipeline --attention flash --json --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto planned = nlohmann::json::parse(r.out);
  EXPECT_EQ(planned["plan"]["attention"], "flash");
  const std::string inputs =
      "--model gpt:layers=4,hidden=1024,heads=16,seq=512,vocab=32000 --cluster " +
      source_path("tests/search/data/two-kinds-8.yaml");
  auto s = run_hetplan("simulate " + inputs + " --plan " + out + " --json");
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(planned["memory"], nlohmann::json::parse(s.out)["memory"]);
  // The same plan with plain attention keeps the scores.
  auto text = testing::slurp(out);
  text.replace(text.find("\"attention\": \"flash\""), 20, "\"attention\": \"plain\"");
  std::ofstream(out) << text;
  auto plain = run_hetplan("simulate " + inputs + " --plan " + out + " --json");
  ASSERT_TRUE(plain.exit_code == 0 || plain.exit_code == 2) << plain.err;
  if (plain.exit_code == 0) {
    EXPECT_GT(nlohmann::json::parse(plain.out)["memory"]["max_peak_bytes"].get<double>(),
              planned["memory"]["max_peak_bytes"].get<double>());
  }
  std::filesystem::remove(out);
  auto bad = run_hetplan("plan " + kSmall + " --attention fast");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--attention"), std::string::npos) << bad.err;
}

// --loss and --metrics describe the engine: every plan says them, and its time counts the metrics'
// extra losses (the same plan without them is faster).
TEST(PlanCli, TrainingMetricsAreWrittenAndPriced) {
  const auto out =
      (std::filesystem::temp_directory_path() / "hetplan_plan_cli_metrics.json").string();
  auto r = run_hetplan("plan " + kSmall +
                       " --algo pipeline --loss fused --metrics 2 --json --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto planned = nlohmann::json::parse(r.out);
  EXPECT_EQ(planned["plan"]["loss"], "fused");
  EXPECT_EQ(planned["plan"]["metrics"], 2);
  const std::string inputs =
      "--model gpt:layers=4,hidden=1024,heads=16,seq=512,vocab=32000 --cluster " +
      source_path("tests/search/data/two-kinds-8.yaml");
  auto with = run_hetplan("simulate " + inputs + " --plan " + out + " --json");
  ASSERT_EQ(with.exit_code, 0) << with.err;
  auto text = testing::slurp(out);
  text.replace(text.find("\"metrics\": 2"), 12, "\"metrics\": 0");
  std::ofstream(out) << text;
  auto without = run_hetplan("simulate " + inputs + " --plan " + out + " --json");
  ASSERT_EQ(without.exit_code, 0) << without.err;
  EXPECT_LT(nlohmann::json::parse(without.out)["iteration_time_s"].get<double>(),
            nlohmann::json::parse(with.out)["iteration_time_s"].get<double>());
  std::filesystem::remove(out);
  auto bad = run_hetplan("plan " + kSmall + " --metrics 9");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--metrics"), std::string::npos) << bad.err;
}

// --precision: the model is costed in it and every plan says it. The written plan simulates to the
// plan's numbers with the model given as in bf16 (the plan's precision rebuilds it); a strategy's
// precision= costs as the model spec's own dtype=; `run --check` takes the plan's precision, and a
// --precision that contradicts it is an error. An fp16 plan is "not runnable" on the CPU, with the
// reason; fp16 plans are stage plans (for CUDA runs), which --check without --device judges so.
TEST(PlanCli, APrecisionIsCostedWrittenAndKept) {
  const std::string model = "gpt:layers=4,hidden=1024,heads=16,seq=512,vocab=32000";
  const std::string cluster = source_path("tests/search/data/two-kinds-8.yaml");
  const auto out = (std::filesystem::temp_directory_path() /
                    ("hetplan_plan_cli_fp32_" + std::to_string(::getpid()) + ".json"))
                       .string();
  auto r = run_hetplan("plan " + kSmall + " --precision fp32 --json --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto planned = nlohmann::json::parse(r.out);
  EXPECT_EQ(planned["plan"]["precision"], "fp32");
  const std::string inputs = "--model " + model + " --cluster " + cluster;
  auto s = run_hetplan("simulate " + inputs + " --plan " + out + " --json");
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const auto simulated = nlohmann::json::parse(s.out);
  EXPECT_EQ(planned["iteration_time_s"], simulated["iteration_time_s"]);
  EXPECT_EQ(planned["memory"], simulated["memory"]);
  // Without the key, in bf16, the same plan is faster and smaller on these GPUs.
  auto text = testing::slurp(out);
  const std::string key = "\"precision\": \"fp32\",";
  ASSERT_NE(text.find(key), std::string::npos);
  std::ofstream(out) << std::string(text).erase(text.find(key), key.size());
  auto bf16 = run_hetplan("simulate " + inputs + " --plan " + out + " --json");
  ASSERT_EQ(bf16.exit_code, 0) << bf16.err;
  const auto in_bf16 = nlohmann::json::parse(bf16.out);
  EXPECT_LT(in_bf16["iteration_time_s"].get<double>(), simulated["iteration_time_s"].get<double>());
  EXPECT_LT(in_bf16["memory"]["max_peak_bytes"].get<double>(),
            simulated["memory"]["max_peak_bytes"].get<double>());
  // The strategy key does as the plan key, and as the model's own dtype=fp32.
  auto by_key = run_hetplan("simulate " + inputs + " --strategy dp=8,gbs=64,precision=fp32 --json");
  auto by_model = run_hetplan("simulate --model " + model + ",dtype=fp32 --cluster " + cluster +
                              " --strategy dp=8,gbs=64 --json");
  ASSERT_EQ(by_key.exit_code, 0) << by_key.err;
  ASSERT_EQ(by_model.exit_code, 0) << by_model.err;
  EXPECT_EQ(nlohmann::json::parse(by_key.out)["iteration_time_s"],
            nlohmann::json::parse(by_model.out)["iteration_time_s"]);
  // run takes the plan's precision; another --precision is an error.
  std::ofstream(out) << text;
  auto check = run_hetplan("run --check " + inputs + " --plan " + out);
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_EQ(check.out.rfind("runnable: ", 0), 0u) << check.out << check.err;
  // Without --model and --cluster the plan's own stand (as for simulate): its cluster file, by its
  // absolute path. Where that file is gone, the error says so and asks for --cluster.
  auto own = run_hetplan("run --check --plan " + out);
  EXPECT_EQ(own.exit_code, 0) << own.out << own.err;
  EXPECT_EQ(own.out.substr(0, own.out.find('\n')), check.out.substr(0, check.out.find('\n')));
  auto gone = testing::run_with_plan_cluster_gone("run --check", out);
  EXPECT_EQ(gone.exit_code, 2);
  EXPECT_NE(gone.err.find("its cluster does not load"), std::string::npos) << gone.err;
  EXPECT_NE(gone.err.find("give --cluster explicitly"), std::string::npos) << gone.err;
  auto named = run_hetplan("run --check --cluster " + cluster + " --plan " + out);
  EXPECT_EQ(named.exit_code, 0) << named.out << named.err;
  EXPECT_EQ(named.out.substr(0, named.out.find('\n')), check.out.substr(0, check.out.find('\n')));
  auto against = run_hetplan("run --check " + inputs + " --plan " + out + " --precision bf16");
  EXPECT_EQ(against.exit_code, 2);
  EXPECT_NE(against.err.find("--precision bf16: the plan trains in fp32 (its precision)"),
            std::string::npos)
      << against.err;
  std::string fp16 = text;
  fp16.replace(fp16.find(key), key.size(), "\"precision\": \"fp16\",");
  std::ofstream(out) << fp16;
  auto half = run_hetplan("run --check --device cpu " + inputs + " --plan " + out);
  EXPECT_EQ(half.exit_code, 1);
  EXPECT_EQ(half.out.rfind(
                "not runnable:\n  " + out + ": precision fp16: runs with --device cuda only", 0),
            0u)
      << half.out;
  // Without --device, a plan for GPUs is judged as run on them: this op-level plan runs so, under
  // loss scaling, as stage plans do.
  auto on_gpus = run_hetplan("run --check " + inputs + " --plan " + out);
  EXPECT_EQ(on_gpus.exit_code, 0) << on_gpus.out << on_gpus.err;
  EXPECT_EQ(on_gpus.out.rfind("runnable: ", 0), 0u) << on_gpus.out;
  EXPECT_NE(on_gpus.out.find("(fp16: with --device cuda, on the GPUs it is planned for)"),
            std::string::npos)
      << on_gpus.out;
  std::filesystem::remove(out);
  // fp16 plans run on CUDA.
  auto fp16_plan = run_hetplan("plan " + kSmall + " --precision fp16 --json --out " + out);
  ASSERT_EQ(fp16_plan.exit_code, 0) << fp16_plan.err;
  EXPECT_EQ(nlohmann::json::parse(fp16_plan.out)["plan"]["precision"], "fp16");
  auto on_cuda = run_hetplan("run --check --device cuda " + inputs + " --plan " + out);
  EXPECT_EQ(on_cuda.exit_code, 0) << on_cuda.out << on_cuda.err;
  EXPECT_NE(on_cuda.out.find("runnable: 8 ranks"), std::string::npos) << on_cuda.out;
  auto planned_for = run_hetplan("run --check " + inputs + " --plan " + out);
  EXPECT_EQ(planned_for.exit_code, 0) << planned_for.out << planned_for.err;
  EXPECT_NE(planned_for.out.find("(fp16: with --device cuda, on the GPUs it is planned for)"),
            std::string::npos)
      << planned_for.out;
  std::filesystem::remove(out);
  // A cluster of CPUs only: no run trains it in fp16.
  auto cpus = run_hetplan("plan --model " + model + " --cluster cpu:4 -b 8 --precision fp16");
  EXPECT_EQ(cpus.exit_code, 2);
  EXPECT_NE(cpus.err.find("--precision fp16: cpu:4 has CPUs only"), std::string::npos) << cpus.err;
  auto bad = run_hetplan("plan " + kSmall + " --precision fp8");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--precision"), std::string::npos) << bad.err;
}

// tf32: fp32 tensors (the same memory) whose GEMMs run at the TF32 peak, so faster on A100s, and no
// faster on V100s, which have no TF32 path. hetplan run trains a tf32 plan (in fp32 on CPUs).
TEST(PlanCli, Tf32IsFp32WithItsGemmsOnTheTensorCores) {
  const std::string model = "--model gpt:layers=2,hidden=1024,heads=16,seq=512,vocab=32000";
  const auto simulated = [&](const std::string& cluster, const char* precision) {
    auto r = run_hetplan("simulate " + model + " --cluster " + cluster +
                         " --strategy dp=1,gbs=4,mbs=4,precision=" + precision + " --json");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  const auto a100_fp32 = simulated("dgx-a100:1", "fp32"),
             a100_tf32 = simulated("dgx-a100:1", "tf32");
  EXPECT_LT(a100_tf32["iteration_time_s"].get<double>(),
            0.5 * a100_fp32["iteration_time_s"].get<double>());
  EXPECT_EQ(a100_tf32["memory"], a100_fp32["memory"]);
  EXPECT_EQ(simulated("hap-mixed", "tf32")["iteration_time_s"],
            simulated("hap-mixed", "fp32")["iteration_time_s"]);
  auto check = run_hetplan(
      "run --check --model gpt:layers=2,hidden=32,heads=4,seq=8,vocab=64 "
      "--cluster cpu:2 --strategy dp=2,gbs=4,precision=tf32");
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_EQ(check.out.rfind("runnable: ", 0), 0u) << check.out << check.err;
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

// A stage line names its replicas' form: an SPMD program (HAP's, its splits in op_overrides) with
// its ops counted by split, tensor parallelism (Megatron-LM's) as tp. The HAP plan of a small GPT
// on five CPU workers splits every op by batch (it was printed as "tp5").
TEST(PlanCli, SummarySaysHowTheReplicasSplitTheirOps) {
  const std::string model =
      "--model gpt:layers=2,hidden=64,heads=4,seq=64,vocab=999 --cluster cpu:5";
  auto hap = run_hetplan("plan " + model + " --global-batch 12 --algo hap");
  ASSERT_EQ(hap.exit_code, 0) << hap.err;
  EXPECT_NE(hap.out.find("1 x spmd5 on cpu/0/0 ...  (1 replicas); ops by split: batch "),
            std::string::npos)
      << hap.out;
  auto megatron =
      run_hetplan("plan --model gpt3-125m --cluster dgx-a100:1 --global-batch 16 --algo megatron");
  ASSERT_EQ(megatron.exit_code, 0) << megatron.err;
  EXPECT_NE(megatron.out.find(" x tp"), std::string::npos) << megatron.out;
  EXPECT_EQ(megatron.out.find("spmd"), std::string::npos) << megatron.out;
}

TEST(PlanCli, BadArgumentsAndModelsThatCannotFit) {
  auto algo = run_hetplan("plan " + kSmall + " --algo magic");
  EXPECT_EQ(algo.exit_code, 2);
  EXPECT_NE(
      algo.err.find("--algo: expected one of auto|dp|megatron|uneven-dp|hap|pipeline|tag|heterog"),
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
  // One planner's plans not fitting is not the model's: the message says whose they were.
  auto one =
      run_hetplan("plan --model gpt3-175b --cluster heterog-mixed --global-batch 16 --algo dp");
  EXPECT_EQ(one.exit_code, 2);
  EXPECT_NE(one.err.find("(of --algo dp's plans; --algo auto tries every planner)"),
            std::string::npos)
      << one.err;
  EXPECT_EQ(big.err.find("--algo auto tries"), std::string::npos) << big.err;
}

// The largest share of its device's capacity that any device's peak memory takes.
double capacity_share(const nlohmann::json& memory) {
  double most = 0;
  for (std::size_t d = 0; d < memory["peak_bytes_per_device"].size(); ++d)
    most = std::max(most, memory["peak_bytes_per_device"][d].get<double>() /
                              memory["capacity_bytes_per_device"][d].get<double>());
  return most;
}

TEST(PlanCli, MemoryObjectiveFindsTheFrontiersLeastMemory) {
  auto fast = run_hetplan("plan " + kSmall + " --json");
  auto lean = run_hetplan("plan " + kSmall + " --objective memory --json");
  auto front = run_hetplan("pareto " + kSmall + " --json");
  ASSERT_EQ(fast.exit_code, 0) << fast.err;
  ASSERT_EQ(lean.exit_code, 0) << lean.err;
  ASSERT_EQ(front.exit_code, 0) << front.err;
  const auto f = nlohmann::json::parse(fast.out), l = nlohmann::json::parse(lean.out);
  const double share = capacity_share(l["memory"]);
  // Far below the fastest plan's memory, and slower for it.
  EXPECT_LT(share, 0.5 * capacity_share(f["memory"]));
  EXPECT_GT(l["iteration_time_s"].get<double>(), f["iteration_time_s"].get<double>());
  // No point of the frontier takes a smaller share of its devices' capacity.
  const auto file = std::filesystem::temp_directory_path() /
                    ("hetplan_frontier_point_" + std::to_string(::getpid()) + ".json");
  for (const auto& point : nlohmann::json::parse(front.out)["points"]) {
    std::ofstream(file) << point["plan"].dump();
    auto sim = run_hetplan("simulate " + kSmall + " --plan " + file.string() + " --json");
    ASSERT_EQ(sim.exit_code, 0) << sim.err;
    EXPECT_LE(share, capacity_share(nlohmann::json::parse(sim.out)["memory"]) * (1 + 1e-12));
  }
  std::filesystem::remove(file);
}

TEST(PlanCli, TheSeedDecidesThePlan) {
  // The stage-level planners draw no random numbers: every seed gives the same plan. TAG's op
  // grouping (METIS) takes the seed: the same seed gives the same plan.
  auto a = run_hetplan("plan " + kSmall + " --algo pipeline --seed 1 --json");
  auto b = run_hetplan("plan " + kSmall + " --algo pipeline --seed 987654321 --json");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(nlohmann::json::parse(a.out)["plan"], nlohmann::json::parse(b.out)["plan"]);
  auto c = run_hetplan("plan " + kSmall + " --seed 7 --json");
  auto d = run_hetplan("plan " + kSmall + " --seed 7 --json");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(nlohmann::json::parse(c.out)["plan"], nlohmann::json::parse(d.out)["plan"]);
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
  // Where no pipeline shape splits the batch, pareto says so (it said that no plan fits): a
  // 3-head GPT on five CPU workers, batch 3, has single-device replicas, 5 of them in one stage
  // (a sample each is 5), or one in each of 5 stages (5 micro-batches at least).
  const std::string three_heads = "--model gpt:layers=2,hidden=48,heads=3,seq=128,vocab=1000";
  auto none = run_hetplan("pareto " + three_heads + " --cluster cpu:5 -b 3");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("the global batch 3 splits in no pipeline shape"), std::string::npos)
      << none.err;
  // At batch 12 the five replicas share a micro-batch unevenly (no count of micro-batches gives
  // them equal whole shares), and the frontier has points.
  auto uneven = run_hetplan("pareto " + three_heads + " --cluster cpu:5 -b 12 --json");
  ASSERT_EQ(uneven.exit_code, 0) << uneven.err;
  EXPECT_GE(nlohmann::json::parse(uneven.out)["points"].size(), 1u);
  // The fastest point is as fast as the time-optimal pipeline plan.
  auto p = run_hetplan("plan " + kSmall + " --algo pipeline --json");
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_LE(pts[0]["iteration_time_s"].get<double>(),
            nlohmann::json::parse(p.out)["iteration_time_s"].get<double>() * 1.0 + 1e-12);
}

}  // namespace
}  // namespace hetplan::cli

// Checkpoints that do not depend on the plan: a run checkpointed under one plan goes on under
// another plan of the same model (other degrees of data, tensor and pipeline parallelism, ZeRO-1,
// replicas that split layers differently, HAP's batch programs) with the losses of the
// uninterrupted run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../cli/run_command.h"

namespace hetplan::runtime {
namespace {

namespace fs = std::filesystem;
using cli::testing::run_hetplan;

constexpr const char* kGpt = "gpt:layers=2,hidden=64,heads=4,seq=32,vocab=256";
constexpr const char* kMlp = "mlp:layers=2,hidden=64,in=32,out=10";

fs::path temp(const std::string& name) {
  return fs::temp_directory_path() / ("hetplan_ckplans_" + name + "_" + std::to_string(::getpid()));
}

std::string write_plan(const std::string& name, const std::string& text) {
  const fs::path file = temp(name + ".json");
  std::ofstream(file) << text;
  return file.string();
}

// Runs `steps` steps of `args` (with --json); returns the first step and the losses.
std::pair<int, std::vector<double>> run_steps(int steps, const std::string& args) {
  auto r = run_hetplan("run --json --steps " + std::to_string(steps) + " " + args);
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
  if (r.exit_code != 0) return {-1, {}};
  const auto j = nlohmann::json::parse(r.out);
  return {j["first_step"].get<int>(), j["losses"].get<std::vector<double>>()};
}

// The run resumed at step `from` gives the uninterrupted run's losses from there on (fp32: the
// same arithmetic up to the order of sums, 1e-4 relative as every runtime test allows).
void expect_continues(const std::vector<double>& whole, int from,
                      const std::pair<int, std::vector<double>>& resumed, const std::string& what) {
  EXPECT_EQ(resumed.first, from) << what;
  ASSERT_EQ(resumed.second.size() + from, whole.size()) << what;
  for (std::size_t i = 0; i < resumed.second.size(); ++i)
    EXPECT_NEAR(resumed.second[i], whole[from + i], 1e-4 * std::abs(whole[from + i]))
        << what << ": step " << from + i;
}

TEST(RunCheckpoints, ADecoderResumesUnderAnyPlan) {
  const std::string gpt = std::string("--model ") + kGpt;
  // 5 steps on two pipeline stages of tensor-parallel pairs (the tied head's copy on the last
  // stage), then 5 more under each other plan.
  const std::string first = gpt + " --nprocs 4 --strategy pp=2,tp=2,gbs=16,mbs=2";
  const auto whole = run_steps(10, first).second;
  ASSERT_EQ(whole.size(), 10u);
  const fs::path dir = temp("gpt");
  fs::remove_all(dir);
  ASSERT_EQ(run_steps(5, first + " --checkpoint " + dir.string()).second.size(), 5u);
  EXPECT_TRUE(fs::exists(dir / "step-5" / "stage0.pt"));
  EXPECT_TRUE(fs::exists(dir / "step-5" / "stage1.pt"));
  // Replicas of one stage that split their layers differently (one device, and two at 3:1),
  // ZeRO-1 over the stage's three ranks in the whole layout, then a second stage.
  const auto unlike = write_plan("unlike", R"({"version": 1, "global_batch": 16,
    "num_microbatches": 2, "zero_stage": 1, "stages": [
      {"first_layer": 0, "num_layers": 2, "replicas": [
        {"devices": [0], "batch_share": 0.5},
        {"devices": [1, 2], "tp_shares": [0.75, 0.25], "batch_share": 0.5}]},
      {"first_layer": 2, "num_layers": 2, "replicas": [{"devices": [3], "batch_share": 1}]}]})");
  // HAP's batch program: the word embedding split by vocabulary, MLP and QKV weights sharded.
  const auto program = write_plan("program", R"({"version": 1, "global_batch": 16,
    "num_microbatches": 2, "stages": [{"first_layer": 0, "num_layers": 4,
      "replicas": [{"devices": [0, 1, 2], "tp_shares": [0.5, 0.3, 0.2], "batch_share": 1.0}]}],
    "op_overrides": [{"ops": "embedding.word", "split": "tensor"},
                     {"ops": "layers.*.mlp.*", "split": "batch_sharded"},
                     {"ops": "layers.*.attn.qkv", "split": "batch_sharded"},
                     {"ops": "*", "split": "batch"}]})");
  const std::pair<std::string, std::string> plans[] = {
      {"one process", "--strategy dp=1,gbs=16"},
      {"tp=2 x dp=2, ZeRO-1", "--nprocs 4 --strategy tp=2,dp=2,gbs=16,zero=1"},
      {"dp=2, ZeRO-2", "--nprocs 2 --strategy dp=2,gbs=16,zero=2"},
      {"pp=2 x dp=2, ZeRO-3", "--nprocs 4 --strategy pp=2,dp=2,gbs=16,mbs=2,zero=3"},
      {"unlike replicas", "--nprocs 4 --cluster cpu:4 --plan " + unlike},
      {"batch program", "--nprocs 3 --cluster cpu:3 --plan " + program},
  };
  for (const auto& [what, args] : plans)
    expect_continues(whole, 5, run_steps(5, gpt + " " + args + " --resume " + dir.string()), what);
  // What those plans write (whole tensors gathered from their layouts) resumes too: 3 steps under
  // each, then the rest in one process.
  for (const auto& [what, args] : plans) {
    if (what == "one process") continue;  // (RunCli.CheckpointResumesTheSameRun writes it)
    const fs::path next = temp("gpt_next");
    fs::remove_all(next);
    expect_continues(std::vector<double>(whole.begin(), whole.begin() + 8), 5,
                     run_steps(3, gpt + " " + args + " --resume " + dir.string() +
                                      " --checkpoint " + next.string()),
                     what + " (writing)");
    expect_continues(whole, 8,
                     run_steps(2, gpt + " --strategy dp=1,gbs=16 --checkpoint " + next.string()),
                     what + " (written)");
    fs::remove_all(next);
  }
  fs::remove_all(dir);
  fs::remove(unlike);
  fs::remove(program);
}

// In bf16 under ZeRO-1 the linear layers' weights are held in 16 bits: a checkpoint writes their
// fp32 master (every replica's slices), so that the run resumed at step 5 under the same plan
// gives the uninterrupted run's losses; under ZeRO-2 and in one process it goes on within bf16's
// 2^-10 (the sums' order differs).
TEST(RunCheckpoints, SixteenBitWeightsWriteTheirFp32Master) {
  const std::string gpt = std::string("--precision bf16 --model ") + kGpt;
  const std::string zero = gpt + " --nprocs 2 --strategy dp=2,gbs=16,mbs=4,zero=1";
  const auto whole = run_steps(10, zero).second;
  ASSERT_EQ(whole.size(), 10u);
  const fs::path dir = temp("bf16_zero");
  fs::remove_all(dir);
  ASSERT_EQ(run_steps(5, zero + " --checkpoint " + dir.string()).second.size(), 5u);
  const auto same = run_steps(5, zero + " --resume " + dir.string());
  ASSERT_EQ(same.second.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i)
    EXPECT_NEAR(same.second[i], whole[5 + i], 1e-6 * std::abs(whole[5 + i])) << "step " << 5 + i;
  for (const std::string& other : {std::string(" --nprocs 2 --strategy dp=2,gbs=16,mbs=4,zero=2"),
                                   std::string(" --strategy dp=1,gbs=16,mbs=8")}) {
    const auto resumed = run_steps(5, gpt + other + " --resume " + dir.string());
    ASSERT_EQ(resumed.second.size(), 5u) << other;
    for (std::size_t i = 0; i < 5; ++i)
      EXPECT_NEAR(resumed.second[i], whole[5 + i], std::abs(whole[5 + i]) / 1024)
          << other << ": step " << 5 + i;
  }
  fs::remove_all(dir);
}

TEST(RunCheckpoints, AnMlpResumesUnderABatchProgram) {
  const std::string mlp = std::string("--model ") + kMlp;
  const std::string first = mlp + " --nprocs 2 --strategy dp=2,gbs=16,zero=1";
  const auto whole = run_steps(8, first).second;
  ASSERT_EQ(whole.size(), 8u);
  const fs::path dir = temp("mlp");
  fs::remove_all(dir);
  ASSERT_EQ(run_steps(4, first + " --checkpoint " + dir.string()).second.size(), 4u);
  const auto program = write_plan("mlp_program", R"({"version": 1, "global_batch": 16,
    "stages": [{"first_layer": 0, "num_layers": 3,
      "replicas": [{"devices": [0, 1], "tp_shares": [0.6, 0.4], "batch_share": 1.0}]}],
    "op_overrides": [{"ops": "layers.0.*", "split": "batch_sharded"},
                     {"ops": "head.*", "split": "batch_sharded"},
                     {"ops": "*", "split": "batch"}]})");
  expect_continues(
      whole, 4, run_steps(4, mlp + " --nprocs 2 --plan " + program + " --resume " + dir.string()),
      "batch program");
  fs::remove_all(dir);
  fs::remove(program);
}

TEST(RunCheckpoints, RefusesAnotherBatchSeedOrModel) {
  const fs::path dir = temp("refuse");
  fs::remove_all(dir);
  ASSERT_EQ(run_steps(2, std::string("--model ") + kGpt + " --strategy dp=1,gbs=8 --checkpoint " +
                             dir.string())
                .second.size(),
            2u);
  const std::pair<std::string, std::string> cases[] = {
      {std::string("--model ") + kGpt + " --strategy dp=1,gbs=12",
       "step 2 was taken with global batch 8 and seed 1; this run has 12 and 1"},
      {std::string("--model ") + kGpt + " --strategy dp=1,gbs=8 --seed 3",
       "step 2 was taken with global batch 8 and seed 1; this run has 8 and 3"},
      {"--model gpt:layers=2,hidden=32,heads=4,seq=32,vocab=256 --strategy dp=1,gbs=8",
       "in the checkpoint but"},
      {std::string("--model ") + kMlp + " --strategy dp=1,gbs=8", "lacks"},
  };
  for (const auto& [args, expected] : cases) {
    auto r = run_hetplan("run --steps 1 " + args + " --resume " + dir.string());
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_NE(r.err.find("--resume: " + dir.string()), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(expected), std::string::npos) << args << "\n" << r.err;
  }
  auto none = run_hetplan(std::string("run --steps 1 --model ") + kGpt + " --resume " +
                          dir.string() + "/nothing");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("no checkpoint there"), std::string::npos) << none.err;
  fs::remove_all(dir);
}

// Op-by-op runs checkpoint by the op graph's names. A ResNet under tensor parallelism (a split
// group: it runs op by op) writes its slices whole and reads them back; a GPT's op-level plan of a
// replicated and a split group goes on under parameter servers and back.
// A stage run cannot take over an op-by-op run's checkpoint (other names), and says so.
TEST(RunCheckpoints, OpByOpRunsResumeUnderOtherPlans) {
  auto chain = [](const std::string& model, const std::string& a, const std::string& b,
                  const std::string& what) {
    const auto whole = run_steps(9, model + " " + a).second;
    ASSERT_EQ(whole.size(), 9u);
    const fs::path one = temp("ops_a"), two = temp("ops_b");
    fs::remove_all(one);
    fs::remove_all(two);
    expect_continues(std::vector<double>(whole.begin(), whole.begin() + 3), 0,
                     run_steps(3, model + " " + a + " --checkpoint " + one.string()), what);
    expect_continues(std::vector<double>(whole.begin(), whole.begin() + 6), 3,
                     run_steps(3, model + " " + b + " --resume " + one.string() + " --checkpoint " +
                                      two.string()),
                     what + " (the other plan)");
    expect_continues(whole, 6, run_steps(3, model + " " + a + " --resume " + two.string()),
                     what + " (back)");
    auto r =
        run_hetplan("run --steps 1 " + model + " --strategy dp=1,gbs=12 --resume " + one.string());
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("step 3 was written by an op-by-op run, whose tensors go by other names "
                         "than this plan's (a stage run"),
              std::string::npos)
        << r.err;
    fs::remove_all(one);
    fs::remove_all(two);
  };
  chain("--model resnet:depth=18,width=8,image=32,classes=10", "--nprocs 2 --strategy tp=2,gbs=12",
        "--nprocs 2 --strategy tp=2,gbs=12", "ResNet");
  const auto ops = write_plan("ops", R"({"version": 1, "global_batch": 12, "op_groups": [
    {"ops": ["embedding.*", "layers.0.*", "layers.1.norm1", "layers.1.attn.*"],
     "mode": "replicate", "devices": [0, 1]},
    {"ops": ["layers.1.norm2", "layers.1.mlp.*", "head.*"], "mode": "split", "devices": [2, 3]}]})");
  const auto served = write_plan("served", R"({"version": 1, "global_batch": 12, "op_groups": [
    {"ops": ["embedding.*", "layers.0.*"], "mode": "replicate", "devices": [0, 1],
     "sync": "parameter_server"},
    {"ops": ["layers.1.*", "head.*"], "mode": "replicate", "devices": [0, 1],
     "sync": "parameter_server"}]})");
  chain(std::string("--model ") + kGpt, "--nprocs 4 --cluster cpu:4 --plan " + ops,
        "--nprocs 2 --cluster cpu:2 --plan " + served, "GPT");
  fs::remove(ops);
  fs::remove(served);
}

}  // namespace
}  // namespace hetplan::runtime

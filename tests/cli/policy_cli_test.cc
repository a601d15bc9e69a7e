// The learned guidance from the command line: train-policy writes a file that plan --policy
// reads; --algo heterog plans with the shipped weights; bad arguments name themselves.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "run_command.h"

namespace hetplan::cli {
namespace {

using testing::run_hetplan;

const std::string kProblem =
    "--model resnet:depth=18,width=8,image=32 --cluster heterog-mixed --global-batch 64";

std::string temp(const char* name) {
  return (std::filesystem::temp_directory_path() / name).string();
}

TEST(PolicyCli, HeterogPlansWithTheShippedWeights) {
  const std::string out = temp("hetplan_heterog_plan.json");
  std::filesystem::remove(out);
  auto r = run_hetplan("plan " + kProblem + " --algo heterog -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream f(out);
  const auto plan = nlohmann::json::parse(f);
  EXPECT_EQ(plan["planner"].get<std::string>(), "heterog");
  auto sim = run_hetplan(
      "simulate --model resnet:depth=18,width=8,image=32 --cluster heterog-mixed --plan " + out);
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
}

// Where every decoded plan is refused as not executable (a Llama's ops do not run op by op, and
// the decoder chose parameter servers, which keep the plan op-level), HeteroG answers with its
// data-parallel plan, which runs as a stage plan (it answered "not executable").
TEST(PolicyCli, HeterogFallsBackOnItsDataParallelPlanWhereDecodedOnesDoNotRun) {
  const std::string out = temp("hetplan_heterog_llama.json");
  std::filesystem::remove(out);
  auto r = run_hetplan(
      "plan --model llama:layers=2,hidden=64,heads=4,kv_heads=2,ffn=128,seq=32,vocab=500 "
      "--cluster cpu:4 -b 8 --algo heterog -o " +
      out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream f(out);
  const auto plan = nlohmann::json::parse(f);
  EXPECT_EQ(plan["planner"].get<std::string>(), "heterog");
  for (const auto& g : plan["op_groups"]) {
    EXPECT_EQ(g["devices"].size(), 4u);
    EXPECT_EQ(g.value("sync", std::string("all_reduce")), "all_reduce");
  }
  auto check = run_hetplan("run --check --plan " + out);
  EXPECT_EQ(check.exit_code, 0) << check.err;
  EXPECT_NE((check.out + check.err).find("runnable: 4 ranks"), std::string::npos) << check.out;
}

TEST(PolicyCli, TrainPolicyWritesWhatPlanReads) {
  const std::string file = temp("hetplan_cli_policy.pt");
  std::filesystem::remove(file);
  auto t = run_hetplan("train-policy -o " + file +
                       " --iterations 1 --cases 1 --simulations 16 --decoder-samples 2 --epochs 1");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("wrote " + file), std::string::npos) << t.out;
  auto p = run_hetplan("plan " + kProblem + " --algo tag --simulations 24 -v --policy " + file);
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_NE(p.err.find("prior trained policy " + file), std::string::npos) << p.err;
  auto u = run_hetplan("plan " + kProblem + " --algo tag --simulations 24 -v --policy none");
  ASSERT_EQ(u.exit_code, 0) << u.err;
  EXPECT_NE(u.err.find("prior uniform"), std::string::npos) << u.err;
}

TEST(PolicyCli, BadArgumentsExitTwoNamingThem) {
  auto none = run_hetplan("plan " + kProblem + " --algo heterog --policy none");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("--algo heterog"), std::string::npos) << none.err;
  auto missing = run_hetplan("plan " + kProblem + " --policy /no/such/policy.pt");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("--policy: /no/such/policy.pt"), std::string::npos) << missing.err;
  const std::string junk = temp("hetplan_junk_policy.pt");
  std::ofstream(junk) << "not a network";
  auto bad = run_hetplan("plan " + kProblem + " --policy " + junk);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("not a policy file"), std::string::npos) << bad.err;
  auto sims = run_hetplan("plan " + kProblem + " --simulations -1");
  EXPECT_EQ(sims.exit_code, 2);
  EXPECT_NE(sims.err.find("--simulations"), std::string::npos) << sims.err;
  auto out = run_hetplan("train-policy --iterations 1");
  EXPECT_EQ(out.exit_code, 2);
  EXPECT_NE(out.err.find("--out"), std::string::npos) << out.err;
  auto epochs = run_hetplan("train-policy -o " + temp("hetplan_x.pt") + " --epochs 0");
  EXPECT_EQ(epochs.exit_code, 2);
  EXPECT_NE(epochs.err.find("--epochs"), std::string::npos) << epochs.err;
  EXPECT_FALSE(std::filesystem::exists(temp("hetplan_x.pt")));
}

}  // namespace
}  // namespace hetplan::cli

// Golden runs with --model FILE.onnx: models, simulate, plan, and the flags --batch-dim and
// --allow-unknown-ops (files exported at test time by tests/model/onnx/export_models.py).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../../src/cli/onnx_flags.h"
#include "../model/onnx/exported_models.h"
#include "run_command.h"

namespace hetplan::cli {
namespace {

namespace fs = std::filesystem;
using testing::run_hetplan;
using testing::slurp;
using testing::source_path;

class OnnxCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    models_ = new hetplan::testing::ExportedModels(hetplan::testing::exported_onnx_models());
    dir_ = new fs::path(models_->dir);
    scratch_ = new fs::path(hetplan::testing::fresh_scratch_dir("hetplan_onnx_cli_"));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*scratch_);
    delete scratch_;
    delete dir_;
    delete models_;
  }
  void SetUp() override { ASSERT_TRUE(models_->ok) << models_->log; }
  // An exported file (shared: read only), and a path for what a test writes.
  static std::string scratch(const std::string& name) { return (*scratch_ / name).string(); }
  static std::string file(const std::string& name) { return (*dir_ / name).string(); }
  static std::int64_t expected_parameters(const std::string& name) {
    std::ifstream in(*dir_ / "expected.json");
    return nlohmann::json::parse(in)[name]["trainable_initializer_elements"].get<std::int64_t>();
  }

  static hetplan::testing::ExportedModels* models_;
  static fs::path* dir_;
  static fs::path* scratch_;
};
hetplan::testing::ExportedModels* OnnxCli::models_ = nullptr;
fs::path* OnnxCli::dir_ = nullptr;
fs::path* OnnxCli::scratch_ = nullptr;

TEST_F(OnnxCli, ModelsJsonCountsTheTrainableInitializers) {
  for (const char* name : {"mlp-batch4.onnx", "gpt-block.onnx"}) {
    auto r = run_hetplan("models " + file(name) + " --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["parameters"].get<std::int64_t>(), expected_parameters(name)) << name;
    EXPECT_GT(j["forward_flops_per_sample"].get<double>(), 0);
  }
}

TEST_F(OnnxCli, SimulateGivesATime) {
  auto r = run_hetplan("simulate --model " + file("gpt-block.onnx") +
                       " --cluster dgx-a100:1 --strategy dp=8,mbs=4,gbs=64 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["iteration_time_s"].get<double>(), 0);
}

TEST_F(OnnxCli, APlanRecordsTheModelWithItsFlagsAndSimulatesFromIt) {
  const std::string plan = scratch("plan.json");
  // The runtime executes none of an ONNX model's plans: plan says so, and --any-form plans it
  // for simulate and export.
  auto refused = run_hetplan("plan --model " + file("mlp-batch4.onnx") +
                             " --cluster dgx-a100:1 --out " + plan);
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("--any-form"), std::string::npos) << refused.err;
  EXPECT_FALSE(fs::exists(plan));
  auto r =
      run_hetplan("plan --model " + file("mlp-batch4.onnx") +
                  " --batch-dim 0 --any-form --cluster dgx-a100:1 --algo megatron --out " + plan);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(plan);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["model"].get<std::string>(), file("mlp-batch4.onnx") + ":batch-dim=0");
  auto sim = run_hetplan("simulate --plan " + plan);
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_NE(sim.out.find("iteration"), std::string::npos);
  // Megatron-LM builds its own architectures: not an imported one. DeepSpeed runs the user's.
  auto megatron = run_hetplan("export --to megatron --plan " + plan + " --out " + scratch("mg"));
  EXPECT_EQ(megatron.exit_code, 2);
  EXPECT_NE(megatron.err.find("imported from ONNX"), std::string::npos) << megatron.err;
  EXPECT_FALSE(fs::exists(scratch("mg")));
  auto deepspeed = run_hetplan("export --to deepspeed --plan " + plan + " --out " + scratch("ds"));
  EXPECT_EQ(deepspeed.exit_code, 0) << deepspeed.err;
  EXPECT_TRUE(fs::exists(scratch("ds") + "/ds_config.json"));
}

TEST_F(OnnxCli, UnknownOpsAreRefusedUnlessAllowed) {
  auto refused = run_hetplan("models " + file("custom-op.onnx"));
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("com.example.Foo x1"), std::string::npos) << refused.err;
  EXPECT_EQ(refused.err.find('\n'), refused.err.size() - 1) << refused.err;  // one line
  auto allowed = run_hetplan("models " + file("custom-op.onnx") + " --allow-unknown-ops --json");
  ASSERT_EQ(allowed.exit_code, 0) << allowed.err;
  EXPECT_NE(allowed.err.find("warning: "), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(allowed.out)["parameters"].get<std::int64_t>(), 280);
}

TEST_F(OnnxCli, ACorruptFileIsOneErrorNamingIt) {
  const std::string bad = scratch("corrupt.onnx");
  const std::string bytes = slurp(file("gpt-block.onnx"));
  std::ofstream(bad, std::ios::binary) << bytes.substr(0, bytes.size() / 3);
  for (const std::string& cmd :
       {"models " + bad + " --json", "simulate --model " + bad + " --cluster dgx-a100:1"}) {
    auto r = run_hetplan(cmd);
    EXPECT_EQ(r.exit_code, 2) << cmd;
    EXPECT_EQ(r.out, "") << cmd;
    EXPECT_NE(r.err.find(bad + ": expected an ONNX model"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  }
}

TEST(OnnxFlags, FoldIntoTheOnnxModelsSpec) {
  std::vector<std::string> args = {"simulate", "--batch-dim", "1",
                                   "--model",  "m.onnx",      "--allow-unknown-ops"};
  EXPECT_EQ(fold_onnx_flags(args), "");
  EXPECT_EQ(args, (std::vector<std::string>{"simulate", "--model",
                                            "m.onnx:batch-dim=1,allow-unknown-ops=true"}));
  args = {"models", "m.onnx:sequence=4", "--batch-dim=2"};
  EXPECT_EQ(fold_onnx_flags(args), "");
  EXPECT_EQ(args, (std::vector<std::string>{"models", "m.onnx:sequence=4,batch-dim=2"}));
  args = {"simulate", "--model", "gpt3-1.3b", "--batch-dim", "1"};
  EXPECT_NE(fold_onnx_flags(args).find("--batch-dim: expected an ONNX model"), std::string::npos);
  args = {"simulate", "--batch-dim"};
  EXPECT_NE(fold_onnx_flags(args), "");
  args = {"simulate", "--model", "gpt3-1.3b"};
  EXPECT_EQ(fold_onnx_flags(args), "");
  EXPECT_EQ(args.size(), 3u);
}

}  // namespace
}  // namespace hetplan::cli

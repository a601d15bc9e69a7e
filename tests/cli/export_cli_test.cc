// Golden runs of `hetplan export`: the files it writes, what it says an engine cannot express,
// --exact, and its errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "run_command.h"

namespace hetplan::cli {
namespace {

namespace fs = std::filesystem;
using testing::run_hetplan;
using testing::slurp;
using testing::source_path;

fs::path scratch(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("hetplan_export_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

TEST(ExportCli, WritesTheEngineFilesAndSaysWhatItCannotExpress) {
  const std::string plan = source_path("data/plans/gpt3-125m-heterog-2stage.json");
  const fs::path out = scratch("megatron");
  auto r = run_hetplan("export --to megatron --plan " + plan + " --out " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote " + (out / "megatron.sh").string()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("megatron does not express all of the plan:\n  - stage 1 gives its "
                       "replicas uneven batch shares"),
            std::string::npos)
      << r.out;
  // The plan's model and cluster (gpt3-125m, heterog-mixed): its 12 blocks, its 8 devices.
  const std::string script = slurp((out / "megatron.sh").string());
  EXPECT_NE(script.find("--num-layers 12"), std::string::npos);
  EXPECT_NE(script.find("NNODES=4"), std::string::npos) << script;
  EXPECT_TRUE((fs::status(out / "megatron.sh").permissions() & fs::perms::owner_exec) !=
              fs::perms::none);
  EXPECT_EQ(std::system(("bash -n " + (out / "megatron.sh").string()).c_str()), 0);

  r = run_hetplan("export --to deepspeed --plan " + plan + " --out " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* f : {"ds_config.json", "hostfile", "deepspeed.sh"})
    EXPECT_TRUE(fs::exists(out / f)) << f;
  EXPECT_EQ(std::system(("bash -n " + (out / "deepspeed.sh").string()).c_str()), 0);
  fs::remove_all(out);
}

TEST(ExportCli, TorchrunOfAPlanTheRuntimeRuns) {
  // The runtime's check is hetplan-runtime's.
  if (!fs::exists(fs::path(HETPLAN_BINARY).parent_path() / "hetplan-runtime"))
    GTEST_SKIP() << "built without the runtime";
  const fs::path out = scratch("torchrun");
  const std::string plan =
      (fs::temp_directory_path() / ("hetplan_export_plan_" + std::to_string(::getpid()) + ".json"))
          .string();
  auto r = run_hetplan(
      "plan --model gpt3-125m --cluster dgx-a100:1 --algo megatron --global-batch 64 --out " +
      plan);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_hetplan("export --to torchrun --plan " + plan + " --out " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("torchrun realises the plan as written"), std::string::npos) << r.out;
  const std::string script = slurp((out / "torchrun.sh").string());
  EXPECT_NE(script.find("--model 'gpt3-125m' --cluster 'dgx-a100:1'"), std::string::npos) << script;
  EXPECT_NE(script.find("--precision bf16"), std::string::npos);
  EXPECT_TRUE(fs::exists(out / "plan.json"));
  EXPECT_EQ(std::system(("bash -n " + (out / "torchrun.sh").string()).c_str()), 0);
  fs::remove_all(out);
  fs::remove(plan);
}

TEST(ExportCli, ExactWritesNothingWhenTheEngineDiffers) {
  const fs::path out = scratch("exact");
  auto r = run_hetplan("export --to megatron --exact --plan " +
                       source_path("data/plans/gpt3-125m-heterog-2stage.json") + " --out " +
                       out.string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--exact: megatron cannot express the plan as written:\n  - "),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(out));
}

TEST(ExportCli, BadInputGetsOneClearMessage) {
  const std::string plan = source_path("data/plans/gpt3-125m-heterog-2stage.json");
  const fs::path out = scratch("bad");
  auto r = run_hetplan("export --to horovod --plan " + plan + " --out " + out.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--to: expected megatron|deepspeed|torchrun, got \"horovod\""),
            std::string::npos)
      << r.err;
  r = run_hetplan("export --to megatron --plan /nonexistent.json --out " + out.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("/nonexistent.json"), std::string::npos) << r.err;
  r = run_hetplan("export --to megatron --plan " + plan + " --out " + plan);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("is not a directory"), std::string::npos) << r.err;
  r = run_hetplan("export --to megatron --plan " + plan + " --model gpt3-350m --out " +
                  out.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--model: gpt3-350m is not the plan's model"), std::string::npos) << r.err;
  r = run_hetplan("export --to megatron --plan " + plan + " --master-port 70000 --out " +
                  out.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--master-port"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace hetplan::cli

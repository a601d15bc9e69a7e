// hetplan starts without libtorch, and runs what needs it in hetplan-runtime beside it; plan checks
// what the runtime executes without it.
#include <gtest/gtest.h>

#include <filesystem>

#include "run_command.h"

namespace hetplan::cli {
namespace {

using testing::run_hetplan;
using testing::slurp;

const std::string kCheckArgs =
    "run --check --model resnet:depth=18,width=8,image=32,classes=10 --cluster cpu:2 "
    "--strategy dp=2,gbs=8";

TEST(Startup, HetplanLoadsNoLibtorch) {
  // The dynamic loader lists what the binary maps at start-up (what ldd prints).
  const auto out =
      std::filesystem::temp_directory_path() / ("hetplan_startup_" + std::to_string(::getpid()));
  const std::string cmd =
      "LD_TRACE_LOADED_OBJECTS=1 " + std::string(HETPLAN_BINARY) + " >" + out.string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const std::string libs = slurp(out.string());
  std::filesystem::remove(out);
  EXPECT_NE(libs.find("libc.so"), std::string::npos) << libs;  // the listing is there
  EXPECT_EQ(libs.find("libtorch"), std::string::npos) << libs;
  EXPECT_EQ(libs.find("libc10"), std::string::npos) << libs;
}

TEST(Startup, RunsWhatNeedsLibtorchInHetplanRuntime) {
  const auto dir = std::filesystem::path(HETPLAN_BINARY).parent_path();
  if (!std::filesystem::exists(dir / "hetplan-runtime"))
    GTEST_SKIP() << "built without the runtime";
  const auto r = run_hetplan(kCheckArgs);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("runnable: 2 ranks"), std::string::npos) << r.out;
}

TEST(Startup, SaysWhatNeedsLibtorchWhereNoHetplanRuntimeIsBeside) {
  // A copy of hetplan alone in a directory: what needs libtorch gets one clear error.
  const auto dir =
      std::filesystem::temp_directory_path() / ("hetplan_alone_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto alone = dir / "hetplan";
  std::filesystem::copy_file(HETPLAN_BINARY, alone,
                             std::filesystem::copy_options::overwrite_existing);
  auto run_alone = [&](const std::string& args) {
    const std::string cmd = alone.string() + " " + args + " >" + (dir / "out").string() + " 2>" +
                            (dir / "err").string();
    const int status = std::system(cmd.c_str());
    return std::make_pair(WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                          slurp((dir / "err").string()));
  };
  const auto [check_code, check_err] = run_alone(kCheckArgs);
  EXPECT_EQ(check_code, 2);
  EXPECT_NE(check_err.find("hetplan: error: run: this hetplan was built without the runtime"),
            std::string::npos)
      << check_err;
  // plan checks what the runtime executes without libtorch (runtime/runnable.h): alone, it still
  // refuses HAP's program for Llama 2 13B on a100-v100 that mixes tensor and batch splits (which
  // --any-form takes; PlannersRunAnyForm runs both) and chooses what the build's hetplan chooses.
  // In fp16, which the V100s train in (they have no bf16).
  const std::string plan =
      "plan --model llama2-13b:dtype=fp16 --cluster a100-v100 --global-batch 64 --algo hap -o ";
  const auto any_form = dir / "any_form.json", runnable = dir / "runnable.json",
             beside = dir / "beside.json";
  const auto [any_code, any_err] = run_alone(plan + any_form.string() + " --any-form");
  ASSERT_EQ(any_code, 0) << any_err;
  const auto [runnable_code, runnable_err] = run_alone(plan + runnable.string() + " --runnable");
  ASSERT_EQ(runnable_code, 0) << runnable_err;
  const auto r = run_hetplan(plan + beside.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(slurp(any_form.string()), slurp(runnable.string()));
  EXPECT_EQ(slurp(runnable.string()), slurp(beside.string()));
  // What needs no libtorch still runs.
  const auto [devices_code, devices_err] = run_alone("devices");
  EXPECT_EQ(devices_code, 0) << devices_err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hetplan::cli

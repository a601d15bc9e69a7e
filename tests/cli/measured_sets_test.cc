// scripts/measured_accuracy.py over data/measured/: every published run it lists is a row hetplan
// reads and simulates (or says does not fit), and each set gets its summary line.
#include <gtest/gtest.h>

#include "run_command.h"

namespace hetplan::cli::testing {
namespace {

TEST(MeasuredSets, EveryRowSimulates) {
  const std::string cmd = "python3 " + source_path("scripts/measured_accuracy.py") +
                          " --check --hetplan " + HETPLAN_BINARY + " >/tmp/measured_sets_" +
                          std::to_string(::getpid()) + " 2>&1";
  const int status = std::system(cmd.c_str());
  const std::string out = slurp("/tmp/measured_sets_" + std::to_string(::getpid()));
  std::remove(("/tmp/measured_sets_" + std::to_string(::getpid())).c_str());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  for (const char* set : {"a100-korthikanti", "a100-mpt-small", "h100-mpt-bf16", "v100-megatron",
                          "v100-hf-bert", "gh200-alps-megatron"})
    EXPECT_NE(out.find(std::string("\n") + set), std::string::npos) << set << "\n" << out;
  EXPECT_NE(out.find("v100-megatron (held out)"), std::string::npos) << out;
  EXPECT_NE(out.find("v100-hf-bert (held out)"), std::string::npos) << out;
  EXPECT_NE(out.find("gh200-alps-megatron (held out)"), std::string::npos) << out;
}

}  // namespace
}  // namespace hetplan::cli::testing

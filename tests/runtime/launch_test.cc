// The torchrun variables a worker reads.
#include "hetplan/runtime/launch.h"

#include <gtest/gtest.h>

namespace hetplan::runtime {
namespace {

TEST(RankEnv, NoVariablesIsOneProcess) {
  auto r = rank_env_from({});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->rank, 0);
  EXPECT_EQ(r->world_size, 1);
  EXPECT_EQ(r->master_addr, "127.0.0.1");
}

TEST(RankEnv, ReadsTorchrunVariables) {
  auto r = rank_env_from({{"MASTER_ADDR", "node7"},
                          {"MASTER_PORT", "29600"},
                          {"RANK", "3"},
                          {"WORLD_SIZE", "4"},
                          {"LOCAL_RANK", "1"}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->master_addr, "node7");
  EXPECT_EQ(r->master_port, 29600);
  EXPECT_EQ(r->rank, 3);
  EXPECT_EQ(r->world_size, 4);
  EXPECT_EQ(r->local_rank, 1);
}

TEST(RankEnv, BadVariablesAreNamed) {
  auto expect_error = [](std::map<std::string, std::string> env, const std::string& text) {
    auto r = rank_env_from(env);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find(text), std::string::npos) << r.error().message;
  };
  expect_error({{"RANK", "0"}}, "WORLD_SIZE: expected it set together with RANK");
  expect_error({{"RANK", "4"}, {"WORLD_SIZE", "4"}}, "RANK: expected an integer in [0, 3]");
  expect_error({{"RANK", "x"}, {"WORLD_SIZE", "2"}}, "RANK: expected an integer");
  expect_error({{"MASTER_PORT", "70000"}}, "MASTER_PORT: expected an integer in [1, 65535]");
  expect_error({{"MASTER_ADDR", ""}}, "MASTER_ADDR: expected a host name");
}

}  // namespace
}  // namespace hetplan::runtime

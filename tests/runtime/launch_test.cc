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

TEST(RankEnv, TorchrunsAgentStore) {
  // Without torchrun's agent store, RANK 0 serves the job's store.
  auto own = rank_env_from({{"RANK", "0"}, {"WORLD_SIZE", "2"}});
  ASSERT_TRUE(own) << own.error().message;
  EXPECT_TRUE(own->serves_store);
  EXPECT_EQ(own->store_prefix, "");
  // Static rendezvous: the agent serves it; every worker is a client under the attempt's prefix.
  auto agent = rank_env_from({{"RANK", "0"},
                              {"WORLD_SIZE", "2"},
                              {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                              {"TORCHELASTIC_RESTART_COUNT", "2"}});
  ASSERT_TRUE(agent) << agent.error().message;
  EXPECT_FALSE(agent->serves_store);
  EXPECT_EQ(agent->store_prefix, "/worker/attempt_2");
  EXPECT_EQ(agent->launcher_rank, 0);
  auto c10d = rank_env_from(
      {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_USE_AGENT_STORE", "False"}});
  ASSERT_TRUE(c10d) << c10d.error().message;
  EXPECT_FALSE(c10d->serves_store);  // rank 1
  EXPECT_EQ(c10d->store_prefix, "");
  auto bad = rank_env_from({{"RANK", "0"},
                            {"WORLD_SIZE", "2"},
                            {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                            {"TORCHELASTIC_RESTART_COUNT", "x"}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("TORCHELASTIC_RESTART_COUNT"), std::string::npos);
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

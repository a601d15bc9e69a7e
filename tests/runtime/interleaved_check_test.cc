// What the stage runtime runs of the interleaved schedule: every rank its model chunks, stages
// s, s + P, ..., whose replicas must be the rank's own (the same devices in the same order, with
// the same tp_shares).
#include <gtest/gtest.h>

#include "hetplan/model/zoo.h"
#include "hetplan/plan/plan_json.h"
#include "hetplan/runtime/run.h"
#include "hetplan/runtime/runnable.h"
#include "unlike_lanes_plan.h"

namespace hetplan::runtime {
namespace {

// The shared plan (unlike_lanes_plan.h) with `last` the fourth stage's replica.
plan::Plan interleaved(const std::string& last) {
  auto p =
      plan::plan_from_json(nlohmann::json::parse(testing::unlike_lanes_plan(last)), "interleaved");
  EXPECT_TRUE(p) << p.error().message;
  return *p;
}

TEST(InterleavedCheck, RunsModelChunksOnTheirRanksReplicas) {
  auto m = model::load_model("gpt:layers=4,hidden=64,heads=4,seq=32,vocab=256");
  ASSERT_TRUE(m);
  const auto same =
      interleaved(R"({"devices": [2, 3], "tp_shares": [0.75, 0.25], "batch_share": 1})");
  auto ok = check_executable(*m, same, 4);
  EXPECT_TRUE(ok) << ok.error().message;
  // Its ranks are the two device groups' four devices, not one per stage.
  EXPECT_EQ(rank_devices(same), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_FALSE(check_executable(*m, same, 6));
  const std::string refused =
      "plan: stages[3].replicas: under the interleaved schedule stage 3 runs on the ranks of "
      "stages[1], which split every model chunk they hold alike (expected its replicas: the same "
      "devices in the same order, with the same tp_shares)";
  Result<bool> no = true;
  for (const std::string other :
       {R"({"devices": [3, 2], "tp_shares": [0.75, 0.25], "batch_share": 1})",
        R"({"devices": [2, 3], "tp_shares": [0.5, 0.5], "batch_share": 1})"}) {
    no = check_executable(*m, interleaved(other), 4);
    ASSERT_FALSE(no) << other;
    EXPECT_EQ(no.error().message, refused);
  }
  // Every chunk on one device group: nothing to pass between ranks.
  auto alone = same;
  alone.stages.resize(2);
  alone.stages[1] = alone.stages[0];
  alone.stages[1].first_layer = 2;
  alone.stages[1].num_layers = 4;
  no = check_executable(*m, alone, 2);
  ASSERT_FALSE(no);
  EXPECT_EQ(no.error().message,
            "plan: stages: every stage runs on the devices of stages[0]; the stage runtime runs "
            "the interleaved schedule over two pipeline positions or more (one rank passes nothing "
            "to itself)");
  // Under another schedule no stage may run on another's devices.
  auto plain = same;
  plain.schedule = plan::Schedule::one_f_one_b;
  no = check_executable(*m, plain, 4);
  ASSERT_FALSE(no);
  EXPECT_EQ(no.error().message,
            "plan: stages[2]: runs on the devices of stages[0]; only the interleaved schedule runs "
            "several stages on one device");
}

}  // namespace
}  // namespace hetplan::runtime

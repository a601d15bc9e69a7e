// run_form: the plan as `hetplan run` executes it, and plan_devices.
#include "hetplan/plan/run_form.h"

#include <gtest/gtest.h>

#include "plan_fixtures.h"

namespace hetplan::plan {
namespace {

using testing::tiny_gpt;

Plan base() {
  Plan p;
  p.global_batch = 16;
  p.grad_bucket_bytes = 1e6;
  return p;
}

TEST(RunForm, AStagePlanThatSplitsByTensorRunsAsWritten) {
  Plan p = base();
  Stage st;
  st.num_layers = 4;
  st.replicas = {{{0, 1}, {}, 0.5}, {{5, 3}, {}, 0.5}};
  p.stages = {st};
  const RunForm f = run_form(p, tiny_gpt(2));
  EXPECT_EQ(f.stages_from_op_level, 0);
  EXPECT_FALSE(f.per_device_replicas);
  EXPECT_EQ(f.plan.stages.size(), 1u);
  EXPECT_EQ(f.plan.stages[0].replicas.size(), 2u);
  EXPECT_EQ(plan_devices(f.plan), (std::set<int>{0, 1, 3, 5}));
}

TEST(RunForm, AnOpLevelDataParallelPlanRunsAsOneReplicaPerDevice) {
  Plan p = base();
  OpGroup g;
  g.ops = {"*"};
  g.devices = {2, 0, 1};
  g.shares = {0.25, 0.5, 0.25};
  p.op_groups = {g};
  EXPECT_EQ(plan_devices(p), (std::set<int>{0, 1, 2}));
  const RunForm f = run_form(p, tiny_gpt(2));
  EXPECT_EQ(f.stages_from_op_level, 1);
  EXPECT_FALSE(f.plan.is_op_level());
  ASSERT_EQ(f.plan.stages.size(), 1u);
  double total = 0;
  for (const auto& r : f.plan.stages[0].replicas) {
    EXPECT_EQ(r.devices.size(), 1u);
    total += r.batch_share;
  }
  EXPECT_NEAR(total, 1.0, 1e-12);
  EXPECT_EQ(plan_devices(f.plan), (std::set<int>{0, 1, 2}));
}

TEST(RunForm, ReplicasSplittingEveryOpByBatchBecomeOnePerDevice) {
  Plan p = base();
  Stage st;
  st.num_layers = 4;
  st.replicas = {{{0, 1, 2}, {0.5, 0.3, 0.2}, 0.8}, {{3, 4}, {}, 0.2}};
  p.stages = {st};
  p.op_overrides = {{"*", SplitKind::batch}};
  const RunForm f = run_form(p, tiny_gpt(2));
  EXPECT_EQ(f.stages_from_op_level, 0);
  EXPECT_TRUE(f.per_device_replicas);
  ASSERT_EQ(f.plan.stages.size(), 1u);
  EXPECT_EQ(f.plan.stages[0].replicas.size(), 5u);
  EXPECT_TRUE(f.plan.op_overrides.empty());
}

}  // namespace
}  // namespace hetplan::plan

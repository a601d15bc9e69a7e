// SimOptions::stop: asked before a plan is lowered and every 1024 tasks and events after,
// it abandons the simulation (Error{kSimulationStopped}); one that never says stop changes nothing.
#include <gtest/gtest.h>

#include <string>

#include "hetplan/cluster/cluster_file.h"
#include "hetplan/model/zoo.h"
#include "hetplan/plan/op_groups.h"
#include "hetplan/plan/strategy.h"
#include "hetplan/sim/simulate.h"

namespace hetplan::sim {
namespace {

struct Case {
  const char* name;
  const char* cluster;
  const char* model;
  const char* strategy;
  bool op_level = false;
  plan::GradPriority priority = plan::GradPriority::none;
  double cpu_share = 0;  // of every node, when > 0
};

// Large enough that lowering and running take many thousand polls: a stage plan, the same plan
// op by op, a plan with DLCP's chunked gradients (iterations unrolled), and one on nodes under a
// CPU quota (iterations run back to back).
const Case kCases[] = {
    {"stage plan", "dgx-a100:8", "gpt3-350m", "dp=16,tp=2,pp=2,mbs=1,gbs=1024"},
    {"op level", "dgx-a100:2", "gpt3-125m", "dp=8,tp=2,pp=1,mbs=1,gbs=64", true},
    {"chunked gradients", "dgx-a100:4", "gpt3-125m", "dp=16,tp=1,pp=2,mbs=1,gbs=512", false,
     plan::GradPriority::layer},
    {"cpu quota", "dgx-a100:2", "gpt3-125m", "dp=8,tp=1,pp=2,mbs=1,gbs=256", false,
     plan::GradPriority::none, 0.5},
};

plan::Plan plan_of(const Case& k, const model::Model& m, const cluster::Cluster& c) {
  auto st = plan::parse_strategy(k.strategy);
  EXPECT_TRUE(st);
  auto p = plan::plan_from_strategy(*st, m, c);
  EXPECT_TRUE(p) << p.error().message;
  p->grad_priority = k.priority;
  if (!k.op_level) return *p;
  auto op = plan::as_op_level_plan(*p, m);
  EXPECT_TRUE(op);
  return *op;
}

TEST(SimulateStop, AbandonsTheSimulationOnceStopSaysSoAndChangesNothingOtherwise) {
  for (const Case& k : kCases) {
    SCOPED_TRACE(k.name);
    auto c = cluster::load_cluster(k.cluster);
    const auto m = model::load_model(k.model);
    ASSERT_TRUE(c && m);
    if (k.cpu_share > 0)
      for (auto& node : c->nodes) node.cpu_share = k.cpu_share;
    const plan::Plan p = plan_of(k, *m, *c);
    SimOptions plain;
    const auto reference = simulate(*m, *c, p, plain);
    ASSERT_TRUE(reference) << reference.error().message;
    ASSERT_GT(reference->num_tasks + reference->num_events, 3 * 1024);

    // Never stopping: asked many times, the same result.
    int asked = 0;
    SimOptions never = plain;
    never.stop = [&] {
      ++asked;
      return false;
    };
    const auto same = simulate(*m, *c, p, never);
    ASSERT_TRUE(same);
    EXPECT_EQ(same->iteration_time.value, reference->iteration_time.value);
    EXPECT_EQ(same->max_peak_memory.value, reference->max_peak_memory.value);
    EXPECT_EQ(same->num_events, reference->num_events);
    // Once up front, then once per 1024 tasks lowered and per 1024 events run.
    EXPECT_GE(asked, 1 + (reference->num_tasks + reference->num_events) / 1024 - 2);

    // Stopping at once: nothing is lowered.
    SimOptions at_once = plain;
    at_once.stop = [] { return true; };
    const auto none = simulate(*m, *c, p, at_once);
    ASSERT_FALSE(none);
    EXPECT_EQ(none.error().message, kSimulationStopped);

    // Stopping on the second and third time asked: in the middle of the lowering or of the run.
    for (int when : {2, 3}) {
      int calls = 0;
      SimOptions later = plain;
      later.stop = [&] { return ++calls >= when; };
      const auto cut = simulate(*m, *c, p, later);
      ASSERT_FALSE(cut);
      EXPECT_EQ(cut.error().message, kSimulationStopped);
      EXPECT_EQ(calls, when);
    }
  }
}

}  // namespace
}  // namespace hetplan::sim

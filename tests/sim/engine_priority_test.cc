// Link sharing by priority (DLCP): exact times on a one-link case, and a plan's grad_sync
// priorities reaching the engine.
#include <gtest/gtest.h>

#include "../../src/sim/task_graph.h"
#include "sim_fixtures.h"

namespace hetplan::sim {
namespace {

// Two transfers of 1 byte each over one link of 1 B/s, both ready at time 0.
detail::EngineResult two_flows(int priority_a, int priority_b) {
  detail::TaskGraph g;
  g.loads = {cost::LinkLoad{0, 1.0}, cost::LinkLoad{0, 1.0}};
  for (int i = 0; i < 2; ++i) {
    detail::Task t;
    t.kind = TaskKind::grad_sync;
    t.is_transfer = true;
    t.stream = g.add_stream();
    t.duration = 1.0;  // alone: 1 s
    t.loads_begin = i;
    t.loads_end = i + 1;
    t.priority = i == 0 ? priority_a : priority_b;
    g.add_task(t);
  }
  return detail::run_engine(g, {1.0});
}

TEST(EnginePriority, EqualPrioritiesShareTheLink) {
  const auto r = two_flows(0, 0);
  EXPECT_DOUBLE_EQ(r.end[0], 2.0);
  EXPECT_DOUBLE_EQ(r.end[1], 2.0);
}

TEST(EnginePriority, HigherPriorityGoesFirst) {
  const auto r = two_flows(0, 3);
  EXPECT_DOUBLE_EQ(r.end[1], 1.0);  // full speed
  EXPECT_DOUBLE_EQ(r.end[0], 2.0);  // starved, then full speed
  const auto s = two_flows(-1, -2);
  EXPECT_DOUBLE_EQ(s.end[0], 1.0);
  EXPECT_DOUBLE_EQ(s.end[1], 2.0);
  EXPECT_FALSE(s.deadlock);
}

TEST(EnginePriority, PlanPrioritiesOrderGradientSynchronisation) {
  // Two stages, each with two replicas on two nodes: both stages' gradient all-reduces cross the
  // same NICs at the end of the iteration. Giving layer 0 priority makes its all-reduce finish
  // sooner than without.
  const auto m = testing::chain_model(2, 1e9, 1e3, 500'000'000);
  const auto c = testing::unit_cluster(2, 2);
  plan::Plan p;
  p.global_batch = 2;
  p.num_microbatches = 1;
  p.stages.push_back(plan::Stage{0, 1, {plan::Replica{{0}, {}, 0.5}, plan::Replica{{2}, {}, 0.5}}});
  p.stages.push_back(plan::Stage{1, 1, {plan::Replica{{1}, {}, 0.5}, plan::Replica{{3}, {}, 0.5}}});
  auto sync_end = [&](const plan::Plan& q, int stage) {
    auto r = simulate(m, c, q, testing::exact_options());
    EXPECT_TRUE(r) << r.error().message;
    for (const auto& e : r->events)
      if (e.kind == TaskKind::grad_sync && e.stage == stage) return e.end.value;
    return -1.0;
  };
  const double plain = sync_end(p, 0);
  p.grad_sync.push_back(
      plan::GradSync{"layers.0.*", plan::SyncMethod::all_reduce, cost::Algorithm::automatic, 1});
  const double first = sync_end(p, 0);
  EXPECT_GT(plain, 0);
  EXPECT_LT(first, plain);
}

}  // namespace
}  // namespace hetplan::sim

// CPU quotas (cluster.h's cpu_share as the kernel's CFS bandwidth control): exact times on
// one-stream cases, and the simulator's steady state over back-to-back iterations.
#include <gtest/gtest.h>

#include <vector>

#include "../../src/sim/task_graph.h"
#include "sim_fixtures.h"

namespace hetplan::sim {
namespace {

// A graph whose first stream computes under a quota of half a core per 0.1 s period.
detail::TaskGraph half_core_graph() {
  detail::TaskGraph g;
  g.quotas.push_back(detail::CpuQuota{0.5, 0.1});
  g.add_stream(0);
  return g;
}

int add_compute(detail::TaskGraph& g, double seconds) {
  detail::Task t;
  t.stream = 0;
  t.duration = seconds;
  return g.add_task(t);
}

// A transfer of `seconds` (all latency: it has no links) on a stream of its own, keeping the
// quota's messaging busy.
int add_messaging(detail::TaskGraph& g, double seconds) {
  detail::Task t;
  t.kind = TaskKind::grad_sync;
  t.is_transfer = true;
  t.stream = g.add_stream();
  t.latency = seconds;
  const int id = g.add_task(t);
  g.add_quota(id, 0);
  return id;
}

TEST(EngineQuota, ComputeRunsWhileTheBudgetLastsThenWaitsForTheNextPeriod) {
  // 0.08 s of compute: 0.05 s (the budget), throttled until 0.1 s, then the last 0.03 s.
  auto g = half_core_graph();
  add_compute(g, 0.08);
  const auto r = detail::run_engine(g, {});
  EXPECT_NEAR(r.end[0], 0.13, 1e-12);
  // Under the budget it runs at full speed: 0.04 s takes 0.04 s, not 0.08 s.
  auto h = half_core_graph();
  add_compute(h, 0.04);
  EXPECT_NEAR(detail::run_engine(h, {}).end[0], 0.04, 1e-12);
}

TEST(EngineQuota, MessagingSpendsTheBudgetAtTheShare) {
  // 0.06 s of messaging at half a core spends 0.03 s of the 0.05 s budget; the 0.03 s of compute
  // after it runs 0.02 s, waits for the period's end at 0.1 s and ends at 0.11 s.
  auto g = half_core_graph();
  const int m = add_messaging(g, 0.06);
  const int c = add_compute(g, 0.03);
  g.add_edge(m, c);
  const auto r = detail::run_engine(g, {});
  EXPECT_NEAR(r.end[m], 0.06, 1e-12);
  EXPECT_NEAR(r.end[c], 0.11, 1e-12);
}

TEST(EngineQuota, MessagingBeyondTheBudgetIsPaidFromTheNextPeriod) {
  // Compute (0.06 s) and messaging from 0: the budget (0.05 s) goes at 1.5 per second, out at
  // 1/30 s with 1/30 s computed; the messaging goes on to 0.1 s, spending 1/30 s more, a debt.
  // The next period's budget is 0.05 - 1/30 s, computed by 0.1 + 1/60 s; the last 0.01 s of
  // compute waits for the period after (a whole budget would have ended it at 0.1 + 2/75 s).
  auto g = half_core_graph();
  const int c = add_compute(g, 0.06);
  const int m = add_messaging(g, 0.1);
  const auto r = detail::run_engine(g, {});
  EXPECT_NEAR(r.end[m], 0.1, 1e-12);
  EXPECT_NEAR(r.end[c], 0.21, 1e-12);
}

TEST(EngineQuota, IterationsCarryTheirBudgetOnward) {
  // Each iteration computes 0.03 s. The first starts with a whole budget and ends at 0.03 s; the
  // second (from 0.03 s, its time 0) has 0.02 s left, is throttled from 0.05 s to the period's
  // end at 0.1 s and ends at 0.11 s, 0.08 s after it started, with 0.04 s of the next budget.
  auto g = half_core_graph();
  add_compute(g, 0.03);
  detail::EngineCarry carry;
  const auto first = detail::run_engine(g, {}, &carry);
  EXPECT_NEAR(first.end[0], 0.03, 1e-12);
  EXPECT_NEAR(carry.period_end[0], 0.07, 1e-12);
  const auto second = detail::run_engine(g, {}, &carry);
  EXPECT_NEAR(second.end[0], 0.08, 1e-12);
  EXPECT_NEAR(carry.budget[0], 0.04, 1e-12);
  EXPECT_NEAR(carry.period_end[0], 0.1 - 0.01, 1e-12);
}

TEST(EngineQuota, ACompleteTaskIsNotHeldByAThrottledQuota) {
  // The budget runs out at 0.05 s with the first task's compute; the second takes no time and
  // ends then, not at the period's end.
  auto g = half_core_graph();
  add_compute(g, 0.05);
  const int empty = add_compute(g, 0.0);
  const auto r = detail::run_engine(g, {});
  EXPECT_NEAR(r.end[empty], 0.05, 1e-12);
}

TEST(EngineQuota, QuotasShareTheHostsCoresWhileMoreComputeThanItHas) {
  // One core for quotas of 0.6 (0.05 s of compute) and 0.2 (0.03 s). Both compute at half speed
  // until the second's budget (0.02 s) runs out at 0.04 s; the first, 0.02 s done, then has the
  // core and ends at 0.07 s. The second is throttled until 0.1 s and computes its last 0.01 s
  // alone, ending at 0.11 s.
  detail::TaskGraph g;
  g.quotas = {detail::CpuQuota{0.6, 0.1}, detail::CpuQuota{0.2, 0.1}};
  g.host_cores = 1;
  for (int q = 0; q < 2; ++q) {
    detail::Task t;
    t.stream = g.add_stream(q);
    t.duration = q == 0 ? 0.05 : 0.03;
    g.add_task(t);
  }
  auto r = detail::run_engine(g, {});
  EXPECT_NEAR(r.end[0], 0.07, 1e-12);
  EXPECT_NEAR(r.end[1], 0.11, 1e-12);
  // With a core each, the first ends at 0.05 s; the second, throttled at 0.02 s, still at 0.11 s.
  g.host_cores = 0;
  r = detail::run_engine(g, {});
  EXPECT_NEAR(r.end[0], 0.05, 1e-12);
  EXPECT_NEAR(r.end[1], 0.11, 1e-12);
  // A quota of two processes on two cores beside one of one: each at 2/3 of full speed, 0.03 s of
  // compute in 0.045 s, within both budgets.
  g.quotas = {detail::CpuQuota{0.6, 0.1, 2}, detail::CpuQuota{0.6, 0.1, 1}};
  g.tasks[1].duration = 0.03;
  g.tasks[0].duration = 0.03;
  g.host_cores = 2;
  r = detail::run_engine(g, {});
  EXPECT_NEAR(r.end[0], 0.045, 1e-12);
  EXPECT_NEAR(r.end[1], 0.045, 1e-12);
}

// A one-layer model of `flops` per sample on one node of a device per replica, each at
// `cpu_share` of a core, the replicas taking `shares` of one micro-batch of `batch` samples.
struct QuotaCase {
  model::Model m;
  cluster::Cluster c;
  plan::Plan p;
};
QuotaCase quota_case(double flops, double cpu_share, int batch, const std::vector<double>& shares) {
  QuotaCase q{testing::chain_model(1, flops, 0),
              testing::unit_cluster(1, static_cast<int>(shares.size())),
              {}};
  q.c.nodes[0].cpu_share = cpu_share;
  q.p.global_batch = batch;
  q.p.num_microbatches = 1;
  plan::Stage st{0, 1, {}};
  for (std::size_t d = 0; d < shares.size(); ++d)
    st.replicas.push_back(plan::Replica{{static_cast<int>(d)}, {}, shares[d]});
  q.p.stages.push_back(std::move(st));
  return q;
}

TEST(SimulateQuota, WorkersOnAHostOfFewerCoresShareThem) {
  // Two devices at 0.8 of a core, each 0.015 s of compute per iteration (no weights to sum).
  // With a core each, a device's quota bounds it: 0.015 / 0.8 s per iteration on average. On one
  // core they compute at half speed, 0.03 s per iteration, never throttled.
  const auto [m, c, p] = quota_case(5e9, 0.8, 2, {0.5, 0.5});
  auto o = testing::exact_options();
  auto r = simulate(m, c, p, o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_NEAR(r->iteration_time.value, 0.015 / 0.8, 0.002);
  o.host_cores = 1;
  r = simulate(m, c, p, o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_NEAR(r->iteration_time.value, 0.03, 1e-9);
  o.host_cores = 2;
  r = simulate(m, c, p, o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_NEAR(r->iteration_time.value, 0.015 / 0.8, 0.002);
}

TEST(SimulateQuota, UnthrottledCpuWorkersShareTheHostsCoresToo) {
  // Two CPU workers without a cpu_share, each 0.015 s of compute per iteration: 0.015 s with a core
  // each (or no --host-cores), 0.03 s on one core. GPUs on the same figures share nothing.
  auto [m, c, p] = quota_case(5e9, 1.0, 2, {0.5, 0.5});
  c.device_types[0].architecture = cluster::Architecture::cpu;
  auto o = testing::exact_options();
  for (const auto& [cores, expected] : {std::pair{0, 0.015}, {1, 0.03}, {2, 0.015}, {4, 0.015}}) {
    o.host_cores = cores;
    auto r = simulate(m, c, p, o);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_NEAR(r->iteration_time.value, expected, 1e-9) << cores << " cores";
  }
  c.device_types[0].architecture = cluster::Architecture::ampere;
  o.host_cores = 1;
  auto r = simulate(m, c, p, o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_NEAR(r->iteration_time.value, 0.015, 1e-9);
}

TEST(SimulateQuota, IterationTimeIsTheSteadyStateNotTheFirstIteration) {
  // One device at half a core, 0.03 s of compute per iteration (forward 0.01 s, backward
  // 0.02 s): the first iteration fits in the first period's budget, but back to back the device
  // gets half a core, so iterations take 0.06 s on average (to the window's rounding).
  const auto [m, c, p] = quota_case(1e10, 0.5, 1, {1.0});
  auto r = simulate(m, c, p, testing::exact_options());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_NEAR(r->iteration_time.value, 0.06, 0.002);
  // Its statistics are means over the same iterations: computing (throttled waits included) all
  // of the time.
  EXPECT_NEAR(r->devices[0].compute_busy.value, r->iteration_time.value, 1e-9);
  EXPECT_NEAR(r->devices[0].idle.value, 0.0, 1e-9);
  // The events are one iteration's, from its start.
  for (const auto& e : r->events) {
    EXPECT_GE(e.start.value, 0.0);
    EXPECT_LE(e.end.value, 0.1);
  }
}

}  // namespace
}  // namespace hetplan::sim

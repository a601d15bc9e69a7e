// DLCP's chunked gradient transport: the chunk and magnitude model, and exact iteration times on
// a case worked out by hand (three layers, two replicas, one network link each way).
#include "hetplan/sim/grad_chunks.h"

#include <gtest/gtest.h>

#include <cmath>

#include "../../src/sim/unrolled_iterations.h"
#include "sim_fixtures.h"

namespace hetplan::sim {
namespace {

TEST(GradChunks, NormalQuantileInvertsTheDistribution) {
  EXPECT_NEAR(normal_quantile(0.975), 1.959963984540054, 1e-12);
  EXPECT_NEAR(normal_quantile(0.5), 0.0, 1e-12);
  for (double p : {1e-6, 0.05, 0.3, 0.9})
    EXPECT_NEAR(normal_cdf(normal_quantile(p)), p, 1e-12) << p;
}

TEST(GradChunks, ALayerIsCutIntoChunksInQueueOrder) {
  const auto c = layer_chunks(3, 10.0, 4.0, plan::GradPriority::layer);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].bytes, 4.0);
  EXPECT_EQ(c[1].bytes, 4.0);
  EXPECT_EQ(c[2].bytes, 2.0);
  EXPECT_EQ(c[0].key, 3.0);
  EXPECT_DOUBLE_EQ(c[1].key, 3.0 + 1.0 / 3);
  EXPECT_DOUBLE_EQ(c[2].key, 3.0 + 2.0 / 3);
  // Without the magnitude order a chunk carries its bytes' share of the norm.
  EXPECT_DOUBLE_EQ(c[2].norm_share, 0.2);
  EXPECT_TRUE(layer_chunks(0, 0.0, 4.0, plan::GradPriority::layer).empty());
}

TEST(GradChunks, MagnitudeOrderPutsTheSmallestLast) {
  const auto c = layer_chunks(0, 20.0, 1.0, plan::GradPriority::layer_magnitude);
  ASSERT_EQ(c.size(), 20u);
  double sum = 0;
  for (std::size_t i = 0; i < c.size(); ++i) {
    sum += c[i].norm_share;
    if (i > 0) {
      EXPECT_LT(c[i].norm_share, c[i - 1].norm_share) << i;
    }
  }
  EXPECT_NEAR(sum, 1.0, 1e-12);
  // The smallest 5% of chunks carry Phi(Phi^-1(0.05) - 1) of the squared norm (log-normal,
  // sigma 1): 0.41%.
  EXPECT_NEAR(c.back().norm_share, normal_cdf(-1.6448536269514722 - 1.0), 1e-9);
  EXPECT_NEAR(c.back().norm_share, 0.004086, 1e-6);
}

TEST(UnrolledIterations, CopiesChainStreamsAndLinkIterations) {
  detail::TaskGraph g;
  detail::Task a;
  a.stream = g.add_stream();
  a.duration = 1;
  const int ta = g.add_task(a);
  detail::Task b = a;
  b.stream = g.add_stream(-1, true);
  b.order_key = 2;
  b.drop_bytes = 5;
  b.drop_pool = 0;
  const int tb = g.add_task(b);
  g.add_edge(ta, tb);
  g.drop_budget = {7};
  const auto u = detail::unroll_iterations(g, 3, {{tb, ta}});
  ASSERT_EQ(u.tasks.size(), 6u);
  EXPECT_EQ(u.streams[0], (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(u.streams[1], (std::vector<int>{1, 3, 5}));
  const auto succs = u.successors();
  auto of = [&](int t) { return std::vector<int>(succs.of(t).begin(), succs.of(t).end()); };
  EXPECT_EQ(of(2), (std::vector<int>{3}));
  EXPECT_EQ(of(1), (std::vector<int>{2}));  // the chunk before the next iteration's a
  EXPECT_EQ(u.tasks[2].preds, 1);
  EXPECT_EQ(u.tasks[0].preds, 0);
  EXPECT_EQ(u.drop_preds_of(2).size(), 1u);
  EXPECT_EQ(u.drop_preds_of(2)[0], 1);
  EXPECT_EQ(u.tasks[5].drop_pool, 2);
  EXPECT_EQ(u.tasks[5].order_key, 2 + 2 * 1e9);
  EXPECT_EQ(u.drop_budget, (std::vector<double>{7, 7, 7}));
  const auto r = detail::run_engine(u, {});
  EXPECT_FALSE(r.deadlock);
  EXPECT_EQ(r.end[5], 6.0);
}

// Three layers of 1.5e9 parameters (3 GB of bf16 gradient each), one sample per replica: each
// layer's forward pass takes 1 s, its backward 2 s, its all-reduce over the two nodes 3 s, its
// optimizer update u.
class ThreeLayersOneLink : public ::testing::Test {
 protected:
  model::Model m_ = testing::chain_model(3, 1e12, 0, 1'500'000'000);
  // Two nodes of one device, one 8 Gb/s (1 GB/s) NIC each, no latencies.
  cluster::Cluster c_ = testing::unit_cluster(2, 1, "8Gbps", false);
  plan::Plan p_;
  SimOptions opts_ = testing::exact_options();

  void SetUp() override {
    p_.global_batch = 2;
    p_.num_microbatches = 1;
    p_.grad_bucket_bytes = 1;  // one bucket per layer
    p_.stages.push_back(
        plan::Stage{0, 3, {plan::Replica{{0}, {}, 0.5}, plan::Replica{{1}, {}, 0.5}}});
    opts_.grad_chunk_bytes = 0.75e9;  // four chunks of 0.75 s per layer
    ASSERT_NEAR(testing::collective_time(c_, cost::Collective::all_reduce, {0, 1}, 3e9), 3.0,
                1e-12);
  }
  SimResult run() {
    auto r = simulate(m_, c_, p_, opts_);
    EXPECT_TRUE(r) << r.error().message;
    return *r;
  }
  // u, from the plain run: its one optimizer step updates the three layers.
  double update() {
    p_.grad_priority = plan::GradPriority::none;
    for (const auto& e : run().events)
      if (e.kind == TaskKind::optimizer) return (e.end - e.start).value / 3;
    return -1;
  }
};

TEST_F(ThreeLayersOneLink, WithoutPrioritiesTheBucketsGoInBackwardOrder) {
  // Forward 0-3, backward 3-9 (layer 2 first); the all-reduces 5-8, 8-11, 11-14, then the step.
  const double u = update();
  ASSERT_GT(u, 0);
  EXPECT_NEAR(run().iteration_time.value, 14 + 3 * u, 1e-9);
}

TEST_F(ThreeLayersOneLink, LayerPriorityLetsTheNextForwardPassStartEarly) {
  // With the backward pass starting at b: layer 2's chunks go from b+2; at b+4 layer 1's are
  // ready and go next once the chunk in flight ends (b+4.25); layer 0's are ready at b+6 and go
  // at b+6.5 (again after the chunk in flight), until b+9.5. The rest of layer 1 (one chunk)
  // ends at b+10.25 and of layer 2 at b+11. The next forward pass: layer 0 from b+9.5 (1 s and
  // its update u), layer 1 from b+10.5+u, layer 2 from b+11.5+2u; its backward pass starts at
  // b+12.5+3u, a period of 12.5+3u (against 14+3u).
  const double u = update();
  p_.grad_priority = plan::GradPriority::layer;
  const SimResult r = run();
  EXPECT_NEAR(r.iteration_time.value, 12.5 + 3 * u, 1e-9);
  EXPECT_EQ(r.grad_dropped_fraction, 0.0);
  // Queued with the same priority order and nothing dropped, the magnitude order changes nothing
  // here.
  p_.grad_priority = plan::GradPriority::layer_magnitude;
  EXPECT_NEAR(run().iteration_time.value, 12.5 + 3 * u, 1e-9);
}

TEST_F(ThreeLayersOneLink, ALossBoundDropsTheLateChunksOfTheLayerDue) {
  // 10% of 9 GB per iteration: one 0.75 GB chunk. At b+6 the next forward pass of layer 0 is
  // due and its four chunks are queued: the last is dropped. Layer 0's other three go
  // b+6.5-8.75, layer 1's last b+8.75-9.5, layer 2's b+9.5-10.25. Forward: layer 0 from b+8.75,
  // layer 1 from b+9.75+u, layer 2 from b+10.75+2u; the next backward pass at b+11.75+3u.
  const double u = update();
  p_.grad_priority = plan::GradPriority::layer;
  p_.loss_bound = 0.1;
  const SimResult r = run();
  EXPECT_NEAR(r.iteration_time.value, 11.75 + 3 * u, 1e-9);
  EXPECT_NEAR(r.grad_dropped_fraction, 0.75 / 9, 1e-12);
  // Without the magnitude order, the dropped chunk carries its bytes' share of the norm.
  EXPECT_NEAR(r.grad_dropped_norm_fraction, 0.75 / 9, 1e-12);
  // With it, the dropped chunk is layer 0's smallest: a quarter of its chunks below the
  // 0.25-quantile, carrying Phi(Phi^-1(0.25) - 1) of the layer's squared norm (a third of the
  // whole).
  p_.grad_priority = plan::GradPriority::layer_magnitude;
  const SimResult q = run();
  EXPECT_NEAR(q.iteration_time.value, 11.75 + 3 * u, 1e-9);
  EXPECT_NEAR(q.grad_dropped_norm_fraction, normal_cdf(normal_quantile(0.25) - 1) / 3, 1e-12);
  EXPECT_LT(q.grad_dropped_norm_fraction, 0.02);
}

}  // namespace
}  // namespace hetplan::sim

// Each op's way of synchronising its gradient (all-reduce, parameter server, sufficient factors),
// chosen by the MILP of search/sync_milp.h and written into the plan as rules.
#include <gtest/gtest.h>

#include "hetplan/cluster/cluster_file.h"
#include "hetplan/search/planners.h"
#include "hetplan/search/search.h"
#include "search_fixtures.h"

namespace hetplan::search {
namespace {

using testing::load_cluster_or_die;
using testing::load_model_or_die;

// A model and cluster with everything a planner needs, and uneven-dp's answer.
struct Planned {
  Planned(const std::string& model, const std::string& cluster, std::int64_t global_batch)
      : m(load_model_or_die(model)), c(load_cluster_or_die(cluster)), opts([&] {
          SearchOptions o;
          o.global_batch = global_batch;
          return o;
        }()) {}
  model::Model m;
  cluster::Cluster c;
  SearchOptions opts;
  Evaluator evaluator{m, c, opts};
  Estimator estimator{m, c, opts};
  Deadline deadline{0};
  Context ctx{m, c, opts, evaluator, estimator, deadline};
  PlannerOutput dp = uneven_dp(ctx);
};

TEST(SufficientFactorChoice, PricesTheWideLayersOfVggOnSlowEthernet) {
  // TAG's testbed: 22 Gb/s between machines. VGG-16's fully connected layers hold 90% of its
  // parameters but have one row per sample, so gathering their factors is priced below
  // all-reducing them.
  const Planned t("vgg16", "tag-mixed", 256);
  const auto& [m, c, opts, evaluator, ctx, dp] =
      std::tie(t.m, t.c, t.opts, t.evaluator, t.ctx, t.dp);
  ASSERT_TRUE(dp.best.ok) << dp.best.error;
  ASSERT_TRUE(dp.best.plan.grad_sync.empty());
  const plan::Plan sfb = with_sufficient_factors(ctx, dp.best.plan);
  std::vector<std::string> switched;
  for (const auto& rule : sfb.grad_sync) {
    EXPECT_EQ(rule.method, plan::SyncMethod::sufficient_factor);
    switched.push_back(rule.ops);
  }
  // fc6 and fc7 (4096 wide); the 1000-class head is priced close and stays on all-reduce here.
  EXPECT_EQ(switched, (std::vector<std::string>{"fc6.fc", "fc7.fc"}));
  EXPECT_EQ(sfb.planner, dp.best.plan.planner + "+sfb");
  const Evaluation e = evaluator.evaluate(sfb);
  ASSERT_TRUE(e.ok) << e.error;

  // By the MILP's measure the rebuild GEMMs cost less than the all-reduces they replace, but they
  // add to every replica's backward pass while an all-reduce overlaps it: the search keeps the
  // switched plan only where the whole step simulates faster, so it is never slower than either.
  auto res = find_plan(m, c, Algo::uneven_dp, opts);
  ASSERT_TRUE(res) << res.error().message;
  for (const auto& rule : res->best.plan.grad_sync)
    EXPECT_EQ(rule.method, plan::SyncMethod::sufficient_factor);
  EXPECT_LE(res->best.iteration_time_s,
            std::min(e.iteration_time_s, dp.best.iteration_time_s) * (1 + 1e-12));
}

TEST(SufficientFactorChoice, TheSearchKeepsItWhereTheStepIsFaster) {
  // The testbed's devices one per machine on 5 Gb/s Ethernet: the fully connected layers'
  // all-reduces cross the network on the critical path, and gathering their factors shortens the
  // step. (On the testbed's own machines, slowed to 5 Gb/s, the plan splits the fully connected
  // layers over each machine's devices, and the tensor-parallel collectives share the links the
  // gathers would use: all-reduce stays faster there.)
  const auto m = load_model_or_die("vgg16");
  const auto c = load_cluster_or_die(testing::data_file("tag-single-gpu-5g.yaml"));
  SearchOptions opts;
  opts.global_batch = 256;
  auto res = find_plan(m, c, Algo::uneven_dp, opts);
  ASSERT_TRUE(res) << res.error().message;
  std::vector<std::string> switched;
  for (const auto& rule : res->best.plan.grad_sync) {
    EXPECT_EQ(rule.method, plan::SyncMethod::sufficient_factor);
    switched.push_back(rule.ops);
  }
  EXPECT_EQ(switched, (std::vector<std::string>{"fc6.fc", "fc7.fc", "head.fc"}));
  plan::Plan plain = res->best.plan;
  plain.grad_sync.clear();
  Evaluator evaluator{m, c, opts};
  const Evaluation without = evaluator.evaluate(plain);
  ASSERT_TRUE(without.ok) << without.error;
  EXPECT_LT(res->best.iteration_time_s, without.iteration_time_s * 0.8);
}

TEST(SufficientFactorChoice, LeavesTransformersAlone) {
  const Planned t(testing::kSmallGpt, "tag-mixed", 64);
  ASSERT_TRUE(t.dp.best.ok) << t.dp.best.error;
  EXPECT_EQ(with_sufficient_factors(t.ctx, t.dp.best.plan), t.dp.best.plan);
}

TEST(SufficientFactorChoice, AParameterServerBehindTheFastestNic) {
  // Three one-device nodes; the first has a 100 Gb/s NIC, the others 1 Gb/s. A ring all-reduce
  // sends 4/3 of the gradient through each slow NIC each way; a parameter server on the first
  // device (where the simulator places it: the first replica's) only one gradient. The layer is
  // token-rich (512 rows per sample), so its factors would cost more than its gradient.
  auto c = cluster::parse_cluster_yaml(
      "version: 1\n"
      "device_types:\n"
      "  - {name: unit, peak_fp16: 1TFLOPS, peak_fp32: 1TFLOPS, memory: 16GB,"
      " memory_bandwidth: 1000GB/s}\n"
      "nodes:\n"
      "  - {group: fast, count: 1, device: unit, devices_per_node: 1,"
      " intra_node: {bandwidth: 100GB/s, latency: 2us}, nic: {bandwidth: 100Gbps, count: 1,"
      " latency: 10us}}\n"
      "  - {group: slow, count: 2, device: unit, devices_per_node: 1,"
      " intra_node: {bandwidth: 100GB/s, latency: 2us}, nic: {bandwidth: 1Gbps, count: 1,"
      " latency: 10us}}\n",
      "star.yaml");
  ASSERT_TRUE(c) << c.error().message;
  model::Model m;
  m.name = "one";
  m.family = model::Family::cnn;
  model::Op op;
  op.name = "proj";
  op.kind = model::OpKind::matmul;
  op.shard = model::ShardKind::column;
  op.flops = 2.0 * 512 * 4096 * 4096;
  op.bytes_written = 2.0 * 512 * 4096;
  op.params = 4096 * 4096;
  op.gemm = model::GemmShape{512, 4096, 4096, 1};
  m.ops.push_back(op);
  m.layers.push_back(model::Layer{"proj", model::LayerKind::other, 0, 1});
  plan::Plan p;
  p.planner = "hand";
  p.global_batch = 6;
  p.num_microbatches = 1;
  p.stages.push_back(plan::Stage{0, 1,
                                 {plan::Replica{{0}, {}, 1.0 / 3}, plan::Replica{{1}, {}, 1.0 / 3},
                                  plan::Replica{{2}, {}, 1.0 / 3}}});
  SearchOptions opts;
  opts.global_batch = 6;
  Evaluator evaluator{m, *c, opts};
  Estimator estimator{m, *c, opts};
  Deadline deadline{0};
  Context ctx{m, *c, opts, evaluator, estimator, deadline};
  const plan::Plan ps = with_sufficient_factors(ctx, p);
  ASSERT_EQ(ps.grad_sync.size(), 1u);
  EXPECT_EQ(ps.grad_sync[0], (plan::GradSync{"proj", plan::SyncMethod::parameter_server,
                                             cost::Algorithm::parameter_server, 0}));
  EXPECT_EQ(ps.planner, "hand+ps");
  const Evaluation with = evaluator.evaluate(ps), without = evaluator.evaluate(p);
  ASSERT_TRUE(with.ok) << with.error;
  ASSERT_TRUE(without.ok) << without.error;
  EXPECT_LT(with.iteration_time_s, without.iteration_time_s);
}

}  // namespace
}  // namespace hetplan::search

// Gradient synchronisation per op: rules apply op by op, and sufficient factor broadcasting is
// simulated as a factor all-gather followed by a gradient rebuild on every replica.
#include "hetplan/sim/grad_sync.h"

#include <gtest/gtest.h>

#include "hetplan/cost/collective_cost.h"
#include "hetplan/model/zoo.h"
#include "sim_fixtures.h"

namespace hetplan::sim {
namespace {

using testing::chain_model;
using testing::exact_options;
using testing::unit_cluster;

constexpr std::int64_t kIn = 20000, kOut = 10000;

// A chain of wide linear layers: per sample one row of kIn inputs and kOut outputs.
model::Model wide_chain(int layers) {
  auto m = chain_model(layers, 2.0 * kIn * kOut, 0, kIn * kOut);
  for (auto& op : m.ops) op.gemm = model::GemmShape{1, kOut, kIn, 1};
  return m;
}

// Two one-device replicas on two nodes, one sample each.
plan::Plan two_replicas(int layers) {
  plan::Plan p;
  p.global_batch = 2;
  p.num_microbatches = 1;
  p.stages.push_back(
      plan::Stage{0, layers, {plan::Replica{{0}, {}, 0.5}, plan::Replica{{1}, {}, 0.5}}});
  return p;
}

double duration_of(const SimResult& r, TaskKind kind) {
  for (const auto& e : r.events)
    if (e.kind == kind) return (e.end - e.start).value;
  return -1;
}

// Over the two devices.
double collective(const cluster::Cluster& c, cost::Collective kind, double bytes,
                  std::vector<double> shares = {}) {
  return testing::collective_time(c, kind, {0, 1}, bytes, std::move(shares));
}

TEST(SufficientFactor, GathersFactorsThenRebuildsTheGradient) {
  const auto m = wide_chain(1);
  const auto c = unit_cluster(2, 1);
  auto p = two_replicas(1);
  p.grad_sync.push_back(plan::GradSync{"layers.0.fc", plan::SyncMethod::sufficient_factor});
  auto r = simulate(m, c, p, exact_options());
  ASSERT_TRUE(r) << r.error().message;
  // Each replica's one sample has (kIn + kOut) bf16 factor values; the gather's output is both.
  const double gather =
      collective(c, cost::Collective::all_gather, 2 * (kIn + kOut) * 2.0, {0.5, 0.5});
  EXPECT_NEAR(duration_of(*r, TaskKind::grad_sync), gather, 1e-12);
  // Rebuilding from the other replica's one sample is one forward GEMM's work.
  const double forward = duration_of(*r, TaskKind::forward);
  EXPECT_NEAR(duration_of(*r, TaskKind::grad_rebuild), forward, 1e-12);
  const double backward = duration_of(*r, TaskKind::backward);
  const double optimizer = duration_of(*r, TaskKind::optimizer);
  EXPECT_NEAR(r->iteration_time.value, forward + backward + gather + forward + optimizer, 1e-9);

  // The same plan with all-reduce: the 400 MB gradient crosses the 1 GB/s NIC instead.
  auto ar = simulate(m, c, two_replicas(1), exact_options());
  ASSERT_TRUE(ar);
  const double allreduce = collective(c, cost::Collective::all_reduce, kIn * kOut * 2.0);
  EXPECT_NEAR(ar->iteration_time.value, forward + backward + allreduce + optimizer, 1e-9);
  EXPECT_LT(r->iteration_time.value, ar->iteration_time.value);

  // The planners' view prices the same two ways.
  const auto choices = sufficient_factor_choices(m, c, two_replicas(1), exact_options());
  ASSERT_EQ(choices.size(), 1u);
  EXPECT_EQ(choices[0].op, 0);
  EXPECT_NEAR(choices[0].all_reduce_s, allreduce, 1e-12);
  EXPECT_NEAR(choices[0].sufficient_factor_s, gather + forward, 1e-12);
}

TEST(SufficientFactor, RulesApplyOpByOp) {
  // Layer 1 opts out of synchronisation: only layer 0's gradient is all-reduced.
  const auto m = wide_chain(2);
  const auto c = unit_cluster(2, 1);
  auto p = two_replicas(2);
  p.grad_bucket_bytes = 1e12;  // one bucket
  p.grad_sync.push_back(plan::GradSync{"layers.1.*", plan::SyncMethod::none});
  auto r = simulate(m, c, p, exact_options());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_NEAR(duration_of(*r, TaskKind::grad_sync),
              collective(c, cost::Collective::all_reduce, kIn * kOut * 2.0), 1e-12);

  // One op by factors, the other all-reduced: two transfers in the bucket and one rebuild.
  p.grad_sync = {plan::GradSync{"layers.1.fc", plan::SyncMethod::sufficient_factor}};
  r = simulate(m, c, p, exact_options());
  ASSERT_TRUE(r) << r.error().message;
  int syncs = 0, rebuilds = 0;
  for (const auto& e : r->events) {
    syncs += e.kind == TaskKind::grad_sync;
    rebuilds += e.kind == TaskKind::grad_rebuild;
  }
  EXPECT_EQ(syncs, 2);
  EXPECT_EQ(rebuilds, 2);  // one per replica
}

TEST(SufficientFactor, RefusedWhereItDoesNotApply) {
  auto m = wide_chain(1);
  m.ops[0].kind = model::OpKind::conv2d;
  const auto c = unit_cluster(2, 1);
  auto p = two_replicas(1);
  p.grad_sync.push_back(plan::GradSync{"*", plan::SyncMethod::sufficient_factor});
  auto r = simulate(m, c, p, exact_options());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("grad_sync[0].method"), std::string::npos);
  EXPECT_NE(r.error().message.find("\"layers.0.fc\" is a conv2d"), std::string::npos);
  EXPECT_TRUE(sufficient_factor_choices(m, c, two_replicas(1), exact_options()).empty());
}

TEST(SufficientFactor, PaysForWideLayersNotForTokenRichOnes) {
  // VGG-16's fully connected layers have few rows per sample; a transformer's GEMMs have one row
  // per token, so their factors outweigh the gradient.
  const auto c = unit_cluster(2, 1);
  auto gains = [&](const std::string& spec, int layers) {
    const auto m = model::load_model(spec);
    EXPECT_TRUE(m);
    plan::Plan p;
    p.global_batch = 32;
    p.stages.push_back(plan::Stage{0,
                                   layers < 0 ? static_cast<int>(m->layers.size()) : layers,
                                   {plan::Replica{{0}, {}, 0.5}, plan::Replica{{1}, {}, 0.5}}});
    int n = 0, cheaper = 0;
    for (const auto& f : sufficient_factor_choices(*m, c, p, SimOptions{})) {
      ++n;
      cheaper += f.sufficient_factor_s < f.all_reduce_s;
    }
    return std::make_pair(n, cheaper);
  };
  const auto vgg = gains("vgg16", -1);
  EXPECT_EQ(vgg.first, 3);  // fc6, fc7, head
  EXPECT_EQ(vgg.second, 3);
  const auto gpt = gains("gpt:layers=2,hidden=1024,heads=16,seq=1024,vocab=32000", -1);
  EXPECT_GT(gpt.first, 0);
  EXPECT_EQ(gpt.second, 0);
}

// Replicas of unlike sizes (2 devices at 3:1, and 3 even) sum over replicas, not devices: two
// all-reduces run together (as many as the smaller replica has devices), over devices {0, 2} at
// the largest share either replica puts there (3/4 against the 1/3 + 1/3 of devices 2 and 4), and
// over {1, 3} at 1/3. (One all-reduce over all five devices at 3/4 summed five shards where two
// whole gradients must meet: on slow links between replicas it priced a quarter of the traffic.)
TEST(GradSync, UnlikeReplicasSumWholeGradientsOverReplicas) {
  const auto m = chain_model(1, 1e9, 0, 1'000'000);  // no activations: no tensor-parallel traffic
  const auto c = unit_cluster(1, 5);
  plan::Plan p;
  p.global_batch = 2;
  p.num_microbatches = 1;
  p.stages.push_back(plan::Stage{
      0, 1, {plan::Replica{{0, 1}, {0.75, 0.25}, 0.5}, plan::Replica{{2, 3, 4}, {}, 0.5}}});
  auto r = simulate(m, c, p, exact_options());
  ASSERT_TRUE(r) << r.error().message;
  // bf16 gradients of 1e6 parameters; the larger part is the slower.
  const double first =
      testing::collective_time(c, cost::Collective::all_reduce, {0, 2}, 0.75 * 2e6);
  const double second =
      testing::collective_time(c, cost::Collective::all_reduce, {1, 3}, 2e6 / 3);
  EXPECT_GT(first, second);
  EXPECT_NEAR(duration_of(*r, TaskKind::grad_sync), first, 1e-15);
}

// Three replicas on three nodes of one NIC each (4, 8 and 4 devices, as HAP's programs over
// tag-mixed's machines), every device holding the whole gradient: however the replicas split the
// work, each node's NIC carries at least 2 (3 - 1) / 3 of the gradient out.
TEST(GradSync, UnlikeReplicasAcrossNodesPayTheNicBound) {
  const auto m = chain_model(1, 1e9, 0, 30'000'000);
  auto c = testing::unit_cluster(3, 8);
  plan::Plan p;
  p.global_batch = 16;
  p.num_microbatches = 1;
  p.stages.push_back(plan::Stage{0, 1,
                                 {plan::Replica{{0, 1, 2, 3}, {}, 0.25},
                                  plan::Replica{{8, 9, 10, 11, 12, 13, 14, 15}, {}, 0.5},
                                  plan::Replica{{16, 17, 18, 19}, {}, 0.25}}});
  p.op_overrides.push_back(plan::OpOverride{"*", plan::SplitKind::batch});
  auto r = simulate(m, c, p, exact_options());
  ASSERT_TRUE(r) << r.error().message;
  const double nic = c.groups[0].nic_bandwidth.value * c.groups[0].nic_count;
  double sync = 0;
  for (const auto& e : r->events)
    if (e.kind == TaskKind::grad_sync) sync = std::max(sync, (e.end - e.start).value);
  EXPECT_GE(sync, 2.0 * 2 / 3 * 30e6 * 2 / nic);
}

}  // namespace
}  // namespace hetplan::sim

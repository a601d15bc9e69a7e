// The gradient synchronisation MILP: its optimum against brute force over every assignment, and
// its choice on hand-built cases.
#include "hetplan/search/sync_milp.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "hetplan/cluster/cluster_file.h"
#include "hetplan/sim/grad_sync.h"

namespace hetplan::search {
namespace {

// The least objective over every assignment of allowed ways (3^n at most).
double brute_force(const SyncRequest& req) {
  const std::size_t n = req.items.size();
  std::vector<int> way(n, 0);
  double best = std::numeric_limits<double>::infinity();
  for (;;) {
    bool allowed = true;
    for (std::size_t i = 0; i < n; ++i) allowed &= req.items[i].ways[way[i]].allowed;
    if (allowed) best = std::min(best, sync_objective(req, way));
    std::size_t i = 0;
    while (i < n && ++way[i] == 3) way[i++] = 0;
    if (i == n) return best;
  }
}

// Items whose ways load random links of a few (some of them slow), with random latencies, and
// sufficient factors (sometimes parameter servers too) adding compute on random units.
SyncRequest random_request(std::mt19937& rng) {
  auto uniform = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  auto below = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  SyncRequest req;
  const int links = 2 + below(3), items = 1 + below(8);
  req.units = 2 + below(2);
  for (int l = 0; l < links; ++l) req.link_capacity.push_back(uniform(1e9, 1e11));
  for (int l = 0; l < links; ++l)
    if (below(2) == 0) req.fixed.push_back({l, uniform(0, 2e8)});
  for (int i = 0; i < items; ++i) {
    SyncItem item;
    item.name = "op" + std::to_string(i);
    for (int w = 0; w < 3; ++w) {
      SyncWay& way = item.ways[w];
      way.allowed = w == kAllReduce || below(5) > 0;
      for (int l = 0; l < links; ++l)
        if (below(3) > 0) way.loads.push_back({l, uniform(0, w == kAllReduce ? 4e8 : 2e8)});
      way.latency_s = uniform(0, 2e-3);
      if (w != kAllReduce && (w == kSufficientFactor || below(2) == 0))
        for (int u = 0; u < req.units; ++u) way.compute_s.push_back(uniform(0, 2e-2));
    }
    req.items.push_back(std::move(item));
  }
  return req;
}

TEST(SyncMilp, MatchesBruteForceOnRandomInstances) {
  std::mt19937 rng(20240518);
  int switched = 0, mixed = 0;
  for (int instance = 0; instance < 300; ++instance) {
    const SyncRequest req = random_request(rng);
    const SyncChoice choice = solve_sync_milp(req);
    ASSERT_EQ(choice.status, SyncStatus::optimal) << choice.warning;
    ASSERT_EQ(choice.way.size(), req.items.size());
    const double best = brute_force(req);
    EXPECT_NEAR(choice.objective_s, best, 1e-9 * best) << "instance " << instance;
    EXPECT_DOUBLE_EQ(choice.objective_s, sync_objective(req, choice.way));
    // Ties go to all-reduce: every item off all-reduce gains by it.
    int off = 0;
    for (std::size_t i = 0; i < req.items.size(); ++i) {
      if (choice.way[i] == kAllReduce) continue;
      ++off;
      EXPECT_TRUE(req.items[i].ways[choice.way[i]].allowed);
      std::vector<int> back = choice.way;
      back[i] = kAllReduce;
      EXPECT_GT(sync_objective(req, back), choice.objective_s) << "instance " << instance;
    }
    switched += off > 0;
    mixed += off > 0 && off < static_cast<int>(req.items.size());
  }
  // The instances exercise every kind of answer, not all-reduce alone.
  EXPECT_GT(switched, 60);
  EXPECT_GT(mixed, 30);
}

TEST(SyncMilp, WideLayerOnASlowLinkGathersFactorsNarrowOneAllReduces) {
  // One slow link (1 GB/s) and one fast (100 GB/s); two replicas (units).
  SyncRequest req;
  req.link_capacity = {1e9, 1e11};
  req.units = 2;
  auto way = [](std::vector<cost::LinkLoad> loads, double latency,
                std::vector<double> compute = {}) {
    return SyncWay{true, std::move(loads), latency, std::move(compute)};
  };
  SyncWay no;  // not allowed
  // A wide layer: 400 MB of gradient on the slow link, or 1 MB of factors and 10 ms of rebuild.
  req.items.push_back({"wide", {way({{0, 4e8}, {1, 4e8}}, 1e-5), no,
                                way({{0, 1e6}, {1, 1e6}}, 1e-5, {1e-2, 1e-2})}});
  // A token-rich layer: 1 MB of gradient, or 100 MB of factors.
  req.items.push_back({"narrow", {way({{0, 1e6}, {1, 1e6}}, 1e-5), no,
                                  way({{0, 1e8}, {1, 1e8}}, 1e-5, {1e-3, 1e-3})}});
  // A layer whose parameter server sits behind the fast link only.
  req.items.push_back({"served", {way({{0, 1e8}}, 1e-5), way({{1, 2e8}}, 2e-5), no}});
  const SyncChoice choice = solve_sync_milp(req);
  ASSERT_EQ(choice.status, SyncStatus::optimal) << choice.warning;
  EXPECT_EQ(choice.way, (std::vector<int>{kSufficientFactor, kAllReduce, kParameterServer}));
  // The fast link is the busier: 1 MB + 1 MB + 200 MB = 2.02 ms (the slow one 2 ms); rebuild
  // 10 ms; latencies 40 us.
  EXPECT_NEAR(choice.objective_s, 2.02e-3 + 1e-2 + 4e-5, 1e-12);
}

TEST(SyncMilp, TiesKeepAllReduce) {
  SyncRequest req;
  req.link_capacity = {1e9};
  req.units = 1;
  const SyncWay same{true, {{0, 1e6}}, 1e-5, {}};
  req.items.push_back({"a", {same, same, same}});
  const SyncChoice choice = solve_sync_milp(req);
  ASSERT_EQ(choice.status, SyncStatus::optimal);
  EXPECT_EQ(choice.way, std::vector<int>{kAllReduce});
}

TEST(SyncMilp, NothingToChooseIsAllReduce) {
  const SyncChoice choice = solve_sync_milp(SyncRequest{{1e9}, {{0, 1e9}}, 1, {}});
  EXPECT_EQ(choice.status, SyncStatus::optimal);
  EXPECT_TRUE(choice.way.empty());
  EXPECT_DOUBLE_EQ(choice.objective_s, 1.0);
}

// Two nodes of one 1 TFLOP/s device each, 1 Gb/s between them.
cluster::Cluster two_nodes() {
  auto c = cluster::parse_cluster_yaml(
      "version: 1\n"
      "device_types:\n"
      "  - {name: unit, peak_fp16: 1TFLOPS, peak_fp32: 1TFLOPS, memory: 16GB,"
      " memory_bandwidth: 1000GB/s}\n"
      "nodes:\n"
      "  - group: g\n"
      "    count: 2\n"
      "    device: unit\n"
      "    devices_per_node: 1\n"
      "    intra_node: {bandwidth: 100GB/s, latency: 2us}\n"
      "    nic: {bandwidth: 1Gbps, count: 1, latency: 10us}\n",
      "two.yaml");
  EXPECT_TRUE(c) << c.error().message;
  return std::move(*c);
}

// A wide fully connected layer (one row per sample, 20000 x 10000) then a token-rich one (512
// rows per sample, 1024 x 1024).
model::Model wide_then_narrow() {
  model::Model m;
  m.name = "two";
  m.family = model::Family::cnn;
  auto add = [&](const std::string& name, std::int64_t rows, std::int64_t k, std::int64_t n) {
    model::Op op;
    const int i = static_cast<int>(m.ops.size());
    op.name = name;
    op.kind = model::OpKind::matmul;
    op.shard = model::ShardKind::column;
    op.layer = i;
    if (i > 0) op.inputs = {i - 1};
    op.flops = 2.0 * static_cast<double>(rows * k * n);
    op.bytes_written = 2.0 * static_cast<double>(rows * n);
    op.params = k * n;
    op.gemm = model::GemmShape{rows, n, k, 1};
    m.ops.push_back(op);
    m.layers.push_back(model::Layer{name, model::LayerKind::other, i, 1});
  };
  add("wide", 1, 20000, 10000);
  add("narrow", 512, 1024, 1024);
  return m;
}

// Both layers in one stage of two single-device replicas, half the batch each.
plan::Plan two_replicas() {
  plan::Plan p;
  p.global_batch = 8;
  p.num_microbatches = 1;
  p.stages.push_back(
      plan::Stage{0, 2, {plan::Replica{{0}, {}, 0.5}, plan::Replica{{1}, {}, 0.5}}});
  return p;
}

TEST(SyncMilp, ChoosesPerLayerFromTheSimulatorsPrices) {
  const auto m = wide_then_narrow();
  const auto c = two_nodes();
  plan::Plan p = two_replicas();
  const sim::SimOptions opts;
  const SyncRequest req = sync_request(m, c, p, opts);
  ASSERT_EQ(req.items.size(), 2u);
  EXPECT_EQ(req.items[0].name, "wide");
  EXPECT_EQ(req.items[1].name, "narrow");
  EXPECT_EQ(req.units, 2);
  EXPECT_TRUE(req.fixed.empty());
  // Each way alone costs what the simulator's own pricing says.
  const auto choices = sim::sufficient_factor_choices(m, c, p, opts);
  ASSERT_EQ(choices.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    SyncRequest alone = req;
    alone.items = {req.items[i]};
    EXPECT_NEAR(sync_objective(alone, {kAllReduce}), choices[i].all_reduce_s,
                1e-9 * choices[i].all_reduce_s);
    EXPECT_NEAR(sync_objective(alone, {kSufficientFactor}), choices[i].sufficient_factor_s,
                1e-9 * choices[i].sufficient_factor_s);
  }
  const SyncChoice choice = solve_sync_milp(req);
  ASSERT_EQ(choice.status, SyncStatus::optimal) << choice.warning;
  EXPECT_EQ(choice.way, (std::vector<int>{kSufficientFactor, kAllReduce}));

  // Under ZeRO the all-reduce is a reduce-scatter and parameter servers are out.
  p.zero_stage = 1;
  for (const auto& item : sync_request(m, c, p, opts).items)
    EXPECT_FALSE(item.ways[kParameterServer].allowed);
  // An op a rule names keeps its rule: it is no item.
  p.zero_stage = 0;
  p.grad_sync.push_back(plan::GradSync{"wide", plan::SyncMethod::all_reduce});
  const SyncRequest ruled = sync_request(m, c, p, opts);
  ASSERT_EQ(ruled.items.size(), 1u);
  EXPECT_EQ(ruled.items[0].name, "narrow");
}

// SimOptions::stop is asked before each op is priced (in the simulator's ways and in the
// request): once it says stop the request has no items, so the plan keeps its all-reduces.
TEST(SyncMilp, AStoppedRequestHasNoItems) {
  const auto m = wide_then_narrow();
  const auto c = two_nodes();
  plan::Plan p = two_replicas();
  for (int after : {0, 1, 2, 3}) {
    int asked = 0;
    sim::SimOptions opts;
    opts.stop = [&] { return ++asked > after; };
    const SyncRequest req = sync_request(m, c, p, opts);
    // The first "stop" ends the pricing.
    EXPECT_TRUE(req.items.empty()) << after;
    EXPECT_EQ(asked, after + 1);
  }
  // Never stopping: asked once per op in the simulator's ways and once per op in the request.
  int asked = 0;
  sim::SimOptions never;
  never.stop = [&] { return ++asked < 0; };
  EXPECT_EQ(sync_request(m, c, p, never).items.size(), 2u);
  EXPECT_EQ(asked, 4);
}

}  // namespace
}  // namespace hetplan::search

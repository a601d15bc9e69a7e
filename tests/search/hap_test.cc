// The HAP-style SPMD synthesis: the A* program search against brute force, and the planner on a
// V100 + P100 cluster.
#include "hetplan/search/hap.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <set>
#include <stdexcept>

#include "hetplan/plan/plan_json.h"
#include "hetplan/plan/validate.h"
#include "hetplan/search/search.h"
#include "search_fixtures.h"

namespace hetplan::search {
namespace {

using testing::load_cluster_or_die;
using testing::load_model_or_die;

// The cheapest program within the capacities by enumerating every choice vector; infinity when
// none fits.
double brute_force(const SpmdInstance& inst) {
  const std::size_t n = inst.unit_cost.size();
  std::vector<int> choice(n, 0);
  double best = std::numeric_limits<double>::infinity();
  std::function<void(std::size_t)> rec = [&](std::size_t u) {
    if (u == n) {
      for (std::size_t r = 0; r < inst.capacity.size(); ++r) {
        double use = 0;
        for (std::size_t k = 0; k < n; ++k) use += inst.unit_use[k][choice[k]][r];
        if (use > inst.capacity[r]) return;
      }
      best = std::min(best, program_cost(inst, choice));
      return;
    }
    for (std::size_t c = 0; c < inst.unit_cost[u].size(); ++c) {
      choice[u] = static_cast<int>(c);
      rec(u + 1);
    }
  };
  rec(0);
  return best;
}

// `resources` memory limits (0: none), each unit's choices using some of each.
SpmdInstance random_instance(std::mt19937& rng, int resources) {
  std::uniform_int_distribution<int> units(2, 8), choices(2, 3), coin(0, 3);
  std::uniform_real_distribution<double> cost(0.0, 10.0), use(-2.0, 6.0);
  SpmdInstance inst;
  const int n = units(rng);
  for (int u = 0; u < n; ++u) {
    std::vector<double> c(static_cast<std::size_t>(choices(rng)));
    for (double& x : c) x = cost(rng);
    inst.unit_cost.push_back(c);
  }
  // A chain of edges plus some long ones (the residual connections of a block).
  for (int b = 1; b < n; ++b)
    for (int a = 0; a < b; ++a) {
      if (a != b - 1 && coin(rng) != 0) continue;
      SpmdEdge e{a, b, {}};
      for (std::size_t i = 0; i < inst.unit_cost[a].size(); ++i) {
        e.cost.emplace_back();
        for (std::size_t j = 0; j < inst.unit_cost[b].size(); ++j)
          e.cost.back().push_back(i == j ? 0.0 : cost(rng));
      }
      inst.edges.push_back(e);
    }
  if (resources > 0) {
    for (int r = 0; r < resources; ++r) inst.capacity.push_back(use(rng) * n / 3 + 2);
    for (int u = 0; u < n; ++u) {
      inst.unit_use.emplace_back();
      for (std::size_t c = 0; c < inst.unit_cost[u].size(); ++c) {
        inst.unit_use.back().emplace_back();
        for (int r = 0; r < resources; ++r) inst.unit_use.back().back().push_back(use(rng));
      }
    }
  }
  return inst;
}

// The search with its exact cost to go (the default) and with the weaker bound (nothing
// tabulated) finds the brute-force optimum alike.
TEST(HapSearch, AStarFindsTheBruteForceOptimum) {
  for (const long long tabulated : {4'000'000LL, 0LL}) {
    SCOPED_TRACE(tabulated);
    SpmdSearchLimits limits;
    limits.max_tabulated_states = tabulated;
    std::mt19937 rng(11);
    int infeasible = 0;
    for (int trial = 0; trial < 400; ++trial) {
      // No limit, one (the search's shortcut for a single resource) or two.
      const SpmdInstance inst = random_instance(rng, trial % 3);
      const double opt = brute_force(inst);
      const SpmdProgram p = synthesize_program(inst, limits);
      EXPECT_EQ(p.exact_heuristic, tabulated > 0);
      if (std::isinf(opt)) {
        EXPECT_FALSE(p.feasible) << "trial " << trial;
        ++infeasible;
        continue;
      }
      ASSERT_TRUE(p.feasible) << "trial " << trial;
      EXPECT_TRUE(p.complete);
      EXPECT_NEAR(p.cost, opt, 1e-9) << "trial " << trial;
      EXPECT_NEAR(program_cost(inst, p.choice), p.cost, 1e-9);
    }
    EXPECT_GT(infeasible, 0);  // the memory limits bite in some trials
    EXPECT_LT(infeasible, 150);
  }
}

// Ten units of three choices, a chain.
SpmdInstance chain_of_ten() {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> cost(1.0, 10.0);
  SpmdInstance inst;
  for (int u = 0; u < 10; ++u) inst.unit_cost.push_back({cost(rng), cost(rng), cost(rng)});
  for (int b = 1; b < 10; ++b) inst.edges.push_back({b - 1, b, {{0, 5, 5}, {5, 0, 5}, {5, 5, 0}}});
  return inst;
}

TEST(HapSearch, TheHeuristicPrunes) {
  // The weaker bound finds the optimum after far fewer expansions than the 3^10 = 59,049
  // programs; the exact cost to go walks straight to it: the root and one state per unit.
  const SpmdInstance inst = chain_of_ten();
  SpmdSearchLimits weak;
  weak.max_tabulated_states = 0;
  const SpmdProgram p = synthesize_program(inst, weak);
  EXPECT_NEAR(p.cost, brute_force(inst), 1e-9);
  EXPECT_LT(p.expanded, 200);
  const SpmdProgram exact = synthesize_program(inst);
  EXPECT_TRUE(exact.exact_heuristic);
  EXPECT_NEAR(exact.cost, brute_force(inst), 1e-9);
  EXPECT_EQ(exact.expanded, 11);
}

TEST(HapSearch, TabulatesTheCostToGoOnlyWithinItsLimit) {
  // Every unit joined to the last: after k decisions all k are live, 3^k states at level k; the
  // 3^0 + ... + 3^10 = 88,573 states are tabulated under a limit of 100,000, not under 50,000.
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> cost(1.0, 10.0);
  SpmdInstance inst;
  for (int u = 0; u < 11; ++u) inst.unit_cost.push_back({cost(rng), cost(rng), cost(rng)});
  for (int a = 0; a < 10; ++a) inst.edges.push_back({a, 10, {{0, 5, 5}, {5, 0, 5}, {5, 5, 0}}});
  SpmdSearchLimits limits;
  limits.max_tabulated_states = 100'000;
  const SpmdProgram wide = synthesize_program(inst, limits);
  EXPECT_TRUE(wide.exact_heuristic);
  limits.max_tabulated_states = 50'000;
  const SpmdProgram narrow = synthesize_program(inst, limits);
  EXPECT_FALSE(narrow.exact_heuristic);
  EXPECT_NEAR(wide.cost, brute_force(inst), 1e-9);
  EXPECT_NEAR(narrow.cost, wide.cost, 1e-9);
}

TEST(HapSearch, StopsWhenAskedWithAGreedyCompletion) {
  // Asked to stop at the first check (after 1,024 expansions), the weak-bound search of 200 units,
  // each joined to the four before it, returns a whole program, marked incomplete, priced as
  // program_cost prices it.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> cost(1.0, 10.0);
  SpmdInstance inst;
  for (int u = 0; u < 200; ++u) inst.unit_cost.push_back({cost(rng), cost(rng), cost(rng)});
  for (int b = 1; b < 200; ++b)
    for (int a = std::max(0, b - 4); a < b; ++a)
      inst.edges.push_back({a, b, {{0, 5, 5}, {5, 0, 5}, {5, 5, 0}}});
  SpmdSearchLimits limits;
  limits.max_tabulated_states = 0;
  int asked = 0;
  limits.stop = [&] { return ++asked > 0; };
  const SpmdProgram p = synthesize_program(inst, limits);
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(p.expanded, 1024);
  EXPECT_FALSE(p.complete);
  EXPECT_TRUE(p.feasible);
  ASSERT_EQ(p.choice.size(), 200u);
  EXPECT_NEAR(p.cost, program_cost(inst, p.choice), 1e-9);
  // With the cost to go tabulated the same chain needs no stopping: 201 expansions.
  limits.max_tabulated_states = 4'000'000;
  asked = 0;
  const SpmdProgram exact = synthesize_program(inst, limits);
  EXPECT_EQ(asked, 0);
  EXPECT_TRUE(exact.complete);
  EXPECT_EQ(exact.expanded, 201);
  EXPECT_LE(exact.cost, p.cost + 1e-9);
}

// GPT-3 1.3B on 16 V100 + 16 P100: the synthesised program mixes splits (some ops by batch with
// whole weights, some by batch with their weights sharded over the replica), fits, beats the
// uniform Megatron grid, validates, and is deterministic. In fp16, as V100s and P100s train
// (neither has bf16). (Until 2026-12-02 full recomputation charged each device of a batch split
// the replica's whole micro-batch of layer inputs, and the program split ops by tensor dimension
// instead, at 22.42 s simulated; now 14.37 s.)
TEST(HapPlanner, MixesSplitsAndBeatsTheMegatronGrid) {
  const auto m = load_model_or_die("gpt3-1.3b:dtype=fp16");
  const auto c = load_cluster_or_die("hap-mixed");
  SearchOptions opts;
  opts.global_batch = 512;
  auto r = find_plan(m, c, Algo::hap, opts);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->planner, "hap");
  EXPECT_TRUE(r->best.fits);
  const auto& p = r->best.plan;
  bool batch = false, sharded = false;
  for (const auto& op : m.ops) {
    batch = batch || plan::split_of(p, op.name) == plan::SplitKind::batch;
    sharded = sharded || plan::split_of(p, op.name) == plan::SplitKind::batch_sharded;
  }
  EXPECT_TRUE(batch);
  EXPECT_TRUE(sharded);
  // The LM head is tied to the word embedding. A head split by batch whose embedding is split by
  // vocabulary gathers the 206 MB table in each pass (as the simulator and the runtime run it):
  // the search does not split the head so (it did while the gather was free).
  const auto word = plan::split_of(p, "embedding.word");
  const auto head = plan::split_of(p, "head.lm_head");
  EXPECT_FALSE(word == plan::SplitKind::tensor &&
               (head == plan::SplitKind::batch || head == plan::SplitKind::batch_sharded))
      << plan::to_json(p).dump();
  double megatron = 0;
  for (const auto& b : r->baselines)
    if (b.name == "megatron") megatron = b.best.iteration_time_s;
  EXPECT_LT(r->best.iteration_time_s, megatron);
  auto again = find_plan(m, c, Algo::hap, opts);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->best.fingerprint, r->best.fingerprint);
}

// Llama-2 7B on hap-mixed's 16 V100 + 16 P100 (16 GB each): the search shards weights, over a
// replica's devices (the ops it splits by batch, HAP's parameter sharding) or over the replicas
// (ZeRO, which it weighs for programs per node); with whole weights on every device of every
// replica instead, the same program does not fit.
TEST(HapPlanner, ShardsWeightsWhereWholeOnesDoNotFit) {
  const auto m = load_model_or_die("llama2-7b");
  const auto c = load_cluster_or_die("hap-mixed");
  SearchOptions opts;
  opts.global_batch = 512;
  auto r = find_plan(m, c, Algo::hap, opts);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_TRUE(r->best.fits);
  plan::Plan whole = r->best.plan;
  int sharded = whole.zero_stage > 0 ? 1 : 0;
  whole.zero_stage = 0;
  for (auto& o : whole.op_overrides)
    if (o.split == plan::SplitKind::batch_sharded) {
      ++sharded;
      o.split = plan::SplitKind::batch;
    }
  EXPECT_GT(sharded, 0);
  Evaluator evaluator{m, c, opts};
  const Evaluation e = evaluator.evaluate(whole);
  ASSERT_TRUE(e.ok) << e.error;
  EXPECT_FALSE(e.fits);
}

// One CPU worker with a whole core and one with a quarter of a core, a node each; `links` gives
// their intra_node and nic.
cluster::Cluster whole_and_quarter_core(const std::string& links) {
  auto c = cluster::parse_cluster_yaml(
      "version: 1\nnodes:\n"
      "  - {group: fast, count: 1, device: cpu, devices_per_node: 1, cpu_share: 1.0, " +
          links +
          "}\n"
          "  - {group: slow, count: 1, device: cpu, devices_per_node: 1, cpu_share: 0.25, " +
          links + "}\n",
      "two-cpus.yaml");
  if (!c) throw std::runtime_error(c.error().message);
  return *c;
}

// Two CPU workers of one type, one limited to a quarter of its core (cpu_share), on fast links:
// the ratio LP gives the full core four times the work of the quarter (devices of one type at
// different cpu_shares are different classes), as tensor shares of one SPMD program over both or
// as the batch shares of a replica on each, whichever the simulator finds faster (they are
// within a few percent of each other here).
TEST(HapPlanner, SplitsWorkByEachDevicesSpeedNotItsType) {
  const auto m = load_model_or_die("mlp:layers=4,hidden=2048,in=1024,out=10,dtype=fp32");
  const auto c = whole_and_quarter_core(
      "intra_node: {bandwidth: 50GB/s}, nic: {bandwidth: 400Gbps, count: 1}");
  SearchOptions opts;
  opts.global_batch = 64;
  auto r = find_plan(m, c, Algo::hap, opts);
  ASSERT_TRUE(r) << r.error().message;
  const auto& st = r->best.plan.stages;
  ASSERT_EQ(st.size(), 1u);
  plan::Plan even = r->best.plan;
  if (st[0].replicas.size() == 1) {
    const auto& rep = st[0].replicas[0];
    ASSERT_EQ(rep.devices, (std::vector<int>{0, 1}));
    ASSERT_EQ(rep.tp_shares.size(), 2u);
    EXPECT_NEAR(rep.tp_shares[0] / rep.tp_shares[1], 4.0, 0.1);
    even.stages[0].replicas[0].tp_shares.clear();
  } else {
    ASSERT_EQ(st[0].replicas.size(), 2u);
    double share[2] = {0, 0};
    for (const auto& rep : st[0].replicas) {
      ASSERT_EQ(rep.devices.size(), 1u);
      share[rep.devices[0]] = rep.batch_share;
    }
    EXPECT_NEAR(share[0] / share[1], 4.0, 0.1);
    for (auto& rep : even.stages[0].replicas) rep.batch_share = 0.5;
  }
  // Even shares, the same program otherwise, are slower.
  Evaluator evaluator{m, c, opts};
  const Evaluation e = evaluator.evaluate(even);
  ASSERT_TRUE(e.ok) << e.error;
  EXPECT_LT(r->best.iteration_time_s, e.iteration_time_s * 0.8);
}

// HAP's plan for a small GPT on a cluster of CPU workers (YAML), which must be no slower than
// data parallelism (a program HAP can write: every op split by batch); its plan.
plan::Plan expect_hap_no_slower_than_data_parallelism(const std::string& cluster_yaml) {
  const auto m = load_model_or_die("gpt:layers=4,hidden=128,heads=4,seq=64,vocab=256,dtype=fp32");
  auto c = cluster::parse_cluster_yaml(cluster_yaml, "cpus.yaml");
  if (!c) throw std::runtime_error(c.error().message);
  SearchOptions opts;
  opts.global_batch = 16;
  auto hap = find_plan(m, *c, Algo::hap, opts);
  auto dp = find_plan(m, *c, Algo::dp, opts);
  if (!hap) throw std::runtime_error(hap.error().message);
  if (!dp) throw std::runtime_error(dp.error().message);
  EXPECT_LE(hap->best.iteration_time_s, dp->best.iteration_time_s * (1 + 1e-9));
  return hap->best.plan;
}

// Four one-device CPU nodes, two at 0.6 of a core and two at 0.2, whose messages cost
// milliseconds (as measured between CPU workers): splitting every op by batch is data
// parallelism, which HAP must find. It had picked a replicated program on the slow pair instead,
// 3x slower: each op's gradient all-reduce paid a latency of its own (the simulator buckets
// them), and the one-device replicas' ratio LP was answered wrongly by GLPK's presolver.
TEST(HapPlanner, FindsDataParallelismAcrossOneDeviceNodes) {
  const plan::Plan p = expect_hap_no_slower_than_data_parallelism(R"(version: 1
nodes:
  - {group: fast, count: 2, device: cpu, devices_per_node: 1, cpu_share: 0.6,
     intra_node: {bandwidth: 5GB/s}, nic: {bandwidth: 1Gbps, count: 1, latency: 2ms}}
  - {group: slow, count: 2, device: cpu, devices_per_node: 1, cpu_share: 0.2,
     intra_node: {bandwidth: 5GB/s}, nic: {bandwidth: 1Gbps, count: 1, latency: 2ms}}
network: {kind: switch}
)");
  std::set<int> used;
  for (const auto& st : p.stages)
    for (const auto& r : st.replicas) used.insert(r.devices.begin(), r.devices.end());
  EXPECT_EQ(used.size(), 4u);
}

// One node of five like GPUs and a model of 16 heads and 4 key/value heads: a program that splits
// attention by tensor over the node would split the heads evenly five ways, which no plan may do.
// HAP then synthesises the programs again without splitting heads or experts by tensor, and gives
// a valid plan (it gave none, with the validation's error).
TEST(HapPlanner, AvoidsSplittingHeadsWhereTheNodeCannotSplitThemEvenly) {
  const auto m = load_model_or_die("llama:layers=1,hidden=2048,heads=16,seq=128,kv_heads=4");
  auto c = cluster::parse_cluster_yaml(R"(version: 1
nodes:
  - {group: g0, count: 1, device: RTX-4090, devices_per_node: 5,
     intra_node: {bandwidth: 233GB/s}, nic: {bandwidth: 200Gbps}}
)",
                                       "hap5.yaml");
  ASSERT_TRUE(c) << c.error().message;
  SearchOptions opts;
  opts.global_batch = 64;
  auto hap = find_plan(m, *c, Algo::hap, opts);
  ASSERT_TRUE(hap) << hap.error().message;
  ASSERT_TRUE(hap->best.ok) << hap->best.error;
  EXPECT_TRUE(plan::validate_plan(hap->best.plan, m, *c, "plan"));
}

// Where the runtime refuses the first program's plan because it replicates an op other than the
// word embedding (as the runtime's batch programs do; the check here stands in for runtime::),
// HAP synthesises again with only the embedding replicable: a plan, none of it refused (on 8
// MI250X it had replicated the QKV projection and given no plan).
TEST(HapPlanner, SynthesisesAgainWhereAReplicatedOpIsRefused) {
  const auto m =
      load_model_or_die("llama:layers=1,hidden=64,heads=2,kv_heads=2,ffn=256,seq=128,vocab=32000");
  auto c = cluster::parse_cluster_yaml(R"(version: 1
nodes:
  - {group: g0, count: 2, device: MI250X, devices_per_node: 4,
     intra_node: {bandwidth: 16GB/s, latency: 2us}, nic: {bandwidth: 100Gbps, count: 1, latency: 10us}}
)",
                                       "mi250x.yaml");
  ASSERT_TRUE(c) << c.error().message;
  SearchOptions opts;
  opts.global_batch = 64;
  int refused = 0;
  opts.executable = [&](const plan::Plan& p) -> std::string {
    for (const auto& o : p.op_overrides)
      if (o.split == plan::SplitKind::replicate && o.ops.rfind("embedding.", 0) != 0) {
        ++refused;
        return "op \"" + o.ops + "\" is split \"replicate\"";
      }
    return "";
  };
  auto hap = find_plan(m, *c, Algo::hap, opts);
  ASSERT_TRUE(hap) << hap.error().message;
  ASSERT_TRUE(hap->best.ok) << hap->best.error;
  EXPECT_EQ(opts.executable(hap->best.plan), "");
  EXPECT_GT(refused, 1);  // the first programs were refused (the call above refuses none)
}

// One node of four CPU workers whose messages cost a millisecond: one SPMD program over all four
// (HAP's only layout for one node) must split the ops by batch, data parallelism, rather than
// replicate them; with a latency per op's gradient all-reduce it replicated them.
TEST(HapPlanner, PricesGradientAllReducesInBucketsAsTheSimulatorRunsThem) {
  expect_hap_no_slower_than_data_parallelism(R"(version: 1
nodes:
  - {group: host, count: 1, device: cpu, devices_per_node: 4,
     intra_node: {bandwidth: 5GB/s, latency: 1ms}, nic: {bandwidth: 1Gbps, count: 1}}
)");
}

// An MLP, whose ops the model keeps whole under tensor parallelism, on a whole core and a quarter
// of one: a program that splits no work runs at its slowest device's pace, so HAP keeps it to the
// faster device (the ratio LP, with nothing to balance, had given it all to the slower one).
TEST(HapPlanner, KeepsAProgramOfWholeOpsOnTheFastestDevices) {
  const auto m = load_model_or_die("mlp:layers=2,hidden=256,in=64,out=10,dtype=fp32");
  const auto c = whole_and_quarter_core(
      "intra_node: {bandwidth: 5GB/s}, nic: {bandwidth: 1Gbps, count: 1, latency: 2ms}");
  SearchOptions opts;
  opts.global_batch = 32;
  auto hap = find_plan(m, c, Algo::hap, opts);
  ASSERT_TRUE(hap) << hap.error().message;
  plan::Plan alone = hap->best.plan;
  plan::Stage st;
  st.num_layers = static_cast<int>(m.layers.size());
  st.replicas = {{{0}, {}, 1.0}};
  alone.stages = {st};
  alone.op_overrides.clear();
  const Evaluation e = Evaluator{m, c, opts}.evaluate(alone);
  ASSERT_TRUE(e.ok) << e.error;
  EXPECT_LE(hap->best.iteration_time_s, e.iteration_time_s * (1 + 1e-9));
}

}  // namespace
}  // namespace hetplan::search

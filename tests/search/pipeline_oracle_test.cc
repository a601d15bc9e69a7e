// The pipeline planner against a brute-force enumeration of its whole decision space (every
// ordered choice of device groups, every equal cut of each group into stages with every
// tensor-parallel degree, every micro-batch size, recompute mode, ZeRO stage 0/1 and every
// placement of the layers), each candidate simulated. The planner must come within 1% of the
// enumeration's best.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <tuple>

#include "hetplan/plan/plan_json.h"
#include "hetplan/plan/validate.h"
#include "hetplan/search/device_groups.h"
#include "hetplan/search/search.h"
#include "search_fixtures.h"

namespace hetplan::search {
namespace {

using testing::compositions;
using testing::data_file;
using testing::load_cluster_or_die;
using testing::load_model_or_die;

struct StageChoice {
  std::vector<plan::Replica> replicas;
};

// Every list of stages (device sets with replicas) the planner's shapes describe.
std::vector<std::vector<StageChoice>> all_shapes(const cluster::Cluster& c) {
  const auto groups = device_groups(c);
  const int k = static_cast<int>(groups.size());
  // Per group: every (stage count, tp) cut as a list of stages.
  std::vector<std::vector<std::vector<StageChoice>>> cuts(k);
  for (int g = 0; g < k; ++g) {
    const auto devs = groups[g].devices();
    const int n = static_cast<int>(devs.size()), dpn = groups[g].devices_per_node;
    for (int s = 1; s <= n; ++s) {
      if (n % s) continue;
      const int chunk = n / s;
      if (chunk < dpn ? dpn % chunk != 0 : chunk % dpn != 0) continue;
      for (int tp = 1; tp <= chunk && tp <= dpn && tp <= 8; tp *= 2) {
        if (chunk % tp || dpn % tp) continue;
        std::vector<StageChoice> stages;
        for (int i = 0; i < s; ++i) {
          StageChoice st;
          for (int j = 0; j < chunk; j += tp) {
            plan::Replica r;
            r.devices.assign(devs.begin() + i * chunk + j, devs.begin() + i * chunk + j + tp);
            st.replicas.push_back(r);
          }
          for (auto& r : st.replicas) r.batch_share = 1.0 / static_cast<double>(st.replicas.size());
          stages.push_back(st);
        }
        cuts[g].push_back(stages);
      }
    }
  }
  std::vector<std::vector<StageChoice>> out;
  for (int mask = 1; mask < (1 << k); ++mask) {
    std::vector<int> order;
    for (int g = 0; g < k; ++g)
      if (mask & (1 << g)) order.push_back(g);
    do {
      std::vector<StageChoice> acc;
      std::function<void(std::size_t)> rec = [&](std::size_t i) {
        if (i == order.size()) {
          out.push_back(acc);
          return;
        }
        for (const auto& cut : cuts[order[i]]) {
          acc.insert(acc.end(), cut.begin(), cut.end());
          rec(i + 1);
          acc.resize(acc.size() - cut.size());
        }
      };
      rec(0);
    } while (std::next_permutation(order.begin(), order.end()));
  }
  return out;
}

struct OraclePoint {
  double time = 0;
  double peak_bytes = 0;  // the largest peak over the devices
  plan::Plan plan;
};

struct OracleBest {
  double time = 1e300;
  plan::Plan plan;
  long long simulated = 0;
  std::vector<OraclePoint> fitting;  // every plan that fits
};

OracleBest enumerate_plans(const model::Model& m, const cluster::Cluster& c, std::int64_t B) {
  OracleBest best;
  const int L = static_cast<int>(m.layers.size());
  for (const auto& shape : all_shapes(c)) {
    const int S = static_cast<int>(shape.size());
    if (S > L) continue;
    std::size_t dp_max = 0;
    for (const auto& st : shape) dp_max = std::max(dp_max, st.replicas.size());
    for (int u : {1, 2, 4, 8}) {
      if (B % (u * static_cast<std::int64_t>(dp_max))) continue;
      const int mb = static_cast<int>(B / (u * static_cast<std::int64_t>(dp_max)));
      if (S > 1 && mb < S) continue;
      for (auto rc : {cost::Recompute::none, cost::Recompute::selective, cost::Recompute::full})
        for (int zero : {0, 1}) {
          std::vector<int> acc;
          compositions(L, S, acc, [&](const std::vector<int>& sizes) {
            plan::Plan p;
            p.global_batch = B;
            p.num_microbatches = mb;
            p.recompute = rc;
            p.zero_stage = zero;
            int first = 0;
            for (int s = 0; s < S; ++s) {
              p.stages.push_back(plan::Stage{first, sizes[s], shape[s].replicas});
              first += sizes[s];
            }
            if (!plan::validate_plan(p, m, c, "oracle")) return;
            auto r = sim::simulate(m, c, p, sim::SimOptions{});
            ++best.simulated;
            if (r && r->fits)
              best.fitting.push_back({r->iteration_time.value, r->max_peak_memory.value, p});
            if (r && r->fits && r->iteration_time.value < best.time) {
              best.time = r->iteration_time.value;
              best.plan = p;
            }
          });
        }
    }
  }
  return best;
}

// The enumeration of (model, cluster, batch), made once per test binary: the oracles below share
// it (over 40,000 simulations on three-kinds-6).
const OracleBest& brute_force(const model::Model& m, const cluster::Cluster& c, std::int64_t B) {
  static std::map<std::tuple<std::string, std::string, std::int64_t>, OracleBest> done;
  const auto key = std::make_tuple(m.name, c.name, B);
  auto it = done.find(key);
  if (it == done.end()) it = done.emplace(key, enumerate_plans(m, c, B)).first;
  return it->second;
}

void expect_within_one_percent(const std::string& model_spec, const std::string& cluster_file,
                               std::int64_t B) {
  const auto m = load_model_or_die(model_spec);
  const auto c = load_cluster_or_die(data_file(cluster_file));
  ASSERT_LE(c.num_devices(), 8);
  ASSERT_LE(m.layers.size(), 6u);
  SearchOptions opts;
  opts.global_batch = B;
  auto res = find_plan(m, c, Algo::pipeline, opts);
  ASSERT_TRUE(res) << res.error().message;
  ASSERT_TRUE(res->best.fits);
  // Only the pipeline planner's answer counts here, not a baseline's.
  ASSERT_EQ(res->planners.size(), 1u);
  const auto& planned = res->planners[0].best;
  const OracleBest& oracle = brute_force(m, c, B);
  ASSERT_LT(oracle.time, 1e300);
  ::testing::Test::RecordProperty("oracle_plans", std::to_string(oracle.simulated));
  EXPECT_LE(planned.iteration_time_s, oracle.time * 1.01)
      << "planner " << planned.iteration_time_s << " s, brute force " << oracle.time << " s over "
      << oracle.simulated << " plans\nplanner's plan: " << plan::to_json(planned.plan).dump()
      << "\nbest plan: " << plan::to_json(oracle.plan).dump();
}

// Frontier Tracking against the brute-force frontier of the same space: every plan on the true
// (iteration time, peak memory) frontier has a point on the tracked frontier that is at most
// `slack` slower and uses at most `slack` more memory (the frontier keeps an epsilon-dominance
// set at epsilon 3% of the plans its estimator ranks, then simulates them). Before the pool
// allowed for the estimator's error, eight of the eighteen true points on three-kinds-6 had no
// tracked point within 5%: plans estimated up to 10% faster than they simulate had pushed them out.
void expect_frontier_covers_the_oracles(const std::string& model_spec,
                                        const std::string& cluster_file, std::int64_t B,
                                        double slack) {
  const auto m = load_model_or_die(model_spec);
  const auto c = load_cluster_or_die(data_file(cluster_file));
  SearchOptions opts;
  opts.global_batch = B;
  auto front = find_frontier(m, c, opts);
  ASSERT_TRUE(front) << front.error().message;
  const OracleBest& oracle = brute_force(m, c, B);
  ASSERT_FALSE(oracle.fitting.empty());
  // The true frontier: sort by time, keep each plan that needs less memory than every faster one.
  auto all = oracle.fitting;
  std::sort(all.begin(), all.end(), [](const OraclePoint& a, const OraclePoint& b) {
    return a.time != b.time ? a.time < b.time : a.peak_bytes < b.peak_bytes;
  });
  std::vector<OraclePoint> truth;
  for (const auto& q : all)
    if (truth.empty() || q.peak_bytes < truth.back().peak_bytes) truth.push_back(q);
  ::testing::Test::RecordProperty("true_frontier_points", std::to_string(truth.size()));
  int covered = 0;
  for (const auto& q : truth) {
    bool ok = false;
    for (const auto& f : front->points)
      ok = ok || (f.iteration_time_s <= q.time * (1 + slack) &&
                  f.max_peak_bytes <= q.peak_bytes * (1 + slack));
    covered += ok;
    EXPECT_TRUE(ok) << "no tracked point within " << slack * 100 << "% of the true point ("
                    << q.time << " s, " << q.peak_bytes / 1e9
                    << " GB): " << plan::to_json(q.plan).dump();
  }
  EXPECT_EQ(covered, static_cast<int>(truth.size()));
}

TEST(FrontierOracle, TwoKindsOfGpuEightDevices) {
  expect_frontier_covers_the_oracles(testing::kSmallGpt, "two-kinds-8.yaml", 64, 0.03);
}

TEST(FrontierOracle, ThreeKindsOfGpuSixDevices) {
  expect_frontier_covers_the_oracles(testing::kSmallGpt, "three-kinds-6.yaml", 48, 0.03);
}

TEST(PipelineOracle, ThreeKindsOfGpuSixDevices) {
  expect_within_one_percent(testing::kSmallGpt, "three-kinds-6.yaml", 48);
}

TEST(PipelineOracle, TwoKindsOfGpuEightDevices) {
  expect_within_one_percent(testing::kSmallGpt, "two-kinds-8.yaml", 64);
}

TEST(PipelineOracle, MemoryForcesAPipeline) {
  // 24 blocks of hidden 2048 do not fit one 16 GB V100 with Adam: the layers must be spread.
  expect_within_one_percent("gpt:layers=4,hidden=4096,heads=32,seq=1024,vocab=50000",
                            "two-kinds-8.yaml", 32);
}

// The small GPT on a cluster file, its estimator and the brute force of its plan space.
struct EstimatorCase {
  EstimatorCase(const std::string& cluster_file, std::int64_t B)
      : m(load_model_or_die(testing::kSmallGpt)),
        c(load_cluster_or_die(data_file(cluster_file))),
        opts([B] {
          SearchOptions o;
          o.global_batch = B;
          return o;
        }()),
        estimator(m, c, opts),
        oracle(brute_force(m, c, B)) {}
  const model::Model m;
  const cluster::Cluster c;
  const SearchOptions opts;
  const Estimator estimator;
  const OracleBest& oracle;
};

// The estimator that ranks the candidates against the simulator, over every plan of the space that
// fits: a GPipe or 1F1B pipeline is replayed pass by pass. Measured: mean error 0.3% on
// three-kinds-6 and 0.6% on two-kinds-8 since ZeRO-1's gather is counted after the optimizer
// step; before, 0.4% (from 8.3% under to 2.9% over) and 0.7% (8.5% under to 5.8% over, the
// highest where a tied head's table is summed across nodes between stages of unlike replica
// sizes). When the estimate added each boundary's transfers to its stages' times and took
// sum + (m - 1) max, the mean error was 4.5% on three-kinds-6, from 14% under to 30% over. Each
// plan's bound was 7% until the loss's fp32 traffic was counted (2026-11-30): the worst plan on
// two-kinds-8 (a V100 stage of tp 4, then the last block and the head over four A100 replicas) went
// from 6.1% over (another split of the same layout) to 7.1%, while the mean error fell from 0.6%
// to 0.47% there and is 0.30% on three-kinds-6.
void expect_estimates_follow_the_simulator(const std::string& cluster_file, std::int64_t B,
                                           double mean_error) {
  const EstimatorCase k(cluster_file, B);
  const Estimator& estimator = k.estimator;
  const OracleBest& oracle = k.oracle;
  ASSERT_GT(oracle.fitting.size(), 1000u);
  double sum = 0, lowest = 0, highest = 0;
  for (const auto& q : oracle.fitting) {
    const double err = estimator.estimate(q.plan).time_s / q.time - 1;
    sum += std::abs(err);
    lowest = std::min(lowest, err);
    highest = std::max(highest, err);
    EXPECT_LT(err, 0.075) << plan::to_json(q.plan).dump();
  }
  const double mean = sum / static_cast<double>(oracle.fitting.size());
  ::testing::Test::RecordProperty("mean_error", std::to_string(mean));
  EXPECT_LT(mean, mean_error) << "from " << lowest << " to " << highest;
  EXPECT_GT(lowest, -0.1);
}

// ZeRO 2 and 3, which the enumeration leaves out: every seventh fitting plan of the space that
// is ZeRO-1, under ZeRO 2 and 3, estimated against its simulation. ZeRO-3
// gathers a stage's parameters before every pass (the estimator once ignored this and
// estimated such plans up to 3.5 times too fast, crowding better plans out of the frontier);
// ZeRO 1 and 2 gather the updated ones after the optimizer step. ZeRO 2 and 3 reduce-scatter
// every micro-batch's gradients (ZeRO-3's on the links its gathers use). Measured: mean error
// 0.23% and 0.41% (ZeRO-2), 0.19% and 0.35% (ZeRO-3) on three-kinds-6 and two-kinds-8.
void expect_zero_estimates_follow_the_simulator(const std::string& cluster_file, std::int64_t B) {
  const EstimatorCase k(cluster_file, B);
  const Estimator& estimator = k.estimator;
  const OracleBest& oracle = k.oracle;
  for (int zero : {2, 3}) {
    double sum = 0;
    int n = 0;
    for (std::size_t i = 0; i < oracle.fitting.size(); i += 7) {
      plan::Plan p = oracle.fitting[i].plan;
      if (p.zero_stage != 1) continue;
      p.zero_stage = zero;
      auto r = sim::simulate(k.m, k.c, p, sim::SimOptions{});
      ASSERT_TRUE(r) << r.error().message;
      const double err = estimator.estimate(p).time_s / r->iteration_time.value - 1;
      EXPECT_LT(std::abs(err), 0.1)
          << "ZeRO-" << zero << ", error " << err << ": " << plan::to_json(p).dump();
      sum += std::abs(err);
      ++n;
    }
    ASSERT_GT(n, 50);
    const double mean = sum / n;
    ::testing::Test::RecordProperty("mean_error_zero" + std::to_string(zero), std::to_string(mean));
    EXPECT_LT(mean, 0.03) << "ZeRO-" << zero << " over " << n << " plans";
  }
}

TEST(EstimateOracle, ZeroTwoAndThreeOnThreeKindsOfGpuSixDevices) {
  expect_zero_estimates_follow_the_simulator("three-kinds-6.yaml", 48);
}

TEST(EstimateOracle, ZeroTwoAndThreeOnTwoKindsOfGpuEightDevices) {
  expect_zero_estimates_follow_the_simulator("two-kinds-8.yaml", 64);
}

TEST(EstimateOracle, ThreeKindsOfGpuSixDevices) {
  expect_estimates_follow_the_simulator("three-kinds-6.yaml", 48, 0.01);
}

TEST(EstimateOracle, TwoKindsOfGpuEightDevices) {
  expect_estimates_follow_the_simulator("two-kinds-8.yaml", 64, 0.01);
}

// Frontier Tracking skips shapes and drops layer-DP cells by a lower bound on a placement's
// estimate: the estimator's pipeline is a schedule, so it takes at least, for every stage k, the
// forward and backward passes of the stages before k once plus m times stage k's. Over every
// fitting plan of the space, and the ZeRO-1 ones under ZeRO 2 and 3 (whose gathers only delay
// passes), the estimate is at least that; the bound is tight for some plan (within 2%), so a
// looser bound (a term more) would fail here.
void expect_estimates_above_the_frontiers_bound(const std::string& cluster_file, std::int64_t B) {
  const EstimatorCase k(cluster_file, B);
  double tightest = 1e300;
  int n = 0;
  auto check = [&](const plan::Plan& p) {
    const double m = p.num_microbatches;
    const double mb_samples = static_cast<double>(p.global_batch) / m;
    double before = 0, bound = 0;
    for (const auto& st : p.stages) {
      double stage = 0;  // the slowest replica's forward and backward passes
      for (const auto& r : st.replicas) {
        const auto& t = k.estimator.layer_costs(p, r, r.batch_share * mb_samples,
                                                static_cast<int>(st.replicas.size()));
        double sum = 0;
        for (int l = st.first_layer; l < st.first_layer + st.num_layers; ++l)
          sum += t.forward[l] + t.backward[l];
        stage = std::max(stage, sum);
      }
      bound = std::max(bound, before + m * stage);
      before += stage;
    }
    const double estimate = k.estimator.estimate(p).time_s;
    EXPECT_GE(estimate, bound * (1 - 1e-9)) << plan::to_json(p).dump();
    tightest = std::min(tightest, estimate / bound);
    ++n;
  };
  for (const auto& q : k.oracle.fitting) {
    check(q.plan);
    if (q.plan.zero_stage != 1) continue;
    for (int zero : {2, 3}) {
      plan::Plan p = q.plan;
      p.zero_stage = zero;
      check(p);
    }
  }
  ASSERT_GT(n, 1000);
  ::testing::Test::RecordProperty("tightest", std::to_string(tightest));
  EXPECT_LT(tightest, 1.02);
}

TEST(EstimateOracle, AboveTheFrontiersBoundOnThreeKindsOfGpuSixDevices) {
  expect_estimates_above_the_frontiers_bound("three-kinds-6.yaml", 48);
}

TEST(EstimateOracle, AboveTheFrontiersBoundOnTwoKindsOfGpuEightDevices) {
  expect_estimates_above_the_frontiers_bound("two-kinds-8.yaml", 64);
}

}  // namespace
}  // namespace hetplan::search

namespace hetplan::search {
namespace {

// A pipeline of two-replica, tensor-parallel-2 stages, one node of four A100s each, over
// leaf-spine-mixed's 25 Gb/s NICs: each boundary's four transfers all cross the sending node's
// NIC, and the boundary between the two leaves also its spine uplinks, two transfers on each by
// the ECMP hash. The uplink (half a NIC's rate) carries half the bytes, so the boundary takes as
// long as the boundaries within a leaf; the estimator once scaled the uplink's time by the NIC's
// four-fold sharing, put that boundary at twice the others and the plan 11% over its simulation
// (0.766 s against 0.690 s), and the pipeline planner never simulated it.
TEST(EstimateOracle, SharedNicAndSpineBoundariesAsTheSimulator) {
  auto m = model::load_model("gpt3-350m");
  ASSERT_TRUE(m.ok());
  auto c = cluster::load_cluster("leaf-spine-mixed");
  ASSERT_TRUE(c.ok());
  plan::Plan p;
  p.model = m->name;
  p.cluster = c->name;
  p.global_batch = 64;
  p.num_microbatches = 32;
  p.zero_stage = 2;
  const int layers[] = {6, 7, 7, 6};
  int first = 0;
  for (int s = 0; s < 4; ++s) {
    plan::Stage st{first, layers[s], {}};
    for (int r = 0; r < 2; ++r)
      st.replicas.push_back(plan::Replica{{4 * s + 2 * r, 4 * s + 2 * r + 1}, {}, 0.5});
    p.stages.push_back(st);
    first += layers[s];
  }
  ASSERT_EQ(first, static_cast<int>(m->layers.size()));
  SearchOptions opts;
  opts.global_batch = 64;
  const Estimator estimator(*m, *c, opts);
  const double within_leaf = estimator.boundary_time(p, 0);
  EXPECT_NEAR(estimator.boundary_time(p, 1), within_leaf, 0.01 * within_leaf);
  EXPECT_NEAR(estimator.boundary_time(p, 2), within_leaf, 0.01 * within_leaf);
  auto r = sim::simulate(*m, *c, p, sim::SimOptions{});
  ASSERT_TRUE(r) << r.error().message;
  const double err = estimator.estimate(p).time_s / r->iteration_time.value - 1;
  EXPECT_LT(std::abs(err), 0.05) << estimator.estimate(p).time_s << " s estimated, "
                                 << r->iteration_time.value << " s simulated";
}

}  // namespace
}  // namespace hetplan::search

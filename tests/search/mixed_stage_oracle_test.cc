// The pipeline planner's stages that span device types (SearchOptions::mixed_stages) against a
// brute force over that space: every set of two or more device groups, every stage count S that
// cuts each of them into equal parts, one tensor-parallel degree, stage s holding part s of every
// group with batch shares proportional to the replicas' peak FLOP/s (whole samples per
// micro-batch), every micro-batch count the planner considers, recompute mode, ZeRO stage 0/1 and
// every placement of the layers, each simulated.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

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

struct MixedShape {
  std::vector<std::vector<plan::Replica>> stages;  // replicas, batch shares unset
  std::vector<double> weights;                     // per replica of a stage: its peak FLOP/s
};

std::vector<MixedShape> mixed_shapes(const cluster::Cluster& c, model::DType dt) {
  const auto groups = device_groups(c);
  const int k = static_cast<int>(groups.size());
  std::vector<MixedShape> out;
  for (int mask = 1; mask < (1 << k); ++mask) {
    std::vector<int> set;
    for (int g = 0; g < k; ++g)
      if (mask & (1 << g)) set.push_back(g);
    if (set.size() < 2) continue;
    for (int S = 1; S <= 8; ++S)
      for (int tp = 1; tp <= 8; tp *= 2) {
        MixedShape shape;
        shape.stages.resize(S);
        bool ok = true;
        for (int g : set) {
          const auto devs = groups[g].devices();
          const int n = static_cast<int>(devs.size()), dpn = groups[g].devices_per_node;
          const int chunk = n / S;
          ok = ok && n % S == 0 && (chunk < dpn ? dpn % chunk == 0 : chunk % dpn == 0) &&
               tp <= chunk && tp <= dpn && chunk % tp == 0 && dpn % tp == 0;
          if (!ok) break;
          for (int s = 0; s < S; ++s)
            for (int j = 0; j < chunk; j += tp) {
              plan::Replica r;
              r.devices.assign(devs.begin() + s * chunk + j, devs.begin() + s * chunk + j + tp);
              shape.stages[s].push_back(r);
            }
        }
        if (!ok) continue;
        for (const auto& r : shape.stages[0]) {
          double peak = 0;
          for (int d : r.devices) peak += c.type_of(d).peak(dt).value;
          shape.weights.push_back(peak);
        }
        out.push_back(std::move(shape));
      }
  }
  return out;
}

struct Best {
  double time = 1e300;
  plan::Plan plan;
  long long simulated = 0;
};

Best enumerate_mixed(const model::Model& m, const cluster::Cluster& c, std::int64_t B) {
  Best best;
  const int L = static_cast<int>(m.layers.size());
  for (const auto& shape : mixed_shapes(c, m.dtype)) {
    const int S = static_cast<int>(shape.stages.size());
    if (S > L) continue;
    const auto dp = static_cast<std::int64_t>(shape.weights.size());
    std::vector<int> seen;
    for (int u : {1, 2, 4, 8}) {
      int mb = static_cast<int>(B / (u * dp));
      while (mb > 0 && B % mb) --mb;
      if (mb < 1 || (S > 1 && mb < S) || std::find(seen.begin(), seen.end(), mb) != seen.end())
        continue;
      seen.push_back(mb);
      const auto samples = proportional_split(shape.weights, B / mb);
      if (std::find(samples.begin(), samples.end(), 0) != samples.end()) continue;
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
              auto replicas = shape.stages[s];
              for (std::size_t r = 0; r < replicas.size(); ++r)
                replicas[r].batch_share =
                    static_cast<double>(samples[r]) / static_cast<double>(B / mb);
              p.stages.push_back(plan::Stage{first, sizes[s], replicas});
              first += sizes[s];
            }
            if (!plan::validate_plan(p, m, c, "oracle")) return;
            auto r = sim::simulate(m, c, p, sim::SimOptions{});
            ++best.simulated;
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

bool spans_types(const plan::Plan& p, const cluster::Cluster& c) {
  for (const auto& st : p.stages)
    for (const auto& r : st.replicas)
      if (c.devices[r.devices.front()].type != c.devices[st.replicas.front().devices.front()].type)
        return true;
  return false;
}

// Returns the gain of mixed stages: the planner's time without them over its time with them.
double expect_within_one_percent_of_mixed(const std::string& model_spec,
                                          const std::string& cluster_path, std::int64_t B) {
  const auto m = load_model_or_die(model_spec);
  const auto c = load_cluster_or_die(cluster_path);
  SearchOptions opts;
  opts.global_batch = B;
  auto res = find_plan(m, c, Algo::pipeline, opts);
  EXPECT_TRUE(res) << res.error().message;
  if (!res) return 0;
  const auto& planned = res->planners.at(0).best;
  EXPECT_TRUE(planned.fits);
  const Best oracle = enumerate_mixed(m, c, B);
  EXPECT_LT(oracle.time, 1e300);
  ::testing::Test::RecordProperty("oracle_plans", std::to_string(oracle.simulated));
  EXPECT_LE(planned.iteration_time_s, oracle.time * 1.01)
      << "planner " << planned.iteration_time_s << " s, brute force over mixed stages "
      << oracle.time << " s over " << oracle.simulated
      << " plans\nplanner's plan: " << plan::to_json(planned.plan).dump()
      << "\nbest plan: " << plan::to_json(oracle.plan).dump();
  // Without mixed stages the planner does no better than with them here.
  opts.mixed_stages = false;
  auto one_type = find_plan(m, c, Algo::pipeline, opts);
  EXPECT_TRUE(one_type) << one_type.error().message;
  if (!one_type) return 0;
  const auto& uniform = one_type->planners.at(0).best;
  EXPECT_FALSE(spans_types(uniform.plan, c));
  EXPECT_TRUE(uniform.fits);
  EXPECT_LE(planned.iteration_time_s, uniform.iteration_time_s * 1.0000001);
  const double gain = uniform.iteration_time_s / planned.iteration_time_s;
  ::testing::Test::RecordProperty("mixed_gain", std::to_string(gain));
  return gain;
}

TEST(MixedStageOracle, TwoKindsOfGpuEightDevices) {
  expect_within_one_percent_of_mixed(testing::kSmallGpt, data_file("two-kinds-8.yaml"), 64);
}

TEST(MixedStageOracle, ThreeKindsOfGpuSixDevices) {
  expect_within_one_percent_of_mixed(testing::kSmallGpt, data_file("three-kinds-6.yaml"), 48);
}

// Machines that each hold both types: a stage of one type spans the slow network, a stage of one
// machine's GPUs of both types does not, so mixed stages win.
TEST(MixedStageOracle, MachinesOfTwoTypesEach) {
  const double gain = expect_within_one_percent_of_mixed(
      testing::kSmallGpt, std::string(HETPLAN_SOURCE_DIR) + "/data/clusters/mixed-nodes.yaml", 64);
  EXPECT_GT(gain, 1.02);
}

}  // namespace
}  // namespace hetplan::search

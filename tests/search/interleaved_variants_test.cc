// The interleaved variants find_plan tries of its best 1F1B pipeline.
#include <gtest/gtest.h>

#include "hetplan/search/evaluate.h"
#include "hetplan/search/search.h"
#include "search_fixtures.h"

namespace hetplan::search {
namespace {

plan::Stage stage(int first, int count, std::vector<std::vector<int>> replicas) {
  plan::Stage st;
  st.first_layer = first;
  st.num_layers = count;
  for (auto& devices : replicas) {
    plan::Replica r;
    r.devices = std::move(devices);
    r.batch_share = 1.0 / 2;
    st.replicas.push_back(std::move(r));
  }
  return st;
}

// (first layer, layer count, first device) of each stage.
std::vector<std::tuple<int, int, int>> layout(const plan::Plan& p) {
  std::vector<std::tuple<int, int, int>> out;
  for (const auto& st : p.stages)
    out.emplace_back(st.first_layer, st.num_layers, st.replicas[0].devices[0]);
  return out;
}

TEST(InterleavedVariants, CutEachStageIntoChunksThatCycleThroughItsDevices) {
  plan::Plan p;
  p.global_batch = 16;
  p.num_microbatches = 4;
  // Stage 0: layers 0-4 on devices 0 and 1 (two replicas); stage 1: layers 5-7 on device 2.
  p.stages = {stage(0, 5, {{0}, {1}}), stage(5, 3, {{2}})};
  const auto variants = interleaved_variants(p);
  ASSERT_EQ(variants.size(), 2u);  // v = 2 and 3 (stage 1 has 3 layers: no 4 chunks)
  using L = std::vector<std::tuple<int, int, int>>;
  EXPECT_EQ(layout(variants[0]), (L{{0, 3, 0}, {3, 2, 2}, {5, 2, 0}, {7, 1, 2}}));
  EXPECT_EQ(layout(variants[1]),
            (L{{0, 2, 0}, {2, 1, 2}, {3, 2, 0}, {5, 1, 2}, {6, 1, 0}, {7, 1, 2}}));
  for (const auto& v : variants) {
    EXPECT_EQ(v.schedule, plan::Schedule::interleaved);
    for (std::size_t s = 0; s < v.stages.size(); ++s)
      EXPECT_EQ(v.stages[s].replicas, p.stages[s % 2].replicas) << s;
    plan::Plan same = v;  // nothing else changes
    same.stages = p.stages;
    same.schedule = p.schedule;
    EXPECT_EQ(same, p);
  }
  // Micro-batches that the pipeline size does not divide, other schedules, one stage, op-level
  // plans and stages that already share devices: none.
  auto odd = p;
  odd.num_microbatches = 5;
  EXPECT_TRUE(interleaved_variants(odd).empty());
  auto gpipe = p;
  gpipe.schedule = plan::Schedule::gpipe;
  EXPECT_TRUE(interleaved_variants(gpipe).empty());
  auto one = p;
  one.stages = {stage(0, 8, {{0}, {1}})};
  EXPECT_TRUE(interleaved_variants(one).empty());
  EXPECT_TRUE(interleaved_variants(variants[0]).empty());
  auto shared = p;
  shared.stages[1].replicas[0].devices = {1};
  EXPECT_TRUE(interleaved_variants(shared).empty());
}

// GPT-3 6.7B on a100-v100: the pipeline planner's best is four stages of 1F1B (7.17 s). Two model
// chunks a stage shrink its bubble but hold 45.9 GiB a device in the warm-up; with selective
// recomputation they fit and take 6.84 s, which find_plan returns.
TEST(InterleavedVariants, FindPlanTakesOneWhereTheSimulatorFindsItFaster) {
  const auto m = testing::load_model_or_die("gpt3-6.7b");
  const auto c = testing::load_cluster_or_die("a100-v100");
  SearchOptions opts;
  opts.global_batch = 256;
  auto res = find_plan(m, c, Algo::pipeline, opts);
  ASSERT_TRUE(res) << res.error().message;
  ASSERT_EQ(res->planners.size(), 1u);
  const Evaluation& pipeline = res->planners[0].best;
  ASSERT_TRUE(pipeline.ok && pipeline.fits);
  EXPECT_EQ(pipeline.plan.schedule, plan::Schedule::one_f_one_b);
  const Evaluation& best = res->best;
  ASSERT_TRUE(best.ok && best.fits);
  EXPECT_EQ(best.plan.schedule, plan::Schedule::interleaved);
  EXPECT_LT(best.iteration_time_s, pipeline.iteration_time_s);
  const std::size_t P = pipeline.plan.stages.size();
  ASSERT_EQ(best.plan.stages.size() % P, 0u);
  for (std::size_t s = 0; s < best.plan.stages.size(); ++s)
    EXPECT_EQ(best.plan.stages[s].replicas, pipeline.plan.stages[s % P].replicas) << s;
  // The variant as it stands (no recomputation added) does not fit.
  const Evaluator evaluator(m, c, opts);
  bool tried_unfit = false;
  for (const plan::Plan& v : interleaved_variants(pipeline.plan)) {
    const Evaluation e = evaluator.evaluate(v);
    tried_unfit = tried_unfit || (v.stages.size() == best.plan.stages.size() && e.ok && !e.fits);
  }
  EXPECT_TRUE(tried_unfit);
}

}  // namespace
}  // namespace hetplan::search

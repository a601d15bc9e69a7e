// CandidatePool: keeps the best candidates by estimate and simulates them; a plan that
// SearchOptions::executable refuses is never kept, so the runtime's refusals do not crowd out the
// plans it runs, and a pool of refused plans only says why.
#include <gtest/gtest.h>

#include "hetplan/search/planners.h"
#include "hetplan/search/search.h"
#include "search_fixtures.h"

namespace hetplan::search {
namespace {

using testing::plan_of;

TEST(CandidatePool, KeepsNoPlanTheRuntimeRefuses) {
  SearchOptions opts;
  opts.simulate_top = 2;
  // "Refuses" every plan with tensor parallelism.
  int asked = 0;
  opts.executable = [&](const plan::Plan& p) {
    ++asked;
    return p.stages[0].replicas[0].devices.size() > 1 ? std::string("no tensor parallelism")
                                                      : std::string();
  };
  const testing::PoolCase pc(opts);
  const auto& m = pc.m;
  const auto& c = pc.c;
  const Context& ctx = pc.ctx;
  const Evaluator& evaluator = pc.evaluator;
  const std::vector<std::string> strategies = {
      "dp=4,tp=2,pp=1,mbs=4,gbs=64", "dp=2,tp=4,pp=1,mbs=4,gbs=64", "dp=8,tp=1,pp=1,mbs=4,gbs=64",
      "dp=8,tp=1,pp=1,mbs=8,gbs=64", "dp=1,tp=4,pp=2,mbs=4,gbs=64", "dp=4,tp=1,pp=2,mbs=2,gbs=64"};
  CandidatePool pool(ctx, "test");
  for (const auto& s : strategies) EXPECT_TRUE(pool.offer(plan_of(s, m, c)));
  EXPECT_FALSE(pool.empty());
  // Asked only of plans that would be kept when offered: at least the two refused and one kept.
  EXPECT_GE(asked, 3);
  EXPECT_LE(asked, 6);
  const PlannerOutput out = pool.finish();
  EXPECT_EQ(out.estimated, 6);
  ASSERT_EQ(out.simulated.size(), 2u);
  for (const auto& e : out.simulated) {
    EXPECT_TRUE(e.ok) << e.error;
    EXPECT_EQ(e.plan.stages[0].replicas[0].devices.size(), 1u);
  }

  // Nothing but refused plans: nothing is simulated, and the error says why.
  CandidatePool refused(ctx, "test");
  for (const auto& s : {strategies[0], strategies[1], strategies[4]})
    EXPECT_TRUE(refused.offer(plan_of(s, m, c)));
  EXPECT_FALSE(refused.empty());  // offered, though nothing is kept
  const int simulated = evaluator.simulated();
  const PlannerOutput none_out = refused.finish();
  EXPECT_FALSE(none_out.best.ok);
  EXPECT_EQ(none_out.best.error, "not executable: no tensor parallelism");
  EXPECT_TRUE(none_out.simulated.empty());
  EXPECT_EQ(evaluator.simulated(), simulated);
}

// Frontier Tracking's pool keeps no refused plan either; when the runtime refuses every plan
// the search finds, the error gives the first reason instead of "fits" only. Plans with one
// stage are refused here, so the frontier holds pipelines alone.
TEST(FrontierPool, KeepsNoPlanTheRuntimeRefusesAndSaysWhyWhenItRefusesAll) {
  const auto m = testing::load_model_or_die(testing::kSmallGpt);
  const auto c = testing::load_cluster_or_die("dgx-a100:1");
  SearchOptions opts;
  opts.global_batch = 32;
  opts.executable = [](const plan::Plan& p) {
    return p.stages.size() < 2 ? std::string("one stage only") : std::string();
  };
  auto front = find_frontier(m, c, opts);
  ASSERT_TRUE(front) << front.error().message;
  ASSERT_FALSE(front->points.empty());
  for (const auto& e : front->points) EXPECT_GE(e.plan.stages.size(), 2u);

  opts.executable = [](const plan::Plan&) { return std::string("refused by the test"); };
  auto none = find_frontier(m, c, opts);
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("both fits the cluster and runs"), std::string::npos)
      << none.error().message;
  EXPECT_NE(none.error().message.find("refused by the test"), std::string::npos)
      << none.error().message;
}

// With threads to spare the time-optimal search runs beside the frontier's; the frontier is the
// same point for point, plans included.
TEST(FrontierPool, TheSameFrontierWithTheTimeOptimalSearchBesideIt) {
  const auto m = testing::load_model_or_die(testing::kSmallGpt);
  const auto c = testing::load_cluster_or_die(testing::data_file("three-kinds-6.yaml"));
  SearchOptions opts;
  opts.global_batch = 48;
  auto one = find_frontier(m, c, opts);
  ASSERT_TRUE(one) << one.error().message;
  opts.threads = 2;
  auto two = find_frontier(m, c, opts);
  ASSERT_TRUE(two) << two.error().message;
  ASSERT_GT(one->points.size(), 1u);
  ASSERT_EQ(one->points.size(), two->points.size());
  for (std::size_t i = 0; i < one->points.size(); ++i) {
    EXPECT_EQ(one->points[i].fingerprint, two->points[i].fingerprint) << i;
    EXPECT_EQ(one->points[i].iteration_time_s, two->points[i].iteration_time_s) << i;
    EXPECT_EQ(one->points[i].max_peak_bytes, two->points[i].max_peak_bytes) << i;
  }
  EXPECT_EQ(one->plans_simulated, two->plans_simulated);
}

}  // namespace
}  // namespace hetplan::search

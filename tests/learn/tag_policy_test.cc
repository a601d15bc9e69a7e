// TAG's trained network: training writes a file that loads, deterministically; bad files get one
// clear message; the shipped weights load and plan deterministically.
#include "hetplan/learn/tag_policy.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <tuple>

#include "hetplan/cluster/cluster_file.h"
#include "hetplan/learn/train_policy.h"
#include "hetplan/model/zoo.h"
#include "hetplan/plan/plan_json.h"
#include "hetplan/search/estimate.h"
#include "hetplan/search/evaluate.h"
#include "hetplan/search/search.h"
#include "hetplan/search/tag.h"
#include "hetplan/sim/simulate.h"

namespace hetplan::learn {
namespace {

std::string temp_file(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("hetplan_learn_" + name)).string();
}

TrainOptions tiny(const std::string& out) {
  TrainOptions o;
  o.out = out;
  o.iterations = 1;
  o.cases_per_iteration = 1;
  o.simulations = 64;
  o.decoder_samples = 2;
  o.epochs = 1;
  o.hidden = 8;
  o.seed = 3;
  return o;
}

// The prior at the root and at the first group of VGG-11 (3 groups) on two unlike nodes.
std::vector<std::vector<double>> priors(search::TagGuide& guide) {
  auto m = model::load_model("vgg:depth=11,image=64");
  auto c = cluster::load_cluster("heterog-mixed");
  EXPECT_TRUE(m && c);
  search::SearchOptions o;
  o.global_batch = 64;
  search::Evaluator ev(*m, *c, o);
  search::Estimator es(*m, *c, o);
  search::Deadline d(0);
  search::Context ctx{*m, *c, o, ev, es, d};
  auto grouping = search::tag_grouping(ctx, 3);
  EXPECT_TRUE(grouping);
  search::TagProblem p(ctx, *grouping, nullptr, &guide);
  const std::vector<int> first = {0};
  return {p.prior({}), p.prior(first)};
}

TEST(TrainPolicy, WritesAFileThatLoadsAndTrainsDeterministically) {
  const std::string a = temp_file("a.pt"), b = temp_file("b.pt");
  std::vector<std::string> lines;
  auto ra = train_policy(tiny(a), [&](const std::string& l) { lines.push_back(l); });
  ASSERT_TRUE(ra) << ra.error().message;
  EXPECT_EQ(ra->iterations, 1);
  EXPECT_GT(ra->samples, 0);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("round 1/1"), std::string::npos) << lines[0];
  auto rb = train_policy(tiny(b), {});
  ASSERT_TRUE(rb) << rb.error().message;
  auto ga = load_tag_policy(a), gb = load_tag_policy(b);
  ASSERT_TRUE(ga) << ga.error().message;
  ASSERT_TRUE(gb) << gb.error().message;
  const auto pa = priors(**ga), pb = priors(**gb);
  EXPECT_EQ(pa, pb);
  for (const auto& p : pa) {
    double sum = 0;
    for (double x : p) {
      EXPECT_GE(x, 0);
      sum += x;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
  // Training from that file goes on from its weights (they differ after another round).
  TrainOptions more = tiny(b);
  more.init = a;
  more.seed = 4;
  ASSERT_TRUE(train_policy(more, {}));
  auto gc = load_tag_policy(b);
  ASSERT_TRUE(gc);
  EXPECT_NE(priors(**gc), pa);
  std::filesystem::remove(a);
  std::filesystem::remove(b);
}

TEST(TrainPolicy, BadOptionsAreNamed) {
  TrainOptions o = tiny(temp_file("never.pt"));
  o.iterations = 0;
  auto r = train_policy(o, {});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("--iterations"), std::string::npos);
  o = tiny("/no/such/dir/p.pt");
  r = train_policy(o, {});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("/no/such/dir"), std::string::npos) << r.error().message;
  o = tiny(temp_file("never.pt"));
  o.init = temp_file("missing-init.pt");
  r = train_policy(o, {});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("--init"), std::string::npos) << r.error().message;
  EXPECT_FALSE(std::filesystem::exists(temp_file("never.pt")));
}

TEST(TagPolicy, BadFilesGetOneMessageNamingThem) {
  auto missing = load_tag_policy(temp_file("missing.pt"));
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("missing.pt: no such policy file"), std::string::npos);
  const std::string junk = temp_file("junk.pt");
  std::ofstream(junk) << "not a network";
  auto bad = load_tag_policy(junk);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("junk.pt: not a policy file"), std::string::npos)
      << bad.error().message;
  std::filesystem::remove(junk);
}

TEST(TrainingCases, AreDeterministicAndAvoidTheHeldOutPresets) {
  const auto a = training_cases(7, 40), b = training_cases(7, 40);
  ASSERT_EQ(a.size(), 40u);
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].cluster_yaml, b[i].cluster_yaml);
    // The held-out benchmark's models run at the presets' sizes: 224 and 299 pixels, BERT's 768
    // and 1024 hidden units; no training case has them.
    for (const char* held : {"image=224", "image=299", "hidden=768", "hidden=1024"})
      EXPECT_EQ(a[i].model.find(held), std::string::npos) << a[i].model;
    EXPECT_TRUE(model::load_model(a[i].model)) << a[i].model;
    EXPECT_TRUE(cluster::parse_cluster_yaml(a[i].cluster_yaml, "case")) << a[i].cluster_yaml;
  }
  EXPECT_NE(training_cases(8, 1)[0].name + training_cases(9, 1)[0].name,
            training_cases(8, 1)[0].name + training_cases(8, 1)[0].name);
}

// HeteroG and TAG with the shipped network (TAG at a fixed number of simulations): the same plan
// twice, and the written plan read back simulates to the time the search reported.
TEST(TagPolicy, ShippedWeightsPlanDeterministicallyAndThePlansResimulate) {
  auto guide = load_tag_policy(default_policy_file());
  ASSERT_TRUE(guide) << guide.error().message;
  auto m = model::load_model("resnet:depth=18,width=8,image=32");
  ASSERT_TRUE(m) << m.error().message;
  for (const auto& [algo, name, cluster_name] :
       {std::tuple{search::Algo::heterog, "heterog", "heterog-mixed"},
        std::tuple{search::Algo::tag, "tag", "tag-mixed"}}) {
    SCOPED_TRACE(name);
    auto c = cluster::load_cluster(cluster_name);
    ASSERT_TRUE(c) << c.error().message;
    search::SearchOptions o;
    o.global_batch = 64;
    o.tag_guide = *guide;
    o.tag_simulations = 48;
    auto a = search::find_plan(*m, *c, algo, o);
    auto b = search::find_plan(*m, *c, algo, o);
    ASSERT_TRUE(a) << a.error().message;
    ASSERT_TRUE(b) << b.error().message;
    if (algo == search::Algo::heterog) {
      EXPECT_EQ(a->planner, "heterog");
      EXPECT_EQ(a->best.plan.planner, "heterog");
    }
    EXPECT_EQ(a->best.fingerprint, b->best.fingerprint);
    EXPECT_EQ(a->best.iteration_time_s, b->best.iteration_time_s);
    auto back = plan::plan_from_json(nlohmann::json::parse(plan::to_json_text(a->best.plan)), "p");
    ASSERT_TRUE(back) << back.error().message;
    auto r = sim::simulate(*m, *c, *back, o.sim);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_DOUBLE_EQ(r->iteration_time.value, a->best.iteration_time_s);
  }
}

}  // namespace
}  // namespace hetplan::learn

#include <gtest/gtest.h>

#include <cmath>

#include "hetplan/plan/validate.h"
#include "hetplan/search/device_groups.h"
#include "hetplan/search/hap.h"
#include "hetplan/search/search.h"
#include "hetplan/sim/simulate.h"
#include "search_fixtures.h"

namespace hetplan::search {
namespace {

using testing::data_file;
using testing::load_cluster_or_die;
using testing::load_model_or_die;

// A planner's context for a model and a cluster (by default the small GPT on two-kinds-8), at a
// global batch of 64 and no time limit.
struct Fixture {
  model::Model m;
  cluster::Cluster c;
  SearchOptions opts;
  Deadline deadline{0};
  Evaluator evaluator{m, c, opts};
  Estimator estimator{m, c, opts};
  Context ctx{m, c, opts, evaluator, estimator, deadline};
  explicit Fixture(const std::string& model = testing::kSmallGpt,
                   const std::string& cluster = data_file("two-kinds-8.yaml"))
      : m(load_model_or_die(model)), c(load_cluster_or_die(cluster)) {
    opts.global_batch = 64;
  }
};

TEST(Baselines, EvenDataParallelGivesEveryDeviceTheSameShare) {
  Fixture f;
  auto out = even_dp(f.ctx);
  ASSERT_TRUE(out.best.ok) << out.best.error;
  const auto& p = out.best.plan;
  ASSERT_EQ(p.stages.size(), 1u);
  ASSERT_EQ(p.stages[0].replicas.size(), 8u);
  for (const auto& r : p.stages[0].replicas) {
    EXPECT_EQ(r.devices.size(), 1u);
    EXPECT_DOUBLE_EQ(r.batch_share, 1.0 / 8);
  }
}

TEST(Baselines, ProportionalDataParallelFollowsPeakFlops) {
  Fixture f;
  auto out = proportional_dp(f.ctx);
  ASSERT_TRUE(out.best.ok) << out.best.error;
  const auto& reps = out.best.plan.stages[0].replicas;
  ASSERT_EQ(reps.size(), 8u);
  // A100 312 TFLOP/s, V100 125 TFLOP/s (16-bit dense): 64 * 312 / (4 * 312 + 4 * 125) = 11.4
  // samples per A100 and 4.6 per V100, so 11 or 12 and 4 or 5.
  for (int d = 0; d < 8; ++d) {
    const double samples = reps[d].batch_share * 64;
    if (d < 4)
      EXPECT_GE(samples, 11) << d;
    else
      EXPECT_LE(samples, 5) << d;
  }
}

TEST(Baselines, ProportionalSplitIsExactAndKeepsEveryone) {
  EXPECT_EQ(proportional_split({1, 1, 2}, 8), (std::vector<std::int64_t>{2, 2, 4}));
  EXPECT_EQ(proportional_split({1, 1, 1}, 4), (std::vector<std::int64_t>{2, 1, 1}));
  EXPECT_EQ(proportional_split({100, 1}, 3), (std::vector<std::int64_t>{2, 1}));
}

TEST(Baselines, MegatronGridIsAUniformLayout) {
  Fixture f;
  auto out = megatron_grid(f.ctx);
  ASSERT_TRUE(out.best.ok) << out.best.error;
  const auto& p = out.best.plan;
  EXPECT_EQ(p.planner, "megatron");
  int devices = 0;
  for (const auto& st : p.stages) {
    for (const auto& r : st.replicas) {
      devices += static_cast<int>(r.devices.size());
      EXPECT_DOUBLE_EQ(r.batch_share, 1.0 / static_cast<double>(st.replicas.size()));
      EXPECT_TRUE(r.tp_shares.empty());
    }
  }
  EXPECT_EQ(devices, 8);
}

TEST(Baselines, PlannersThatFindNothingSayWhy) {
  // Megatron-LM's grid on 7 CPU workers of a 4-block model: tp must divide the node's 7 devices
  // (1), pp at most 4 and dividing 7 (1), so dp = 7, which 64 samples do not divide.
  {
    Fixture f(testing::kSmallGpt, "cpu:7");
    const auto out = megatron_grid(f.ctx);
    EXPECT_FALSE(out.best.ok);
    EXPECT_NE(out.best.error.find("no Megatron-LM layout of the 7 devices"), std::string::npos)
        << out.best.error;
    EXPECT_NE(out.best.error.find("dividing the global batch 64"), std::string::npos)
        << out.best.error;
  }
  // GPT-3 175B on 16 GPUs of at most 32 GiB: neither a pipeline nor an SPMD program fits; each
  // planner says so rather than "no candidate plan".
  {
    Fixture f("gpt3-175b", "heterog-mixed");
    const auto piped = pipeline(f.ctx);
    EXPECT_FALSE(piped.best.ok);
    EXPECT_NE(piped.best.error.find("no pipeline shape's layers fit in its devices' memory"),
              std::string::npos)
        << piped.best.error;
    const auto spmd = hap(f.ctx);
    EXPECT_FALSE(spmd.best.ok);
    EXPECT_NE(spmd.best.error.find("no SPMD program fits in the devices' memory"),
              std::string::npos)
        << spmd.best.error;
  }
}

// Megatron-LM's grid names its rule of at least pp micro-batches: a 2-block GPT of one head on 8
// GPUs, batch 4, leaves tp = 1 (the head), so dp = 8 (which 4 samples do not divide) or pp = 2
// with dp = 4, one micro-batch of 4 samples: fewer than its 2 stages.
TEST(Baselines, MegatronSaysAPipelineNeedsAsManyMicroBatchesAsStages) {
  Fixture f("gpt:layers=2,hidden=64,heads=1,seq=128,vocab=1000", "dgx-h100:1");
  f.opts.global_batch = 4;
  const auto out = megatron_grid(f.ctx);
  ASSERT_FALSE(out.best.ok);
  EXPECT_NE(out.best.error.find("at least pp micro-batches (4/(dp*mbs) >= pp)"), std::string::npos)
      << out.best.error;
}

// The pipeline planner cuts stages only into tensor-parallel degrees that split the heads evenly:
// a 3-head GPT on 16 A100s gets single-device replicas (it chose tp = 2 where the batch was
// smaller than the devices, which validation refused); where no shape of those divides the batch,
// it says which degrees the heads allow.
TEST(Pipeline, TensorParallelDegreesSplitTheHeadsEvenly) {
  const std::string three_heads = "gpt:layers=2,hidden=48,heads=3,seq=128,vocab=1000";
  {
    Fixture f(three_heads, "dgx-a100:2");
    f.opts.global_batch = 32;
    const auto out = pipeline(f.ctx);
    ASSERT_TRUE(out.best.ok) << out.best.error;
    for (const auto& st : out.best.plan.stages)
      for (const auto& r : st.replicas) EXPECT_EQ(r.devices.size(), 1u);
  }
  {
    Fixture f(three_heads, "dgx-a100:2");
    f.opts.global_batch = 8;
    const auto out = pipeline(f.ctx);
    ASSERT_FALSE(out.best.ok);
    EXPECT_NE(out.best.error.find("tensor-parallel degrees 1 only (powers of two up to 8 dividing "
                                  "the model's 3 attention heads, 3 key/value heads)"),
              std::string::npos)
        << out.best.error;
  }
}

// Where no count of micro-batches gives a stage's alike replicas the same whole samples, they
// share each micro-batch as evenly as whole samples allow: a 2-layer GPT on five CPU workers at
// batch 12 (no shape of more stages than layers; the pipeline planner gave no plan), each
// micro-batch's samples split 2:1:1:1:1 (2 micro-batches) or 3:3:2:2:2 (one).
TEST(Pipeline, AlikeReplicasShareABatchUnevenlyWhereNoEvenSplitExists) {
  Fixture f("gpt:layers=2,hidden=64,heads=4,seq=64,vocab=1000", "cpu:5");
  f.opts.global_batch = 12;
  const auto out = pipeline(f.ctx);
  ASSERT_TRUE(out.best.ok) << out.best.error;
  const auto& p = out.best.plan;
  const auto valid = plan::validate_plan(p, f.m, f.c, "plan");
  ASSERT_TRUE(valid) << valid.error().message;
  ASSERT_EQ(p.stages.size(), 1u);
  ASSERT_EQ(p.stages[0].replicas.size(), 5u);
  const double per_microbatch = 12.0 / p.num_microbatches;
  std::vector<double> samples;
  for (const auto& r : p.stages[0].replicas) samples.push_back(r.batch_share * per_microbatch);
  double sum = 0;
  for (double n : samples) {
    EXPECT_NEAR(n, std::round(n), 1e-9);
    EXPECT_GE(n, std::floor(per_microbatch / 5) - 1e-9);
    EXPECT_LE(n, std::ceil(per_microbatch / 5) + 1e-9);
    EXPECT_LE(n, samples.front() + 1e-9);  // the first replicas take the extra samples
    sum += n;
  }
  EXPECT_NEAR(sum, per_microbatch, 1e-9);
  EXPECT_GT(samples.front(), samples.back() + 0.5);
}

TEST(Search, AutoIsNeverWorseThanTheBestBaseline) {
  for (const char* cluster : {"heterog-mixed", "hap-mixed", "a100-v100"}) {
    const auto m = load_model_or_die("gpt3-350m");
    const auto c = load_cluster_or_die(cluster);
    SearchOptions opts;
    opts.global_batch = 256;
    auto res = find_plan(m, c, Algo::automatic, opts);
    ASSERT_TRUE(res) << res.error().message;
    ASSERT_TRUE(res->best.fits) << cluster;
    for (const auto& b : res->baselines) {
      if (b.best.ok && b.best.fits) {
        EXPECT_LE(res->best.iteration_time_s, b.best.iteration_time_s) << cluster << " " << b.name;
      }
    }
  }
}

TEST(Search, SameInputsGiveTheSamePlan) {
  const auto m = load_model_or_die("gpt3-350m");
  const auto c = load_cluster_or_die("heterog-mixed");
  SearchOptions opts;
  opts.global_batch = 128;
  auto a = find_plan(m, c, Algo::automatic, opts);
  ASSERT_TRUE(a) << a.error().message;
  // With more threads the baselines and the stage-level planners run side by side, each thread
  // with an estimator of its own: every one of them finds the same.
  for (int threads : {2, 3, 8}) {
    opts.threads = threads;
    auto b = find_plan(m, c, Algo::automatic, opts);
    ASSERT_TRUE(b) << b.error().message;
    EXPECT_EQ(a->best.fingerprint, b->best.fingerprint);
    EXPECT_EQ(a->best.iteration_time_s, b->best.iteration_time_s);
    EXPECT_EQ(a->planner, b->planner);
    EXPECT_EQ(a->plans_simulated, b->plans_simulated);
    ASSERT_EQ(a->planners.size(), b->planners.size());
    ASSERT_EQ(a->baselines.size(), b->baselines.size());
    for (std::size_t i = 0; i < a->planners.size() + a->baselines.size(); ++i) {
      const bool base = i >= a->planners.size();
      const auto& x = base ? a->baselines[i - a->planners.size()] : a->planners[i];
      const auto& y = base ? b->baselines[i - a->planners.size()] : b->planners[i];
      EXPECT_EQ(x.name, y.name);
      EXPECT_EQ(x.estimated, y.estimated) << x.name;
      EXPECT_EQ(x.best.fingerprint, y.best.fingerprint) << x.name;
      EXPECT_EQ(x.best.iteration_time_s, y.best.iteration_time_s) << x.name;
      ASSERT_EQ(x.simulated.size(), y.simulated.size()) << x.name;
      for (std::size_t k = 0; k < x.simulated.size(); ++k)
        EXPECT_EQ(x.simulated[k].fingerprint, y.simulated[k].fingerprint) << x.name;
    }
  }
}

TEST(Search, ZeroStagesTwoAndThreeRescueAModelThatFitsNoOtherWay) {
  // GPT-3 2.7B on four single-GPU V100-16GB machines: data parallelism with ZeRO-1 needs 4 bytes
  // per parameter whole plus 12 sharded (18.9 GB), over the 16 GB; sharding gradients and then
  // parameters too brings it under. Pipelines are not asked for here.
  const auto m = load_model_or_die("gpt3-2.7b");
  const auto c = load_cluster_or_die(data_file("v100-single-4.yaml"));
  SearchOptions opts;
  opts.global_batch = 32;
  auto res = find_plan(m, c, Algo::uneven_dp, opts);
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_TRUE(res->best.fits);
  EXPECT_GE(res->best.plan.zero_stage, 2);
  // Where stages 0 and 1 fit, they are all the planner tries: the same model on two-kinds-8's
  // larger A100s. find_plan's last step may still take a higher stage, where that costs no time
  // and saves memory: then the plan with stage 0 or 1 needs more memory and, if it fits, is no
  // faster.
  const auto roomy_cluster = load_cluster_or_die(data_file("two-kinds-8.yaml"));
  auto roomy = find_plan(m, roomy_cluster, Algo::uneven_dp, opts);
  ASSERT_TRUE(roomy) << roomy.error().message;
  EXPECT_TRUE(roomy->best.fits);
  if (roomy->best.plan.zero_stage > 1) {
    for (int z : {0, 1}) {
      plan::Plan lower = roomy->best.plan;
      lower.zero_stage = z;
      auto r = sim::simulate(m, roomy_cluster, lower, {});
      ASSERT_TRUE(r) << r.error().message;
      if (r->fits) {
        EXPECT_GE(r->iteration_time.value, roomy->best.iteration_time_s) << "zero " << z;
      }
      EXPECT_GT(r->max_peak_memory.value, roomy->best.max_peak_bytes) << "zero " << z;
    }
  }
}

// Uneven data parallelism tries only tensor-parallel degrees that split the heads evenly: ViT-B/16
// (12 heads) on tag-mixed (8-GPU nodes) gets a valid plan, with no degree of 8 (it wrote one,
// which validation refused).
TEST(Search, UnevenDataParallelismSplitsHeadsEvenly) {
  const auto m = load_model_or_die("vit-b16");
  const auto c = load_cluster_or_die("tag-mixed");
  SearchOptions opts;
  opts.global_batch = 64;
  opts.time_limit_s = 5;
  auto res = find_plan(m, c, Algo::uneven_dp, opts);
  ASSERT_TRUE(res) << res.error().message;
  for (const auto& st : res->best.plan.stages)
    for (const auto& r : st.replicas) EXPECT_EQ(12 % r.devices.size(), 0u);
}

TEST(Search, AModelThatFitsNowhereSaysByHowMuch) {
  const auto m = load_model_or_die("gpt3-175b");
  const auto c = load_cluster_or_die("heterog-mixed");
  SearchOptions opts;
  opts.global_batch = 64;
  auto res = find_plan(m, c, Algo::automatic, opts);
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_FALSE(res->best.fits);
  EXPECT_GT(res->best.shortfall_bytes, 0);
  const std::string msg = shortfall_message(c, res->best);
  EXPECT_NE(msg.find("does not fit: the plan closest to fitting"), std::string::npos) << msg;
  EXPECT_NE(msg.find("GiB more on device"), std::string::npos) << msg;
}

TEST(Search, UnknownAlgorithmsAndTheFrontierOneAreRefused) {
  EXPECT_FALSE(algo_from_string("magic"));
  EXPECT_EQ(algo_from_string("uneven-dp"), Algo::uneven_dp);
  const auto m = load_model_or_die(testing::kSmallGpt);
  const auto c = load_cluster_or_die(data_file("two-kinds-8.yaml"));
  auto res = find_plan(m, c, Algo::ft, SearchOptions{});
  ASSERT_FALSE(res);
  EXPECT_NE(res.error().message.find("hetplan pareto"), std::string::npos);
}

TEST(Search, TimeLimitReturnsTheBestSoFarMarkedAsSuch) {
  const auto m = load_model_or_die("gpt3-1.3b");
  const auto c = load_cluster_or_die("hap-mixed");
  SearchOptions opts;
  opts.time_limit_s = 1e-6;
  auto res = find_plan(m, c, Algo::automatic, opts);
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_TRUE(res->timed_out);
  EXPECT_TRUE(res->best.ok);
}

// Under a time limit the algorithm's answer runs before the baselines, and a baseline kept only
// for comparison is left out when the time left would not hold a simulation: with a limit that
// has passed at once, the pipeline planner still simulates its best candidate, and no baseline
// runs after it.
TEST(Search, UnderATimeLimitTheAnswerRunsFirstAndBaselinesThatCannotRunAreLeftOut) {
  const auto m = load_model_or_die("gpt3-1.3b");
  const auto c = load_cluster_or_die("hap-mixed");
  SearchOptions opts;
  opts.time_limit_s = 1e-6;
  auto res = find_plan(m, c, Algo::pipeline, opts);
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_TRUE(res->timed_out);
  EXPECT_EQ(res->planner, "pipeline");
  ASSERT_EQ(res->baselines.size(), 3u);
  for (const auto& b : res->baselines) {
    EXPECT_FALSE(b.best.ok) << b.name;
    EXPECT_EQ(b.best.error, "not run: too little of the time limit was left") << b.name;
    EXPECT_TRUE(b.timed_out) << b.name;
  }
  EXPECT_EQ(res->baselines[0].name, "even-dp");
  EXPECT_EQ(res->baselines[2].name, "megatron");
  // `--algo megatron`: the Megatron-LM grid is the answer, so it runs, first.
  auto grid = find_plan(m, c, Algo::megatron, opts);
  ASSERT_TRUE(grid) << grid.error().message;
  EXPECT_EQ(grid->planner, "megatron");
  EXPECT_TRUE(grid->baselines[2].best.ok);
}

// SearchOptions::precision is written into every plan every planner offers (the baselines', the
// stage planners', TAG's op-level plans, the frontier's), and a model built in another dtype is
// refused: the plans would say one precision and be costed in another.
TEST(Search, EveryPlanCarriesThePrecisionItWasCostedIn) {
  auto m = model::load_model("gpt3-125m", "--model", model::DType::fp32);
  ASSERT_TRUE(m) << m.error().message;
  const auto c = load_cluster_or_die("heterog-mixed");
  SearchOptions opts;
  opts.global_batch = 64;
  opts.precision = model::DType::fp32;
  opts.tag_simulations = 8;
  auto expect_fp32 = [](const Evaluation& e, const std::string& what) {
    if (e.ok) {
      EXPECT_EQ(e.plan.precision, model::DType::fp32) << what;
    }
  };
  for (Algo algo : {Algo::automatic, Algo::uneven_dp, Algo::hap, Algo::pipeline, Algo::tag}) {
    auto res = find_plan(*m, c, algo, opts);
    ASSERT_TRUE(res) << to_string(algo) << ": " << res.error().message;
    ASSERT_TRUE(res->best.ok) << to_string(algo);
    expect_fp32(res->best, to_string(algo));
    for (const auto* outputs : {&res->planners, &res->baselines})
      for (const PlannerOutput& o : *outputs) {
        expect_fp32(o.best, o.name);
        for (const Evaluation& e : o.simulated) expect_fp32(e, o.name);
      }
  }
  auto frontier = find_frontier(*m, c, opts, 0.05);
  ASSERT_TRUE(frontier) << frontier.error().message;
  ASSERT_FALSE(frontier->points.empty());
  for (const Evaluation& e : frontier->points) expect_fp32(e, "frontier");
  // A bf16 model planned for fp32: refused by both.
  const auto bf16 = load_model_or_die("gpt3-125m");
  const std::string refused =
      "--precision fp32: the model gpt3-125m is built in bf16; load it in fp32 to plan for it";
  auto plan = find_plan(bf16, c, Algo::automatic, opts);
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.error().message, refused);
  auto points = find_frontier(bf16, c, opts, 0.05);
  ASSERT_FALSE(points);
  EXPECT_EQ(points.error().message, refused);
}

}  // namespace
}  // namespace hetplan::search

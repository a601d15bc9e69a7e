// TAG's op-level search: the tree search against brute force on a small case, determinism, the
// written plan re-simulated, and HEFT against FIFO over zoo models.
#include "hetplan/search/tag.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>

#include "hetplan/cluster/cluster_file.h"
#include "hetplan/plan/op_groups.h"
#include "hetplan/plan/plan_json.h"
#include "hetplan/search/heterog.h"
#include "hetplan/search/search.h"
#include "tag_fixtures.h"

namespace hetplan::search {
namespace {

using testing::Fixture;
using testing::load_cluster_or_die;
using testing::load_model_or_die;
using testing::slow_pair;

// The memory savings an op-level plan that does not fit takes, in TagProblem's order (the first
// that fits is the plan's).
constexpr std::pair<cost::Recompute, int> kSavings[] = {
    {cost::Recompute::none, 0},      {cost::Recompute::selective, 0}, {cost::Recompute::none, 1},
    {cost::Recompute::selective, 1}, {cost::Recompute::full, 0},      {cost::Recompute::full, 1}};

// p as the search evaluates it: as decided, else with the first of the savings that fits.
Evaluation with_savings(const Evaluator& evaluator, const plan::Plan& p) {
  const Evaluation as_decided = evaluator.evaluate(p);
  if (!as_decided.ok || as_decided.fits) return as_decided;
  for (auto [recompute, zero] : kSavings) {
    plan::Plan q = p;
    q.recompute = recompute;
    q.zero_stage = zero;
    const Evaluation e = evaluator.evaluate(q);
    if (e.ok && e.fits) return e;
  }
  return as_decided;
}

// The plan of `choice` as the search evaluates it: as decided where it fits; else the faster of
// the same decisions at the fewest larger micro-batch count that fits (a power of two times the
// decided one, dividing the batch, at most 32, while every group keeps its devices) and the first
// of the savings that fits at the decided count; else the first saving that fits at the most
// micro-batches tried; else as decided (the search keeps the closest to fitting; no fit either
// way).
Evaluation as_evaluated(const Evaluator& evaluator, const TagProblem& problem,
                        const std::vector<int>& choice) {
  const plan::Plan p = problem.plan_of(choice);
  const Evaluation as_decided = evaluator.evaluate(p);
  if (!as_decided.ok || as_decided.fits) return as_decided;
  std::optional<Evaluation> more;
  std::optional<plan::Plan> most;
  const int B = p.global_batch;
  for (int M = 2 * p.num_microbatches; M <= 32 && !more; M *= 2) {
    if (B % M != 0) continue;
    const plan::Plan q = problem.plan_of(choice, M);
    bool same = true;
    for (std::size_t g = 0; g < p.op_groups.size(); ++g)
      same = same && q.op_groups[g].devices == p.op_groups[g].devices;
    if (!same) break;
    most = q;
    const Evaluation e = evaluator.evaluate(q);
    if (e.ok && e.fits) more = e;
  }
  const Evaluation saved = with_savings(evaluator, p);
  if (more && (!saved.fits || more->iteration_time_s <= saved.iteration_time_s)) return *more;
  if (saved.fits || !most) return saved;
  const Evaluation both = with_savings(evaluator, *most);
  return both.fits ? both : saved;
}

// Every group decided alike, on the first action `which` accepts, at the fewest micro-batches
// offered; empty where no action is accepted.
std::vector<int> every_group_on(const TagProblem& problem,
                                const std::function<bool(const TagProblem::Action&)>& which) {
  const auto& actions = problem.actions();
  const auto at = std::find_if(actions.begin(), actions.end(), which);
  if (at == actions.end()) return {};
  std::vector<int> choice(static_cast<std::size_t>(problem.depth()),
                          static_cast<int>(at - actions.begin()));
  choice[0] = 0;
  return choice;
}

TEST(TagSearch, TreeSearchFindsTheBruteForceOptimum) {
  // VGG-16 in three groups: every micro-batch count and combination of the actions simulated.
  Fixture f("vgg16", slow_pair(), 32);
  const cost::ComputeCostModel compute(f.opts.sim.compute);
  auto grouping = group_ops(f.m, op_compute_weights(f.m, f.c.device_types[0], compute), 3, 1);
  ASSERT_TRUE(grouping) << grouping.error().message;
  TagProblem problem(f.ctx, *grouping);
  const int n = problem.depth();
  ASSERT_EQ(n, 4);  // the micro-batch count, then the three groups
  const int A = static_cast<int>(problem.actions().size());
  const int Ms = static_cast<int>(problem.microbatch_counts().size());
  double brute = 1e300;
  std::vector<int> choice(n, 0);
  std::function<void(int)> all = [&](int i) {
    if (i == n) {
      const Evaluation e = as_evaluated(f.evaluator, problem, choice);
      if (e.ok && e.fits) brute = std::min(brute, e.iteration_time_s);
      return;
    }
    for (int a = 0; a < (i == 0 ? Ms : A); ++a) {
      choice[i] = a;
      all(i + 1);
    }
  };
  all(0);
  ASSERT_LT(brute, 1e300);
  TagOptions to;
  to.simulations = Ms * A * A * A;
  const MctsResult r = mcts(problem, mcts_options(to, 1));
  EXPECT_NEAR(problem.best().iteration_time_s, brute, 1e-12)
      << r.simulations << " simulations, " << problem.evaluations() << " evaluations, value "
      << r.value << ", baseline " << problem.baseline().iteration_time_s << ", best fits "
      << problem.best().fits;
  EXPECT_TRUE(r.complete_found);
  // The data-parallel start is beaten on this slow network.
  EXPECT_LT(brute, problem.baseline().iteration_time_s);
}

// With tensor splits on, a stage plan of one tensor-parallel replica, as the hint, points every
// group at the tensor split over its devices; the hinted plan splits each group at
// speed-proportional shares and simulates as that stage plan does.
TEST(TagSearch, ATensorParallelHintIsFollowedBySplitGroups) {
  Fixture f("gpt:layers=2,hidden=256,heads=4,seq=128,vocab=1000", slow_pair(), 8);
  const cost::ComputeCostModel compute(f.opts.sim.compute);
  auto grouping = group_ops(f.m, op_compute_weights(f.m, f.c.device_types[0], compute), 4, 1);
  ASSERT_TRUE(grouping) << grouping.error().message;
  plan::Plan hint;
  hint.global_batch = 8;
  plan::Stage st;
  st.num_layers = static_cast<int>(f.m.layers.size());
  plan::Replica r;
  r.devices = {0, 1};
  r.batch_share = 1;
  st.replicas = {r};
  hint.stages = {st};
  TagProblem problem(f.ctx, *grouping, &hint, nullptr, true);
  // Without tensor splits (the default) the same hint is followed by all-reduce over the devices.
  TagProblem plain(f.ctx, *grouping, &hint);
  for (int a : plain.hint_decisions())
    EXPECT_FALSE(plain.actions()[static_cast<std::size_t>(a)].split);
  for (const auto& a : plain.actions()) EXPECT_FALSE(a.split);
  const std::vector<int> seq = problem.hint_decisions();
  ASSERT_EQ(seq.size(), 5u);
  for (std::size_t i = 1; i < seq.size(); ++i) {
    const auto& a = problem.actions()[static_cast<std::size_t>(seq[i])];
    EXPECT_TRUE(a.split);
    EXPECT_EQ(a.devices, (std::vector<int>{0, 1}));
  }
  const plan::Plan p = problem.plan_of(seq);
  for (const auto& g : p.op_groups) {
    EXPECT_EQ(g.mode, plan::GroupMode::split);
    ASSERT_EQ(g.shares.size(), 2u);  // slow_pair's devices differ in speed
    EXPECT_GT(g.shares[0], g.shares[1]);
  }
  auto tensor = sim::simulate(f.m, f.c, p, f.opts.sim);
  ASSERT_TRUE(tensor) << tensor.error().message;
  auto as_stages = plan::as_stage_plan(p, f.m);
  ASSERT_TRUE(as_stages) << plan::why_not_stage_plan(p, f.m);
  ASSERT_EQ(as_stages->stages.size(), 1u);
  EXPECT_EQ(as_stages->stages[0].replicas[0].tp_shares, p.op_groups[0].shares);
}

// GPT-3 350M on a V100 and two 1080 Tis at a sample each: no placement of whole activations fits
// (the data-parallel plan needs 27 GiB on the V100). A decided plan that does not fit is evaluated
// with the first of recomputation and ZeRO-1 that fits (3 samples: no more micro-batches), and HeteroG answers with a plan that fits
// where it found none before.
TEST(TagSearch, PlansThatDoNotFitTakeTheFirstMemorySavingThatFits) {
  Fixture f("gpt3-350m", slow_pair(), 3);
  auto grouping = tag_grouping(f.ctx, 0);
  ASSERT_TRUE(grouping) << grouping.error().message;
  TagProblem problem(f.ctx, *grouping);
  const std::vector<int> data_parallel(static_cast<std::size_t>(problem.depth()), 0);
  const plan::Plan decided = problem.plan_of(data_parallel);
  const Evaluation whole = f.evaluator.evaluate(decided);
  ASSERT_TRUE(whole.ok) << whole.error;
  EXPECT_FALSE(whole.fits);
  problem.evaluate(data_parallel);
  const Evaluation& e = problem.last();
  ASSERT_TRUE(e.ok) << e.error;
  EXPECT_TRUE(e.fits);
  // The first saving that fits, and none before it does.
  const Evaluation first = with_savings(f.evaluator, decided);
  ASSERT_TRUE(first.ok) << first.error;
  EXPECT_TRUE(first.fits);
  EXPECT_EQ(e.plan.recompute, first.plan.recompute);
  EXPECT_EQ(e.plan.zero_stage, first.plan.zero_stage);
  EXPECT_EQ(e.fingerprint, first.fingerprint);
  // The baseline, at its most micro-batches, is one such plan.
  EXPECT_TRUE(problem.baseline().fits);

  // HeteroG, decoding evenly over the allowed actions.
  class Uniform : public TagGuide {
   public:
    std::string describe() const override { return "uniform"; }
    std::vector<double> prior(const TagGraph&, const TagState& s) override { return even(s); }
    std::vector<double> decode(const TagGraph&, const TagState& s) override { return even(s); }
    static std::vector<double> even(const TagState& s) { return {s.mask.begin(), s.mask.end()}; }
  } uniform;
  HeterogOptions o;
  o.samples = 4;
  const PlannerOutput h = heterog(f.ctx, uniform, o);
  ASSERT_TRUE(h.best.ok) << h.best.error;
  EXPECT_TRUE(h.best.fits);
  EXPECT_TRUE(h.best.plan.recompute != cost::Recompute::none || h.best.plan.zero_stage == 1);
}

// A GPT of 24 layers (width 1024, sequence 1024) on the V100 alone, at 16 samples an iteration:
// the fewest micro-batch count offered (4) does not fit; the same placement at 8 fits and is
// faster than the first saving that fits at 4 (selective recomputation), so it is the evaluation.
TEST(TagSearch, PlansThatDoNotFitTakeMoreMicrobatchesWhereThatIsFaster) {
  Fixture f("gpt:layers=24,hidden=1024,heads=16,seq=1024,vocab=50257", slow_pair(), 16);
  auto grouping = tag_grouping(f.ctx, 0);
  ASSERT_TRUE(grouping) << grouping.error().message;
  TagProblem problem(f.ctx, *grouping);
  const std::vector<int> choice = every_group_on(
      problem, [](const TagProblem::Action& a) { return a.devices == std::vector<int>{0}; });
  ASSERT_FALSE(choice.empty());
  const plan::Plan decided = problem.plan_of(choice);
  ASSERT_EQ(decided.num_microbatches, 4);
  const Evaluation whole = f.evaluator.evaluate(decided);
  ASSERT_TRUE(whole.ok) << whole.error;
  EXPECT_FALSE(whole.fits);
  problem.evaluate(choice);
  const Evaluation& e = problem.last();
  ASSERT_TRUE(e.ok) << e.error;
  EXPECT_TRUE(e.fits);
  EXPECT_EQ(e.plan.num_microbatches, 8);
  EXPECT_EQ(e.plan.recompute, cost::Recompute::none);
  EXPECT_EQ(e.plan.zero_stage, 0);
  EXPECT_EQ(e.fingerprint, as_evaluated(f.evaluator, problem, choice).fingerprint);
  // The saving at 4 micro-batches fits too, and is slower.
  const Evaluation saved = with_savings(f.evaluator, decided);
  ASSERT_TRUE(saved.ok) << saved.error;
  EXPECT_TRUE(saved.fits);
  EXPECT_EQ(saved.plan.recompute, cost::Recompute::selective);
  EXPECT_GT(saved.iteration_time_s, e.iteration_time_s);
}

// A 3-layer GPT on two fast CPU devices of 735 MiB (and a slow one), at 8 samples: replicated on
// the fast pair (all-reduce) it fits neither at more micro-batches alone (4; at 8 a device would
// be left without a sample) nor with a saving at the decided count (2), but with the first saving
// that fits at the most micro-batches tried: selective recomputation and ZeRO-1 at 4.
TEST(TagSearch, PlansThatFitOnlyWithMoreMicrobatchesAndASavingTakeBoth) {
  auto c = cluster::parse_cluster_yaml(R"(version: 1
device_types:
  - {name: small-cpu, peak_fp32: 50GFLOPS, memory: 735MiB, memory_bandwidth: 10GB/s,
     architecture: CPU}
  - {name: big-cpu, peak_fp32: 100GFLOPS, memory: 735MiB, memory_bandwidth: 20GB/s,
     architecture: CPU}
nodes:
  - {group: a, count: 1, device: big-cpu, devices_per_node: 2, intra_node: {bandwidth: 5GB/s},
     nic: {bandwidth: 1Gbps}}
  - {group: b, count: 1, device: small-cpu, devices_per_node: 1, intra_node: {bandwidth: 5GB/s},
     nic: {bandwidth: 1Gbps}}
network: {kind: switch}
)",
                                       "tight-three.yaml");
  ASSERT_TRUE(c) << c.error().message;
  Fixture f("gpt:layers=3,hidden=128,heads=4,seq=128,vocab=512,dtype=fp32", std::move(*c), 8);
  auto grouping = tag_grouping(f.ctx, 0);
  ASSERT_TRUE(grouping) << grouping.error().message;
  TagProblem problem(f.ctx, *grouping);
  const std::vector<int> choice = every_group_on(problem, [](const TagProblem::Action& a) {
    return a.devices == std::vector<int>{0, 1} && a.sync == plan::SyncMethod::all_reduce &&
           !a.split;
  });
  ASSERT_FALSE(choice.empty());
  const plan::Plan decided = problem.plan_of(choice);
  ASSERT_EQ(decided.num_microbatches, 2);
  EXPECT_FALSE(f.evaluator.evaluate(decided).fits);
  EXPECT_FALSE(with_savings(f.evaluator, decided).fits);  // no saving fits at 2
  const plan::Plan four = problem.plan_of(choice, 4);
  EXPECT_FALSE(f.evaluator.evaluate(four).fits);  // nor 4 micro-batches alone
  EXPECT_NE(problem.plan_of(choice, 8).op_groups[0].devices, decided.op_groups[0].devices);
  problem.evaluate(choice);
  const Evaluation& e = problem.last();
  ASSERT_TRUE(e.ok) << e.error;
  EXPECT_TRUE(e.fits);
  EXPECT_EQ(e.plan.num_microbatches, 4);
  EXPECT_EQ(e.plan.recompute, cost::Recompute::selective);
  EXPECT_EQ(e.plan.zero_stage, 1);
  EXPECT_EQ(e.fingerprint, as_evaluated(f.evaluator, problem, choice).fingerprint);
}

TEST(TagSearch, DeterministicAndItsPlanResimulatesToTheSameTime) {
  Fixture f("resnet:depth=18,width=8,image=32", slow_pair(), 64);
  TagOptions to;
  to.simulations = 60;
  to.budget_s = 0;
  const PlannerOutput a = tag(f.ctx, to);
  ASSERT_TRUE(a.best.ok) << a.best.error;
  Fixture g("resnet:depth=18,width=8,image=32", slow_pair(), 64);
  const PlannerOutput b = tag(g.ctx, to);
  EXPECT_EQ(a.best.fingerprint, b.best.fingerprint);
  // Written and read back, the plan simulates to the same time.
  auto back = plan::plan_from_json(nlohmann::json::parse(plan::to_json_text(a.best.plan)), "p");
  ASSERT_TRUE(back) << back.error().message;
  auto r = sim::simulate(f.m, f.c, *back, f.opts.sim);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_DOUBLE_EQ(r->iteration_time.value, a.best.iteration_time_s);
}

TEST(TagSearch, AlgoTagNeverLosesToTheStageLevelPlanners) {
  const auto m = load_model_or_die("resnet:depth=18,width=8,image=32");
  const auto c = slow_pair();
  SearchOptions opts;
  opts.global_batch = 64;
  auto tag_res = find_plan(m, c, Algo::tag, opts);
  ASSERT_TRUE(tag_res) << tag_res.error().message;
  for (Algo other : {Algo::uneven_dp, Algo::pipeline}) {
    auto o = find_plan(m, c, other, opts);
    ASSERT_TRUE(o) << o.error().message;
    EXPECT_LE(tag_res->best.iteration_time_s, o->best.iteration_time_s * (1 + 1e-12));
  }
}

// HEFT's order is no worse than FIFO's on op-level plans of zoo models: METIS groups, every
// third group (in op order) placed on one device in turn, the others replicated over every device
// at speed-proportional shares.
TEST(TagSearch, HeftIsNoWorseThanFifoOverZooModels) {
  const auto c = load_cluster_or_die("heterog-mixed");
  for (const char* name : {"resnet50", "inception-v3", "vgg16", "bert-base", "vit-b16"}) {
    Fixture f(name, c, 64);
    const cost::ComputeCostModel compute(f.opts.sim.compute);
    auto grouping = group_ops(f.m, op_compute_weights(f.m, c.device_types[0], compute),
                              default_group_count(f.m), 1);
    ASSERT_TRUE(grouping) << grouping.error().message;
    TagProblem problem(f.ctx, *grouping);
    // Actions: 0 replicates over every device; the last ones place on single devices.
    std::vector<int> singles;
    for (int a = 0; a < static_cast<int>(problem.actions().size()); ++a)
      if (problem.actions()[a].devices.size() == 1) singles.push_back(a);
    ASSERT_FALSE(singles.empty());
    std::vector<int> choice(problem.depth(), 0);
    for (int i = 1; i < problem.depth(); ++i)
      if (problem.group_at(i) % 3 == 1) choice[i] = singles[problem.group_at(i) % singles.size()];
    plan::Plan p = problem.plan_of(choice);
    p.execution_order = plan::ExecutionOrder::fifo;
    auto fifo = sim::simulate(f.m, c, p, f.opts.sim);
    p.execution_order = plan::ExecutionOrder::heft;
    auto heft = sim::simulate(f.m, c, p, f.opts.sim);
    ASSERT_TRUE(fifo && heft) << name;
    EXPECT_LE(heft->iteration_time.value, fifo->iteration_time.value * (1 + 1e-9))
        << name << ": heft " << heft->iteration_time.value << " s, fifo "
        << fifo->iteration_time.value << " s";
  }
}

}  // namespace
}  // namespace hetplan::search

// What TAG's network reads (tag_features.h), and HeteroG's decoding with a guide whose choices are
// known.
#include "hetplan/search/tag_features.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "hetplan/search/heterog.h"
#include "hetplan/search/tag.h"
#include "tag_fixtures.h"

namespace hetplan::search {
namespace {

using testing::Fixture;
using testing::slow_pair;

TagProblem vgg_problem(Fixture& f, int groups) {
  const cost::ComputeCostModel compute(f.opts.sim.compute);
  auto grouping = group_ops(f.m, op_compute_weights(f.m, f.c.device_types[0], compute), groups, 1);
  EXPECT_TRUE(grouping) << grouping.error().message;
  return TagProblem(f.ctx, *grouping);
}

TEST(TagFeatures, GraphShapesAndLinks) {
  Fixture f("vgg16", slow_pair(), 32);
  TagProblem p = vgg_problem(f, 3);
  const TagGraph& g = p.graph();
  ASSERT_EQ(g.groups, 3);
  ASSERT_EQ(g.devices, 3);
  EXPECT_EQ(g.actions, static_cast<int>(p.actions().size()));
  EXPECT_EQ(g.group_x.size(), 3u * kTagGroupFeatures);
  EXPECT_EQ(g.device_x.size(), 3u * (kTagDeviceFeatures - 1));
  EXPECT_EQ(g.action_x.size(), p.actions().size() * kTagActionFeatures);
  EXPECT_EQ(g.membership.size(), p.actions().size() * 3);
  EXPECT_EQ(g.microbatch_x.size(), p.microbatch_counts().size() * kTagMicrobatchFeatures);
  EXPECT_EQ(g.global_x.size(), static_cast<std::size_t>(kTagGlobalFeatures));
  // Data flow is symmetric; a chain of three groups has flow between neighbours only.
  double shares = 0;
  for (int a = 0; a < 3; ++a) {
    shares += g.group_x[a * kTagGroupFeatures];
    for (int b = 0; b < 3; ++b) EXPECT_EQ(g.flow[a * 3 + b], g.flow[b * 3 + a]);
  }
  EXPECT_NEAR(shares, 1.0, 1e-6);
  // Device 0 is the V100 alone on its node; 1 and 2 the 1080Tis on 15.75 GB/s PCIe. Between the
  // nodes 5 Gb/s: the slowest pair, 0; the PCIe pair log10(15.75e9 / 0.625e9).
  EXPECT_EQ(g.link[0 * 3 + 1], 0.0f);
  EXPECT_EQ(g.link[2 * 3 + 0], 0.0f);
  EXPECT_NEAR(g.link[1 * 3 + 2], std::log10(15.75e9 / 0.625e9), 1e-5);
  EXPECT_EQ(g.link[1 * 3 + 1], 0.0f);
  // The V100 is the fastest device: speed 1; a 1080Ti slower.
  EXPECT_FLOAT_EQ(g.device_x[0], 1.0f);
  EXPECT_LT(g.device_x[(kTagDeviceFeatures - 1) * 1], 1.0f);
  // A group's candidate time is larger on a slower device.
  EXPECT_GT(g.candidate[0 * 3 + 1], g.candidate[0 * 3 + 0]);
}

TEST(TagFeatures, LinksAreRelativeToTheSlowestPair) {
  // The same cluster with every link ten times faster reads the same link matrix.
  Fixture f("vgg16", slow_pair(), 32);
  auto fast = slow_pair();
  for (auto& l : fast.links) l.bandwidth.value *= 10;
  Fixture f10("vgg16", fast, 32);
  TagProblem a = vgg_problem(f, 3), b = vgg_problem(f10, 3);
  ASSERT_EQ(a.graph().link.size(), b.graph().link.size());
  for (std::size_t i = 0; i < a.graph().link.size(); ++i)
    EXPECT_NEAR(a.graph().link[i], b.graph().link[i], 1e-5);
  // The communication-to-compute ratio falls by a factor of ten (log10 over 3).
  EXPECT_NEAR(a.graph().global_x[0] - b.graph().global_x[0], 1.0 / 3, 1e-4);
}

TEST(TagFeatures, StateRecordsTheDecisions) {
  Fixture f("vgg16", slow_pair(), 32);
  TagProblem p = vgg_problem(f, 3);
  const TagState root = tag_state(p, {});
  EXPECT_EQ(root.decision, 0);
  EXPECT_EQ(root.group, -1);
  EXPECT_EQ(root.mask.size(), p.microbatch_counts().size());
  // Place the first decided group on device 0 (the V100 alone).
  int single = -1;
  for (std::size_t a = 0; a < p.actions().size() && single < 0; ++a)
    if (p.actions()[a].devices == std::vector<int>{0}) single = static_cast<int>(a);
  ASSERT_GE(single, 0);
  const std::vector<int> prefix = {0, single};
  const TagState s = tag_state(p, prefix);
  EXPECT_EQ(s.decision, 2);
  EXPECT_EQ(s.group, p.group_at(2));
  const int g = p.group_at(1);
  const float* row = &s.group_state[g * kTagStateFeatures];
  EXPECT_EQ(row[0], 1.0f);  // decided
  EXPECT_EQ(row[1], 0.0f);  // not the one decided now
  EXPECT_FLOAT_EQ(row[2], 1.0f / 3);
  EXPECT_EQ(row[3], 1.0f);  // placed
  EXPECT_EQ(s.group_state[s.group * kTagStateFeatures + 1], 1.0f);
  // The whole group's compute sits on device 0.
  EXPECT_FLOAT_EQ(s.device_load[0], p.graph().group_x[g * kTagGroupFeatures]);
  EXPECT_EQ(s.device_load[1], 0.0f);
  // Sufficient factors are masked exactly for groups without a weight they apply to.
  ASSERT_EQ(s.mask.size(), p.actions().size());
  for (std::size_t a = 0; a < p.actions().size(); ++a)
    EXPECT_EQ(s.mask[a] == 0.0f, p.actions()[a].sync == plan::SyncMethod::sufficient_factor &&
                                     !p.has_factor_op(s.group));
}

// Puts all the weight on the last option the mask allows.
class LastOption : public TagGuide {
 public:
  std::string describe() const override { return "last option"; }
  std::vector<double> prior(const TagGraph&, const TagState& s) override { return last(s); }
  std::vector<double> decode(const TagGraph&, const TagState& s) override { return last(s); }
  static std::vector<double> last(const TagState& s) {
    std::vector<double> w(s.mask.size(), 0.0);
    for (std::size_t a = s.mask.size(); a-- > 0;)
      if (s.mask[a] > 0) {
        w[a] = 1;
        break;
      }
    return w;
  }
};

TEST(Heterog, GreedyDecodingFollowsTheGuide) {
  Fixture f("vgg16", slow_pair(), 32);
  TagProblem p = vgg_problem(f, 3);
  LastOption guide;
  const std::vector<int> seq = decode_sequence(p, guide, nullptr);
  ASSERT_EQ(static_cast<int>(seq.size()), p.depth());
  EXPECT_EQ(seq[0], static_cast<int>(p.microbatch_counts().size()) - 1);
  for (int i = 1; i < p.depth(); ++i) {
    const TagState s = tag_state(p, std::span<const int>(seq.data(), static_cast<std::size_t>(i)));
    const std::vector<double> w = LastOption::last(s);
    EXPECT_EQ(seq[i], std::max_element(w.begin(), w.end()) - w.begin());
  }
  // A drawn sequence puts no weight where the guide gives none: the same sequence.
  std::uint64_t rng = 5;
  EXPECT_EQ(decode_sequence(p, guide, &rng), seq);
}

TEST(Heterog, PlannerSimulatesTheDecodedPlansAndIsDeterministic) {
  Fixture f("vgg16", slow_pair(), 32);
  LastOption guide;
  HeterogOptions o;
  o.groups = 3;
  o.samples = 3;
  const PlannerOutput a = heterog(f.ctx, guide, o);
  ASSERT_TRUE(a.best.ok) << a.best.error;
  EXPECT_EQ(a.name, "heterog");
  EXPECT_TRUE(a.best.plan.is_op_level());
  Fixture g("vgg16", slow_pair(), 32);
  const PlannerOutput b = heterog(g.ctx, guide, o);
  EXPECT_EQ(a.best.fingerprint, b.best.fingerprint);
  EXPECT_EQ(a.best.iteration_time_s, b.best.iteration_time_s);
}

// Weight on the first two options the mask allows, 1 : 2.
class FirstTwo : public TagGuide {
 public:
  std::string describe() const override { return "first two"; }
  std::vector<double> prior(const TagGraph&, const TagState& s) override { return two(s); }
  std::vector<double> decode(const TagGraph&, const TagState& s) override { return two(s); }
  static std::vector<double> two(const TagState& s) {
    std::vector<double> w(s.mask.size(), 0.0);
    int given = 0;
    for (std::size_t a = 0; a < s.mask.size() && given < 2; ++a)
      if (s.mask[a] > 0) w[a] = ++given;
    return w;
  }
};

TEST(Heterog, DrawsFollowTheSeedAndStayWhereTheGuideGivesWeight) {
  Fixture f("vgg16", slow_pair(), 32);
  TagProblem p = vgg_problem(f, 3);
  FirstTwo guide;
  std::set<std::vector<int>> seen;
  for (std::uint64_t seed = 1; seed <= 16; ++seed) {
    std::uint64_t a = seed, b = seed;
    const std::vector<int> seq = decode_sequence(p, guide, &a);
    EXPECT_EQ(decode_sequence(p, guide, &b), seq);  // the same seed, the same draws
    EXPECT_EQ(a, b);
    for (int i = 0; i < p.depth(); ++i) {
      const TagState s =
          tag_state(p, std::span<const int>(seq.data(), static_cast<std::size_t>(i)));
      EXPECT_GT(FirstTwo::two(s)[static_cast<std::size_t>(seq[i])], 0.0);
    }
    seen.insert(seq);
  }
  EXPECT_GT(seen.size(), 1u);  // the seeds draw different sequences
  // Greedy: the heavier of the two at every step.
  const std::vector<int> greedy = decode_sequence(p, guide, nullptr);
  for (int i = 0; i < p.depth(); ++i) {
    const TagState s =
        tag_state(p, std::span<const int>(greedy.data(), static_cast<std::size_t>(i)));
    const auto w = FirstTwo::two(s);
    EXPECT_EQ(w[static_cast<std::size_t>(greedy[i])], *std::max_element(w.begin(), w.end()));
  }
}

TEST(TagSearch, TheGuideIsThePrior) {
  Fixture f("vgg16", slow_pair(), 32);
  const cost::ComputeCostModel compute(f.opts.sim.compute);
  auto grouping = group_ops(f.m, op_compute_weights(f.m, f.c.device_types[0], compute), 3, 1);
  ASSERT_TRUE(grouping);
  LastOption guide;
  TagProblem p(f.ctx, *grouping, nullptr, &guide);
  EXPECT_EQ(p.prior({}), LastOption::last(tag_state(p, {})));
  const std::vector<int> prefix = {0};
  EXPECT_EQ(p.prior(prefix), LastOption::last(tag_state(p, prefix)));
}

// The decoded plans compete for the answer: with one simulation and no drawn plans, TAG answers
// the guide's greedy plan, which the heterog planner with no samples also answers.
TEST(TagSearch, TheDecodedPlansCompeteAndCountAsSimulations) {
  Fixture f("vgg16", slow_pair(), 32);
  LastOption guide;
  TagOptions o;
  o.groups = 3;
  o.simulations = 1;
  o.decoded_starts = 0;
  o.guide = &guide;
  const PlannerOutput t = tag(f.ctx, o);
  ASSERT_TRUE(t.best.ok) << t.best.error;
  Fixture g("vgg16", slow_pair(), 32);
  HeterogOptions h;
  h.groups = 3;
  h.samples = 0;
  const PlannerOutput d = heterog(g.ctx, guide, h);
  ASSERT_TRUE(d.best.ok) << d.best.error;
  // Data parallelism and the greedy plan, the same two for both; the tree searched no more.
  EXPECT_EQ(t.estimated, 2);
  EXPECT_EQ(t.best.fingerprint, d.best.fingerprint);
  EXPECT_EQ(t.best.iteration_time_s, d.best.iteration_time_s);
  // Without a guide the one simulation is the tree's.
  o.guide = nullptr;
  Fixture u("vgg16", slow_pair(), 32);
  EXPECT_EQ(tag(u.ctx, o).estimated, 2);
}

}  // namespace
}  // namespace hetplan::search

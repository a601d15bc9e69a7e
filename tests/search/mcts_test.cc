// The generic Monte Carlo tree search (PUCT) on toy problems whose optimum is known.
#include "hetplan/search/mcts.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <numeric>
#include <vector>

namespace hetplan::search {
namespace {

using Seq = std::vector<int>;

// A problem that records every evaluation, in order.
class Recording : public DecisionProblem {
 public:
  double evaluate(std::span<const int> prefix) final {
    const Seq p(prefix.begin(), prefix.end());
    ++calls[p];
    order.push_back(p);
    return value(p);
  }
  virtual double value(const Seq& prefix) const = 0;

  std::map<Seq, int> calls;
  std::vector<Seq> order;
};

// n decisions of k actions; a prefix scores the matches with a hidden target so far, over n. The
// optimum is the target, valued 1. An informed prior puts `mass` on the target's action.
class TargetString : public Recording {
 public:
  TargetString(Seq target, int k, double mass = 0)
      : target_(std::move(target)), k_(k), mass_(mass) {}
  int depth() const override { return static_cast<int>(target_.size()); }
  int num_actions(std::span<const int>) override { return k_; }
  std::vector<double> prior(std::span<const int> prefix) override {
    if (mass_ == 0) return DecisionProblem::prior(prefix);
    std::vector<double> p(k_, (1 - mass_) / (k_ - 1));
    p[target_[prefix.size()]] = mass_;
    return p;
  }
  double value(const Seq& prefix) const override {
    int matches = 0;
    for (std::size_t i = 0; i < prefix.size(); ++i) matches += prefix[i] == target_[i];
    return static_cast<double>(matches) / depth();
  }
  // The evaluation (1-based) that first scored the full target; 0 if none did.
  int first_optimum() const {
    for (std::size_t i = 0; i < order.size(); ++i)
      if (order[i] == target_) return static_cast<int>(i) + 1;
    return 0;
  }

 private:
  Seq target_;
  int k_;
  double mass_;
};

// Take (1) or skip (0) each item; a prefix scores the value taken, over the sum of all values, and
// -1 when it is over the capacity (infeasible). Undecided items are skipped, as TAG fills
// undecided groups with a default.
class Knapsack : public Recording {
 public:
  Knapsack(std::vector<int> weight, std::vector<int> value, int capacity)
      : weight_(std::move(weight)), value_(std::move(value)), capacity_(capacity) {}
  int depth() const override { return static_cast<int>(weight_.size()); }
  int num_actions(std::span<const int>) override { return 2; }
  double value(const Seq& prefix) const override {
    int w = 0, v = 0;
    for (std::size_t i = 0; i < prefix.size(); ++i) {
      w += prefix[i] * weight_[i];
      v += prefix[i] * value_[i];
    }
    if (w > capacity_) return -1;
    return static_cast<double>(v) / std::accumulate(value_.begin(), value_.end(), 0);
  }
  // The best full sequence by enumeration (the first in binary order among equals).
  Seq brute_force() const {
    const int n = depth();
    Seq best;
    double best_value = -2;
    for (std::uint32_t mask = 0; mask < (1u << n); ++mask) {
      Seq s(n);
      for (int i = 0; i < n; ++i) s[i] = (mask >> i) & 1u;
      if (value(s) > best_value) {
        best_value = value(s);
        best = s;
      }
    }
    return best;
  }

 private:
  std::vector<int> weight_, value_;
  int capacity_;
};

// One action per level, depth n.
class Chain : public Recording {
 public:
  explicit Chain(int n) : n_(n) {}
  int depth() const override { return n_; }
  int num_actions(std::span<const int>) override { return 1; }
  double value(const Seq& prefix) const override {
    return 0.1 * static_cast<double>(prefix.size());
  }

 private:
  int n_;
};

// n items with weights and values in 1..10 from a small linear congruential generator, the
// capacity half their total weight.
Knapsack items(int n, std::uint32_t seed) {
  std::vector<int> w, v;
  std::uint32_t x = seed;
  auto next = [&] { return static_cast<int>((x = x * 1103515245u + 12345u) >> 16) % 10 + 1; };
  for (int i = 0; i < n; ++i) {
    w.push_back(next());
    v.push_back(next());
  }
  return Knapsack(w, v, std::accumulate(w.begin(), w.end(), 0) / 2);
}

MctsOptions budget(int simulations) {
  MctsOptions o;
  o.simulations = simulations;
  return o;
}

void expect_policy_sums_to_one(const MctsResult& r) {
  for (const auto& t : r.policy) {
    EXPECT_NEAR(std::accumulate(t.visits.begin(), t.visits.end(), 0.0), 1.0, 1e-12);
    EXPECT_GE(t.total_visits, 1);
  }
}

TEST(Mcts, OneActionPerLevelEvaluatesEachPrefixOfTheOnlyPathOnce) {
  // Simulation 1 evaluates the root, 2..5 the prefixes of length 1..4; 6..10 end on the full
  // sequence and back its stored value up. Visits: root 10, then 9, 8, 7, and 6 at full depth.
  Chain p(4);
  const MctsResult r = mcts(p, budget(10));
  EXPECT_EQ(r.decisions, (Seq{0, 0, 0, 0}));
  EXPECT_DOUBLE_EQ(r.value, 0.4);
  EXPECT_TRUE(r.complete_found);
  EXPECT_EQ(r.simulations, 10);
  EXPECT_EQ(r.evaluations, 5);
  EXPECT_EQ(p.order, (std::vector<Seq>{{}, {0}, {0, 0}, {0, 0, 0}, {0, 0, 0, 0}}));
  ASSERT_EQ(r.policy.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(r.policy[i].prefix, Seq(i, 0));
    EXPECT_EQ(r.policy[i].visits, std::vector<double>{1.0});
    EXPECT_EQ(r.policy[i].total_visits, 9 - i);
  }
}

TEST(Mcts, SkippingExhaustedNodesEndsWhenEverySequenceIsEvaluated) {
  // The same chain: after 5 simulations every node is evaluated and the search stops.
  Chain p(4);
  MctsOptions o = budget(10);
  o.skip_exhausted = true;
  const MctsResult r = mcts(p, o);
  EXPECT_EQ(r.simulations, 5);
  EXPECT_EQ(r.evaluations, 5);
  EXPECT_EQ(r.decisions, (Seq{0, 0, 0, 0}));
  // A knapsack of 8 items: every simulation evaluates a new prefix until all 511 are.
  Knapsack k = items(8, 3);
  o.simulations = 10000;
  const MctsResult all = mcts(k, o);
  EXPECT_EQ(all.simulations, all.evaluations);
  EXPECT_EQ(all.evaluations, 511);
}

TEST(Mcts, DepthZeroEvaluatesTheEmptySequenceOnce) {
  Chain p(0);
  const MctsResult r = mcts(p, budget(3));
  EXPECT_EQ(r.decisions, Seq{});
  EXPECT_EQ(r.evaluations, 1);
  EXPECT_EQ(r.simulations, 3);
  EXPECT_TRUE(r.complete_found);
  EXPECT_TRUE(r.policy.empty());
  Chain q(0);
  EXPECT_EQ(mcts_stepwise(q, budget(3)).evaluations, 1);
}

TEST(Mcts, FindsTheHiddenTargetString) {
  const Seq target{2, 0, 1, 1, 0, 2};
  for (auto run : {mcts, mcts_stepwise}) {
    TargetString p(target, 3);
    const MctsResult r = run(p, budget(400));
    EXPECT_EQ(r.decisions, target);
    EXPECT_DOUBLE_EQ(r.value, 1.0);
    EXPECT_TRUE(r.complete_found);
    EXPECT_EQ(r.simulations, 400);
  }
}

TEST(Mcts, FindsTheBruteForceOptimumOfAKnapsack) {
  // Eight items: weights 9 4 10 9 1 10 5 6, values 7 4 6 8 7 8 9 2, capacity 27.
  const Knapsack k = items(8, 1);
  const Seq best = k.brute_force();
  for (auto run : {mcts, mcts_stepwise}) {
    for (int simulations : {1000, 5000}) {
      Knapsack p = k;
      const MctsResult r = run(p, budget(simulations));
      EXPECT_EQ(r.decisions, best) << simulations;
      EXPECT_DOUBLE_EQ(r.value, k.value(best));
    }
  }
}

TEST(Mcts, MaxBackupFindsTheOptimumWhereTheMeanSettlesBelowIt) {
  // With a mean Q, each infeasible (-1) sequence drags its subtree down: on this instance the
  // search settles on a sequence below the optimum and does not leave it even at 20000
  // simulations. Backing the best value up instead (max_weight 1) finds every instance's optimum.
  {
    Knapsack p = items(8, 12345);
    const MctsResult r = mcts(p, budget(20000));
    EXPECT_LT(r.value, p.value(p.brute_force()));
  }
  for (std::uint32_t seed : {12345u, 1u, 2u, 3u, 4u, 5u}) {
    Knapsack p = items(8, seed);
    MctsOptions o = budget(2000);
    o.max_weight = 1;
    EXPECT_EQ(mcts(p, o).decisions, p.brute_force()) << seed;
  }
}

TEST(Mcts, NeverEvaluatesAPrefixTwice) {
  // 3 ternary decisions: 1 + 3 + 9 + 27 = 40 prefixes. 2000 simulations revisit them many times;
  // mcts() evaluates all 40 once each, mcts_stepwise() 38 (its commits leave 2 unexplored).
  for (auto run : {mcts, mcts_stepwise}) {
    TargetString p({1, 2, 0}, 3);
    const MctsResult r = run(p, budget(2000));
    EXPECT_EQ(r.evaluations, static_cast<int>(p.order.size()));
    EXPECT_EQ(r.evaluations, static_cast<int>(p.calls.size()));
    EXPECT_EQ(r.evaluations, run == mcts ? 40 : 38);
    for (const auto& [prefix, calls] : p.calls) EXPECT_EQ(calls, 1);
  }
}

TEST(Mcts, IsDeterministic) {
  // Dirichlet noise on: the seed fixes it, so two runs agree on everything, evaluations in order.
  for (auto run : {mcts, mcts_stepwise}) {
    MctsOptions o = budget(300);
    o.dirichlet_fraction = 0.25;
    o.seed = 7;
    Knapsack p = items(10, 3), q = items(10, 3);
    const MctsResult a = run(p, o), b = run(q, o);
    EXPECT_EQ(a.decisions, b.decisions);
    EXPECT_EQ(a.value, b.value);
    EXPECT_EQ(a.evaluations, b.evaluations);
    EXPECT_EQ(p.order, q.order);
    ASSERT_EQ(a.policy.size(), b.policy.size());
    for (std::size_t i = 0; i < a.policy.size(); ++i) {
      EXPECT_EQ(a.policy[i].prefix, b.policy[i].prefix);
      EXPECT_EQ(a.policy[i].visits, b.policy[i].visits);
      EXPECT_EQ(a.policy[i].total_visits, b.policy[i].total_visits);
    }
    // Another seed, other noise: the search takes another order.
    o.seed = 8;
    Knapsack other = items(10, 3);
    run(other, o);
    EXPECT_NE(other.order, p.order);
  }
}

TEST(Mcts, InformedPriorReachesTheOptimumInFewerSimulations) {
  // 8 decisions of 4 actions, ten hidden targets. A prior with 0.6 on the target's action leads
  // every simulation one level deeper along the target: its 9th evaluation (root, then 8 levels)
  // is the optimum. A uniform prior has not found it in 100 simulations (it needs about 250-320).
  std::uint32_t x = 99;
  for (int t = 0; t < 10; ++t) {
    Seq target(8);
    for (int& a : target) a = static_cast<int>((x = x * 1103515245u + 12345u) >> 16) % 4;
    TargetString informed(target, 4, 0.6), uniform(target, 4);
    EXPECT_EQ(mcts(informed, budget(100)).decisions, target);
    EXPECT_EQ(informed.first_optimum(), 9);
    EXPECT_NE(mcts(uniform, budget(100)).decisions, target);
    EXPECT_EQ(uniform.first_optimum(), 0);
  }
}

TEST(Mcts, WithoutSimulationsFollowsThePrior) {
  TargetString p({3, 1, 0, 2}, 4, 0.6);
  const MctsResult r = mcts(p, budget(0));
  EXPECT_EQ(r.decisions, (Seq{3, 1, 0, 2}));
  EXPECT_FALSE(r.complete_found);
  EXPECT_EQ(r.simulations, 0);
  EXPECT_EQ(r.evaluations, 1);
  EXPECT_TRUE(r.policy.empty());
}

TEST(Mcts, StopConditionEndsTheSearch) {
  // should_stop is asked before each simulation: true at the 4th question leaves 3 simulations
  // (the root, one child, one grandchild), then the sequence is completed greedily and evaluated.
  for (auto run : {mcts, mcts_stepwise}) {
    TargetString p({0, 1, 2, 0, 1, 2}, 3);
    int asked = 0;
    MctsOptions o = budget(1000);
    o.should_stop = [&] { return ++asked > 3; };
    const MctsResult r = run(p, o);
    EXPECT_EQ(r.simulations, 3);
    EXPECT_EQ(r.evaluations, 4);
    EXPECT_FALSE(r.complete_found);
    EXPECT_EQ(r.decisions.size(), 6u);
    EXPECT_EQ(p.order.back(), r.decisions);
    expect_policy_sums_to_one(r);
  }
}

TEST(Mcts, PolicyTargetsFollowTheChosenPathAndSumToOne) {
  for (auto run : {mcts, mcts_stepwise}) {
    Knapsack p = items(10, 2);
    const MctsResult r = run(p, budget(1000));
    ASSERT_FALSE(r.policy.empty());
    expect_policy_sums_to_one(r);
    for (std::size_t i = 0; i < r.policy.size(); ++i) EXPECT_EQ(r.policy[i].prefix.size(), i);
  }
  // mcts(): the prefixes are those of the best sequence, every depth visited.
  Knapsack p = items(10, 2);
  const MctsResult r = mcts(p, budget(1000));
  ASSERT_EQ(r.policy.size(), 10u);
  for (std::size_t i = 0; i < r.policy.size(); ++i)
    EXPECT_EQ(r.policy[i].prefix, Seq(r.decisions.begin(), r.decisions.begin() + i));
  EXPECT_EQ(r.policy[0].total_visits, 999);  // every simulation but the root's own
}

TEST(MctsStepwise, OneActionPerLevelSplitsTheBudgetOverTheSteps) {
  // Depth 4, 10 simulations: ceil(10/4) = 3 from the root (root, [0], [0,0]), then 3 from [0]
  // ([0,0,0], the full sequence, a revisit), 2 from [0,0], 2 from [0,0,0]. At its commit each
  // root's child had 2, 4, 5 and 6 visits.
  Chain p(4);
  const MctsResult r = mcts_stepwise(p, budget(10));
  EXPECT_EQ(r.decisions, (Seq{0, 0, 0, 0}));
  EXPECT_EQ(r.simulations, 10);
  EXPECT_EQ(r.evaluations, 5);
  ASSERT_EQ(r.policy.size(), 4u);
  const std::vector<int> totals{2, 4, 5, 6};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(r.policy[i].prefix, Seq(i, 0));
    EXPECT_EQ(r.policy[i].total_visits, totals[i]);
  }
}

}  // namespace
}  // namespace hetplan::search

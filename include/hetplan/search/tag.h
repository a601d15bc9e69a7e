// TAG's search over op-level plans (plan::Plan::op_groups): the model's ops coarsened into groups
// (METIS, op_groups.h), then a Monte Carlo tree search (mcts.h, PUCT) decides group by group, the
// groups of most compute first, where each runs and how its gradients are synchronised. A decision
// is a device set (every device, the devices of one type, of one node, or one node's fastest
// device alone) and, for a set of several, all-reduce, a parameter server sharded over the set,
// sufficient factor broadcasting (for groups with matmul weights it applies to), or, with
// TagOptions::tensor_splits, for a set within one node, a tensor split over the set
// (plan::GroupMode::split, tensor shares proportional to each device's speed on the model). A set
// of several otherwise replicates the group with batch shares proportional to each device's speed
// on the model (whole samples per iteration, so that groups on the same devices split them alike);
// a device left without a sample drops out, and a set of one device places the group there. The
// first decision is the number of micro-batches: the fewest (powers of two) with which the
// data-parallel plan fits, or up to 8 times as many (pipelines of placed groups). A partial plan is
// simulated with its undecided groups replicated over every device with all-reduce (the first
// action: plain data parallelism); where it does not fit, the faster of the same decisions at the
// fewest larger micro-batch count that fits (up to 32, every group keeping its devices) and the
// first of recomputation and ZeRO-1 that fits at the decided count, else that first saving at the
// most micro-batches tried (TagProblem::fitted). It is valued by its speed-up over the
// data-parallel plan, squashed as TAG does (here its logarithm, within [-1.5, 3]); -2 when it does
// not fit.
#pragma once

#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "hetplan/plan/plan.h"
#include "hetplan/search/mcts.h"
#include "hetplan/search/op_groups.h"
#include "hetplan/search/planners.h"
#include "hetplan/search/tag_features.h"

namespace hetplan::search {

struct TagOptions {
  int groups = 0;          // op groups; 0: default_group_count(model)
  int simulations = 1000;  // tree-search simulations (each evaluates one new partial plan)
  double c_puct = 1.5;
  // An unvisited group decision is first worth its parent's Q plus this (optimistic first-play
  // urgency): a node tries its other decisions until one improves on what it has shown.
  double first_play_bonus = 0.05;
  double budget_s = 0;  // wall-clock seconds at most (0: no budget beyond the context's deadline)
  // The simulated work at most, in the lowering's compute tasks summed over every plan evaluated
  // (about 2 ops x devices x micro-batches each): a budget that does not depend on the machine's
  // speed or load, so that a seed gives one plan. 0: none.
  double max_work = 0;
  // A stage-level plan to start from (the stage-level planners' best): each group's decision
  // that runs it where the stage holding most of its ops runs, and that plan's micro-batch count,
  // get half of the prior, so the search first follows it, then improves on it.
  std::optional<plan::Plan> hint;
  // The learned prior (tag_features.h); null: uniform over the actions that differ for the group.
  TagGuide* guide = nullptr;
  // With a guide: the plans its decoder gives (HeteroG's greedy sequence and this many drawn, as
  // heterog.h decodes them) are simulated before the tree search and compete with its plans for
  // the answer (the tree itself does not follow them). They count among the simulations.
  int decoded_starts = 15;
  // Offer tensor splits (split groups) within a node, and follow a hint's tensor-parallel stages
  // with them. Off by default: `hetplan run` executes split groups only where they hold whole
  // layers of a model with a tensor-parallel stage module, and the learned prior was not trained
  // with them.
  bool tensor_splits = false;
};

// The decision problem the tree search solves; every evaluation is a simulation by the context's
// evaluator (cached by plan).
class TagProblem : public DecisionProblem {
 public:
  struct Action {
    std::vector<int> devices;  // ascending
    plan::SyncMethod sync = plan::SyncMethod::all_reduce;
    bool split = false;  // a tensor split over the devices (then sync is all_reduce, unused)
  };

  TagProblem(const Context& ctx, OpGrouping grouping, const plan::Plan* hint = nullptr,
             TagGuide* guide = nullptr, bool tensor_splits = false);

  // The micro-batch count, then one decision per group.
  int depth() const override { return static_cast<int>(order_.size()) + 1; }
  // First the micro-batch counts; then every action applies to every group (sufficient factors
  // for a group without a matmul weight they apply to is all-reduce: the same plan, which the
  // evaluator's cache answers).
  int num_actions(std::span<const int> prefix) override;
  // The guide's, or uniform over the actions that differ for the group; with a hint, half of it on
  // the hinted action.
  std::vector<double> prior(std::span<const int> prefix) override;
  double evaluate(std::span<const int> prefix) override;

  // The plan of a decision prefix (undecided: the fewest micro-batches, the first action); with
  // `microbatches` > 0 that count instead of the prefix's (a divisor of the global batch).
  plan::Plan plan_of(std::span<const int> prefix, int microbatches = 0) const;

  const std::vector<Action>& actions() const { return actions_; }
  // The group decision i (>= 1) is about.
  int group_at(int i) const { return order_[static_cast<std::size_t>(i - 1)]; }
  const std::vector<int>& microbatch_counts() const { return microbatches_; }
  // The decisions that follow the hint (empty without one).
  std::vector<int> hint_decisions() const;
  // Whether sufficient factor broadcasting applies to one of group g's weights (otherwise that
  // action is all-reduce, and masked).
  bool has_factor_op(int g) const { return has_factor_op_[static_cast<std::size_t>(g)]; }
  const Context& context() const { return ctx_; }
  const OpGrouping& grouping() const { return grouping_; }
  // [group][device type]: forward and backward seconds per sample.
  const std::vector<std::vector<double>>& group_time() const { return group_time_; }
  // [device type]: the whole model's seconds per sample at an even share of the batch.
  const std::vector<double>& model_time() const { return model_time_; }
  const std::vector<int>& order() const { return order_; }  // decision i >= 1: group order()[i-1]
  const TagGraph& graph() const;                            // tag_graph(*this), built once
  const Evaluation& best() const { return best_; }          // the best plan evaluated
  const Evaluation& last() const { return last_; }          // the last evaluate()'s plan
  const Evaluation& baseline() const { return baseline_; }  // every group data parallel
  // Evaluated plans, best first, distinct, at most `n`.
  std::vector<Evaluation> top(std::size_t n) const;
  int evaluations() const { return evaluations_; }
  double work() const { return work_; }  // compute tasks of the plans evaluated

 private:
  void place_samples(const std::vector<int>& devices, int microbatches, plan::OpGroup& og) const;
  // og split over `devices` at tensor shares proportional to their speed (none when even).
  void split_tensors(const std::vector<int>& devices, plan::OpGroup& og) const;
  // Device d's speed on the whole model (its node's CPU share over its type's time per sample).
  double device_speed(int d) const;
  void keep(const Evaluation& e);
  Evaluation simulate(const plan::Plan& p);  // the evaluator's, counting the work
  // The plan of `prefix` simulated; where it does not fit, the faster of two that fit: the same
  // decisions at the fewest larger micro-batch counts that fit (every group on the same devices),
  // and the first of recomputation and ZeRO-1 that fits (tag.cc); where neither does, the first
  // saving that fits at the most micro-batches tried; where none fits, the one closest to fitting.
  Evaluation fitted(std::span<const int> prefix);

  const Context& ctx_;
  OpGrouping grouping_;
  std::vector<std::vector<double>> group_time_;  // [group][device type]: seconds per sample
  std::vector<double> model_time_;               // [device type]: the whole model's
  std::vector<int> order_;                       // decision i is about group order_[i]
  std::vector<bool> has_factor_op_;
  bool has_attention_core_ = false;  // whether selective recomputation reruns any op
  std::vector<Action> actions_;
  std::vector<int> microbatches_;  // decision 0's choices
  int hint_microbatches_ = -1;     // the hint's index in microbatches_, or -1
  std::vector<int> hint_action_;   // per group: the hint's action, or -1
  Evaluation baseline_, best_, last_;
  std::vector<Evaluation> top_;  // best first, distinct
  int evaluations_ = 0;
  double work_ = 0;
  std::set<std::string> simulated_;  // fingerprints of the plans simulated
  TagGuide* guide_ = nullptr;
  mutable std::optional<TagGraph> graph_;
};

// The ops of ctx's model in `groups` groups (0: default_group_count) by METIS, weighted by their
// compute on the cluster's fastest type; the seed is SearchOptions::seed.
Result<OpGrouping> tag_grouping(const Context& ctx, int groups);

// The tree search's settings for these options (PUCT with c_puct, mean and best backed-up value
// mixed half and half, optimistic first-play urgency).
MctsOptions mcts_options(const TagOptions& options, std::uint64_t seed);

// The best op-level plan the search simulated (PlannerOutput::best.ok false when it could not
// group the ops). Deterministic for a seed (SearchOptions::seed drives the grouping) and a number
// of simulations; the budget and the context's deadline stop it earlier.
PlannerOutput tag(const Context& ctx, const TagOptions& options = {});

}  // namespace hetplan::search

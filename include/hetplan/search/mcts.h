// A generic Monte Carlo tree search with PUCT selection (AlphaZero, as TAG uses it), over a
// fixed-depth sequence of decisions d_0..d_{n-1}. It knows nothing of plans: a DecisionProblem
// gives the actions at a prefix, a prior over them and a value for any prefix, partial or full.
//
// One simulation walks down from the root choosing at each node s the action
//   a* = argmax_a  Q(s,a) + c_puct * P(s,a) * sqrt(N(s)) / (1 + N(s,a))          (ties: lowest a)
// until it takes an action whose child was never reached; that child is created and its prefix
// evaluated (no rollouts: the problem evaluates a partial sequence directly), and the value is
// added to every node on the path. N(s) counts the simulations that passed through s, including
// the one that created it; Q(s,a) is the mean value backed up through the child (W/N), or with
// `max_weight` w > 0 the mix (1 - w) W/N + w max (single-player MCTS: the planner keeps the one
// best sequence, and a mean drags a subtree down for every infeasible (-1) sequence in it). A
// simulation that ends on a full-depth node backs its stored value up again without evaluating it.
// So every node is evaluated exactly once, when it is created: the tree is the cache of
// evaluations, and the same prefix is never evaluated twice in one call.
//
// First-play urgency: an unvisited child's Q is `fpu_value` when set, otherwise the parent's own
// evaluation minus `fpu_reduction` (0 by default: a new child is presumed as good as its parent's
// partial sequence, whose undecided decisions take the problem's default). Values are used as
// given ("higher is better", TAG's lie in [-1, a few]); there is no normalisation of Q, so c_puct
// is on the scale of the values.
//
// The first simulation evaluates the root itself (the empty prefix, or the committed prefix in
// stepwise mode). With one action per level and depth n, n + 1 simulations evaluate the n + 1
// prefixes of the only sequence; more simulations evaluate nothing new.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

namespace hetplan::search {

// A fixed-depth sequential decision problem. Actions at a prefix are indices 0..num_actions-1.
// The search calls prior() once per node it selects from, and evaluate() once per prefix.
class DecisionProblem {
 public:
  virtual ~DecisionProblem() = default;
  // n: the number of decisions in a full sequence (>= 0).
  virtual int depth() const = 0;
  // The number of actions (>= 1) at `prefix` (length < depth()).
  virtual int num_actions(std::span<const int> prefix) = 0;
  // One non-negative weight per action at `prefix`; the search normalises them (all zero: uniform).
  // The default is uniform; the learned network provides a better one.
  virtual std::vector<double> prior(std::span<const int> prefix);
  // The value of a partial or full sequence, higher is better (TAG: squashed speed-up over a
  // baseline, -1 when infeasible). Expensive: a simulation.
  virtual double evaluate(std::span<const int> prefix) = 0;
};

struct MctsOptions {
  int simulations = 800;  // the budget; in stepwise mode, over all the steps together
  double c_puct = 1.5;
  // Q = (1 - max_weight) * mean + max_weight * best value backed up through the child; 0 is
  // AlphaZero's mean. On knapsacks with a tight capacity 1 finds the optimum far more often.
  double max_weight = 0.0;
  // First-play urgency: Q of an unvisited child (see the comment at the top).
  std::optional<double> fpu_value;
  double fpu_reduction = 0.0;
  // Whether that parent value is the parent's Q (its backed-up values, mixed as the children's
  // are: what its explored children have shown) instead of its own evaluation (Leela Chess Zero's
  // first-play urgency). With an evaluation that fills undecided decisions by a poor default, the
  // parent's own value can be far below what its children reach, and unvisited siblings are then
  // never tried.
  bool fpu_parent_q = false;
  // Evaluations are deterministic: a node below which every sequence has been evaluated is left
  // out of selection, so that every simulation evaluates a new prefix (a full sequence seen
  // already would only be backed up again); the search ends when the whole tree is evaluated.
  bool skip_exhausted = false;
  // Dirichlet noise mixed into the prior at the root (each new root in stepwise mode):
  // P = (1 - fraction) P + fraction Dir(alpha). Off while fraction is 0.
  double dirichlet_fraction = 0.0;
  double dirichlet_alpha = 0.3;
  std::uint64_t seed = 1;  // the only randomness is the noise
  // Checked before every simulation; true stops the search (e.g. a deadline:
  // [&] { return deadline.expired(); }), and it stays stopped. Empty: never stops early. A search
  // stopped before any simulation reached full depth still evaluates its greedy completion once.
  // Nothing interrupts a simulation, so the overrun is at most one evaluation (two with that one).
  std::function<bool()> should_stop;
};

// AlphaZero's policy target at one node: the visit counts of its children, normalised.
struct PolicyTarget {
  std::vector<int> prefix;
  std::vector<double> visits;  // one per action, summing to 1
  int total_visits = 0;        // the children's visits before normalising (>= 1)
};

struct MctsResult {
  // The best-valued full-depth sequence evaluated (the first found among equal values). When no
  // simulation reached full depth, the sequence completed greedily from the root (most-visited
  // child, then highest prior, then lowest index), evaluated once more; complete_found is false.
  std::vector<int> decisions;
  double value = 0;
  bool complete_found = false;
  int simulations = 0;  // simulations run (fewer than the budget when should_stop said so)
  int evaluations = 0;  // calls of DecisionProblem::evaluate
  // Per depth along the chosen path, while its node has visited children: mcts() follows
  // `decisions`; mcts_stepwise() follows the committed actions, each target taken at the moment
  // its action was committed.
  std::vector<PolicyTarget> policy;
};

// One tree search from the empty prefix with the whole budget.
MctsResult mcts(DecisionProblem& problem, const MctsOptions& opts);

// AlphaZero's search in steps: at depth k the search runs ceil(remaining / (n - k)) simulations
// from the committed prefix (its subtree kept from the earlier steps), commits the root's
// most-visited action (ties: highest prior, then lowest index) and re-roots at that child, until
// all n decisions are committed. The best full sequence is tracked over all steps, as in mcts();
// the policy targets are those of the committed roots.
MctsResult mcts_stepwise(DecisionProblem& problem, const MctsOptions& opts);

}  // namespace hetplan::search

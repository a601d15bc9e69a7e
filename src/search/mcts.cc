#include "hetplan/search/mcts.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstddef>
#include <numbers>
#include <random>
#include <utility>

namespace hetplan::search {

std::vector<double> DecisionProblem::prior(std::span<const int> prefix) {
  const int k = num_actions(prefix);
  return std::vector<double>(static_cast<std::size_t>(k), 1.0 / k);
}

namespace {

// A uniform double in (0, 1] from the generator's bits (std's distributions differ between
// standard libraries; these do not, so a seed gives the same noise everywhere).
double uniform01(std::mt19937_64& rng) {
  return static_cast<double>((rng() >> 11) + 1) * 0x1.0p-53;
}

double standard_normal(std::mt19937_64& rng) {  // Box-Muller
  const double u1 = uniform01(rng), u2 = uniform01(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

// Gamma(alpha, 1) by Marsaglia and Tsang (2000); alpha < 1 through Gamma(alpha + 1) U^(1/alpha).
double gamma_sample(double alpha, std::mt19937_64& rng) {
  if (alpha < 1.0) return gamma_sample(alpha + 1.0, rng) * std::pow(uniform01(rng), 1.0 / alpha);
  const double d = alpha - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    const double x = standard_normal(rng);
    const double t = 1.0 + c * x;
    if (t <= 0) continue;
    const double v = t * t * t;
    if (std::log(uniform01(rng)) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

struct Node {
  bool evaluated = false;
  double value = 0;        // the node's own evaluation
  int visits = 0;          // N(s): simulations through s, the one that evaluated it included
  double value_sum = 0;    // W(s); Q = W / N
  double value_max = 0;    // the best value backed up through s
  bool expanded = false;   // prior and child fetched
  bool noised = false;     // Dirichlet noise mixed into the prior (as a root)
  bool exhausted = false;  // every sequence below it evaluated (MctsOptions::skip_exhausted)
  std::vector<double> prior;
  std::vector<int> child;  // node index per action, -1 while not created
};

// The tree of one call, and the bookkeeping shared by mcts() and mcts_stepwise().
class Search {
 public:
  Search(DecisionProblem& problem, const MctsOptions& opts)
      : problem_(problem), opts_(opts), n_(problem.depth()), rng_(opts.seed) {
    assert(n_ >= 0);
    nodes_.emplace_back();
  }

  bool should_stop() {
    if (stopped_) return true;
    stopped_ = opts_.should_stop && opts_.should_stop();
    return stopped_;
  }

  // One simulation from `root`, whose decisions are `root_prefix`.
  void simulate(int root, const std::vector<int>& root_prefix) {
    ++simulations_;
    prefix_ = root_prefix;
    path_.assign(1, root);
    int s = root;
    while (true) {
      if (!nodes_[s].evaluated) return finish(evaluate(s), root_prefix.size());
      if (static_cast<int>(prefix_.size()) == n_)
        return finish(nodes_[s].value, root_prefix.size());
      expand(s);
      const int a = select(s);
      if (a < 0) return finish(nodes_[s].value, root_prefix.size());  // all below exhausted
      prefix_.push_back(a);
      int c = nodes_[s].child[a];
      if (c < 0) c = add_child(s, a);
      path_.push_back(c);
      s = c;
    }
  }

  bool exhausted(int s) const { return nodes_[s].exhausted; }

  // Mixes Dirichlet noise into the prior of `root` (once per node) when the options ask for it.
  void add_root_noise(int root, const std::vector<int>& root_prefix) {
    if (opts_.dirichlet_fraction <= 0 || static_cast<int>(root_prefix.size()) == n_) return;
    prefix_ = root_prefix;
    expand(root);
    Node& node = nodes_[root];
    if (node.noised) return;
    node.noised = true;
    std::vector<double> noise(node.prior.size());
    double sum = 0;
    for (double& x : noise) sum += x = gamma_sample(opts_.dirichlet_alpha, rng_);
    if (!(sum > 0)) return;
    const double eps = opts_.dirichlet_fraction;
    for (std::size_t a = 0; a < noise.size(); ++a)
      node.prior[a] = (1 - eps) * node.prior[a] + eps * noise[a] / sum;
  }

  // The most-visited action at node s (ties: highest prior, then lowest index), whose decisions
  // are `prefix`; creates that child (unevaluated) if the tree has not reached it yet.
  std::pair<int, int> greedy_step(int s, const std::vector<int>& prefix) {
    prefix_ = prefix;
    expand(s);
    const Node& node = nodes_[s];
    int best = 0;
    for (int a = 1; a < static_cast<int>(node.child.size()); ++a) {
      const int va = child_visits(s, a), vb = child_visits(s, best);
      if (va > vb || (va == vb && node.prior[a] > node.prior[best])) best = a;
    }
    int c = nodes_[s].child[best];
    if (c < 0) c = add_child(s, best);
    return {best, c};
  }

  // The children's visits at s, normalised; nullopt when s has none (or was never expanded).
  std::optional<PolicyTarget> target(int s, const std::vector<int>& prefix) const {
    const Node& node = nodes_[s];
    if (!node.expanded) return std::nullopt;
    PolicyTarget t{prefix, std::vector<double>(node.child.size(), 0.0), 0};
    for (int a = 0; a < static_cast<int>(node.child.size()); ++a)
      t.total_visits += child_visits(s, a);
    if (t.total_visits == 0) return std::nullopt;
    for (int a = 0; a < static_cast<int>(node.child.size()); ++a)
      t.visits[a] = static_cast<double>(child_visits(s, a)) / t.total_visits;
    return t;
  }

  // Evaluates node s (decisions `prefix`) outside a simulation: the greedy completion.
  void evaluate_at(int s, const std::vector<int>& prefix) {
    prefix_ = prefix;
    if (!nodes_[s].evaluated) evaluate(s);
  }

  int child_of(int s, int a) const { return nodes_[s].child[a]; }
  bool have_best() const { return have_best_; }
  int depth() const { return n_; }

  MctsResult result(bool complete_found) const {
    MctsResult r;
    r.decisions = best_;
    r.value = best_value_;
    r.complete_found = complete_found;
    r.simulations = simulations_;
    r.evaluations = evaluations_;
    return r;
  }

 private:
  int child_visits(int s, int a) const {
    const int c = nodes_[s].child[a];
    return c < 0 ? 0 : nodes_[c].visits;
  }

  int add_child(int s, int a) {
    const int c = static_cast<int>(nodes_.size());
    nodes_.emplace_back();
    nodes_[s].child[a] = c;
    return c;
  }

  // Evaluates node s, whose decisions are prefix_; a full sequence may become the best.
  double evaluate(int s) {
    const double v = problem_.evaluate(prefix_);
    assert(std::isfinite(v));
    ++evaluations_;
    nodes_[s].evaluated = true;
    nodes_[s].value = v;
    if (static_cast<int>(prefix_.size()) == n_ && (!have_best_ || v > best_value_)) {
      have_best_ = true;
      best_value_ = v;
      best_ = prefix_;
    }
    return v;
  }

  // Fetches the actions and the normalised prior of node s, whose decisions are prefix_.
  void expand(int s) {
    if (nodes_[s].expanded) return;
    const int k = problem_.num_actions(prefix_);
    assert(k >= 1);
    std::vector<double> p = problem_.prior(prefix_);
    assert(static_cast<int>(p.size()) == k);
    double sum = 0;
    for (double x : p) {
      assert(x >= 0);
      sum += x;
    }
    for (double& x : p) x = sum > 0 ? x / sum : 1.0 / k;
    Node& node = nodes_[s];
    node.expanded = true;
    node.prior = std::move(p);
    node.child.assign(static_cast<std::size_t>(k), -1);
  }

  // PUCT: argmax_a Q(s,a) + c_puct P(s,a) sqrt(N(s)) / (1 + N(s,a)); ties to the lowest index.
  int select(int s) const {
    const Node& node = nodes_[s];
    const double base = opts_.fpu_parent_q && node.visits > 0
                            ? (1 - opts_.max_weight) * node.value_sum / node.visits +
                                  opts_.max_weight * node.value_max
                            : node.value;
    const double fpu = opts_.fpu_value ? *opts_.fpu_value : base - opts_.fpu_reduction;
    const double explore = opts_.c_puct * std::sqrt(static_cast<double>(node.visits));
    int best = 0;
    double best_score = 0;
    bool any = false;
    for (int a = 0; a < static_cast<int>(node.child.size()); ++a) {
      const int c = node.child[a];
      if (opts_.skip_exhausted && c >= 0 && nodes_[c].exhausted) continue;
      const bool visited = c >= 0 && nodes_[c].visits > 0;
      const double q = visited ? (1 - opts_.max_weight) * nodes_[c].value_sum / nodes_[c].visits +
                                     opts_.max_weight * nodes_[c].value_max
                               : fpu;
      const double score = q + explore * node.prior[a] / (1 + (visited ? nodes_[c].visits : 0));
      if (!any || score > best_score) {
        best = a;
        best_score = score;
        any = true;
      }
    }
    return any ? best : -1;
  }

  // Backs v up the path; with skip_exhausted, marks the nodes below which everything has been
  // evaluated, from the end of the path (at depth `root_depth` + its index) up.
  void finish(double v, std::size_t root_depth) {
    backup(v);
    if (!opts_.skip_exhausted) return;
    for (std::size_t i = path_.size(); i-- > 0;) {
      Node& node = nodes_[path_[i]];
      bool done = node.evaluated && root_depth + i == static_cast<std::size_t>(n_);
      if (!done && node.expanded) {
        done = true;
        for (int c : node.child) done = done && c >= 0 && nodes_[c].exhausted;
      }
      if (!done) break;
      node.exhausted = true;
    }
  }

  void backup(double v) {
    for (int s : path_) {
      nodes_[s].value_max = nodes_[s].visits == 0 ? v : std::max(nodes_[s].value_max, v);
      nodes_[s].visits += 1;
      nodes_[s].value_sum += v;
    }
  }

  DecisionProblem& problem_;
  const MctsOptions& opts_;
  int n_;
  std::mt19937_64 rng_;
  std::vector<Node> nodes_;  // nodes_[0] is the root of the whole tree
  std::vector<int> prefix_;  // scratch: the decisions of the node being worked on
  std::vector<int> path_;    // scratch: the nodes of the current simulation, root first
  bool stopped_ = false;
  int simulations_ = 0;
  int evaluations_ = 0;
  bool have_best_ = false;
  double best_value_ = 0;
  std::vector<int> best_;
};

// Walks greedily from node s (decisions `prefix`) to full depth and evaluates the end.
void complete_greedily(Search& search, int s, std::vector<int> prefix) {
  while (static_cast<int>(prefix.size()) < search.depth()) {
    const auto [a, c] = search.greedy_step(s, prefix);
    prefix.push_back(a);
    s = c;
  }
  search.evaluate_at(s, prefix);
}

}  // namespace

MctsResult mcts(DecisionProblem& problem, const MctsOptions& opts) {
  Search search(problem, opts);
  const int root = 0;
  const std::vector<int> empty;
  search.add_root_noise(root, empty);
  for (int i = 0; i < opts.simulations && !search.should_stop(); ++i) {
    if (opts.skip_exhausted && search.exhausted(root)) break;
    search.simulate(root, empty);
  }
  const bool complete_found = search.have_best();
  if (!complete_found) complete_greedily(search, root, empty);
  MctsResult r = search.result(complete_found);
  std::vector<int> prefix;
  for (int s = root; s >= 0 && static_cast<int>(prefix.size()) < search.depth();) {
    auto t = search.target(s, prefix);
    if (!t) break;
    r.policy.push_back(std::move(*t));
    const int a = r.decisions[prefix.size()];
    prefix.push_back(a);
    s = search.child_of(s, a);
  }
  return r;
}

MctsResult mcts_stepwise(DecisionProblem& problem, const MctsOptions& opts) {
  Search search(problem, opts);
  const int n = search.depth();
  int root = 0;
  std::vector<int> prefix;
  std::vector<PolicyTarget> policy;
  int remaining = std::max(opts.simulations, 0);
  for (int k = 0; k < n; ++k) {
    search.add_root_noise(root, prefix);
    const int step = (remaining + (n - k) - 1) / (n - k);
    for (int i = 0; i < step && !search.should_stop(); ++i, --remaining) {
      if (opts.skip_exhausted && search.exhausted(root)) break;
      search.simulate(root, prefix);
    }
    if (auto t = search.target(root, prefix)) policy.push_back(std::move(*t));
    const auto [a, c] = search.greedy_step(root, prefix);
    prefix.push_back(a);
    root = c;
  }
  // With n == 0 the root is the whole sequence: its simulations are spent on it here.
  for (int i = 0; n == 0 && i < remaining && !search.should_stop(); ++i)
    search.simulate(root, prefix);
  const bool complete_found = search.have_best();
  if (!complete_found) search.evaluate_at(root, prefix);
  MctsResult r = search.result(complete_found);
  r.policy = std::move(policy);
  return r;
}

}  // namespace hetplan::search

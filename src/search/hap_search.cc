// The A* search over sharding programs (see hap.h).
//
// Units are decided in index order. The state after deciding units 0..k-1 is k and the choices of
// the "live" decided units, those with an edge to an undecided one: nothing else bears on what the
// rest of the program costs. Where the live sets are narrow (a CNN's chain of ops with its residual
// and branch edges, a transformer's units merged over its blocks), a backward dynamic program over
// these states gives each one's exact cost to go without the memory limits; A* takes that as its
// heuristic (admissible: the limits only remove programs), so without limits it walks straight to
// the optimum, and with them it expands only what the limits push it to. Where the states are too
// many to enumerate, the heuristic is the undecided units at their cheapest choice, with no
// communication.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <queue>
#include <unordered_map>

#include "hetplan/search/hap.h"

namespace hetplan::search {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

// Whether resources `use`, plus the least the undecided units add (`reserve`), fit.
bool within(const SpmdInstance& inst, const std::vector<double>& use,
            const std::vector<double>& reserve) {
  for (std::size_t r = 0; r < inst.capacity.size(); ++r)
    if (use[r] + reserve[r] > inst.capacity[r] * (1 + 1e-12) + 1e-9) return false;
  return true;
}

// The levels of the search: which decided units are live after k decisions, how a level's live
// choices follow from the one before, and the edges each unit closes.
struct Levels {
  int n = 0;
  std::vector<std::vector<int>> live;  // [k]: live units after deciding units < k, ascending
  // [k] for k >= 1: per live[k][i], its position in live[k - 1], or -1 for unit k - 1 itself.
  std::vector<std::vector<int>> from;
  // [k]: per edge e closed by deciding unit k (e.b == k), e and the position of e.a in live[k].
  std::vector<std::vector<std::pair<const SpmdEdge*, int>>> closing;
  std::vector<std::vector<std::int64_t>> stride;  // [k]: mixed radix of live[k]'s choices
  std::vector<std::int64_t> states;               // [k]: product of live[k]'s choice counts
  std::vector<std::vector<double>> togo;          // [k][state]; empty when too many states

  Levels(const SpmdInstance& inst, std::int64_t max_states)
      : n(static_cast<int>(inst.unit_cost.size())) {
    std::vector<int> last_use(static_cast<std::size_t>(n), -1);
    for (const auto& e : inst.edges) last_use[e.a] = std::max(last_use[e.a], e.b);
    live.resize(n + 1);
    from.resize(n + 1);
    closing.resize(n);
    stride.resize(n + 1);
    states.assign(n + 1, 1);
    bool tabulate = true;
    std::int64_t total = 0;
    for (int k = 0; k <= n; ++k) {
      if (k > 0) {
        for (int u : live[k - 1])
          if (last_use[u] >= k) live[k].push_back(u);
        if (last_use[k - 1] >= k) live[k].push_back(k - 1);
        for (int u : live[k]) {
          const auto at = std::find(live[k - 1].begin(), live[k - 1].end(), u);
          from[k].push_back(at == live[k - 1].end() ? -1
                                                    : static_cast<int>(at - live[k - 1].begin()));
        }
      }
      for (int u : live[k]) {
        stride[k].push_back(states[k]);
        const auto c = static_cast<std::int64_t>(inst.unit_cost[u].size());
        if (states[k] > max_states / std::max<std::int64_t>(c, 1))
          tabulate = false;  // also keeps the product from overflowing
        else
          states[k] *= c;
      }
      total += states[k];
    }
    for (const auto& e : inst.edges) {
      const auto& l = live[e.b];
      closing[e.b].push_back(
          {&e, static_cast<int>(std::find(l.begin(), l.end(), e.a) - l.begin())});
    }
    if (tabulate && total <= max_states) tabulate_cost_to_go(inst);
  }

  std::int64_t index(int k, const std::vector<int>& choices) const {
    std::int64_t i = 0;
    for (std::size_t p = 0; p < choices.size(); ++p) i += choices[p] * stride[k][p];
    return i;
  }

  // The index in togo[k + 1] of next(k, choices, c), without building it.
  std::int64_t next_index(int k, const std::vector<int>& choices, int c) const {
    std::int64_t i = 0;
    for (std::size_t q = 0; q < from[k + 1].size(); ++q) {
      const int p = from[k + 1][q];
      i += (p < 0 ? c : choices[static_cast<std::size_t>(p)]) * stride[k + 1][q];
    }
    return i;
  }

  // The live choices after deciding unit k as c, from the live choices before.
  std::vector<int> next(int k, const std::vector<int>& choices, int c) const {
    std::vector<int> out;
    out.reserve(from[k + 1].size());
    for (int p : from[k + 1]) out.push_back(p < 0 ? c : choices[static_cast<std::size_t>(p)]);
    return out;
  }

  // Unit k's cost at choice c plus the edges it closes, given the live choices before it.
  double step_cost(const SpmdInstance& inst, int k, const std::vector<int>& choices, int c) const {
    double g = inst.unit_cost[k][c];
    for (const auto& [e, p] : closing[k]) g += e->cost[choices[static_cast<std::size_t>(p)]][c];
    return g;
  }

 private:
  void tabulate_cost_to_go(const SpmdInstance& inst) {
    togo.resize(n + 1);
    togo[n].assign(static_cast<std::size_t>(states[n]), 0.0);
    std::vector<int> choices;
    for (int k = n - 1; k >= 0; --k) {
      togo[k].assign(static_cast<std::size_t>(states[k]), kNever);
      choices.assign(live[k].size(), 0);
      for (std::int64_t s = 0; s < states[k]; ++s) {
        double best = kNever;
        for (std::size_t c = 0; c < inst.unit_cost[k].size(); ++c) {
          const int ci = static_cast<int>(c);
          const double g =
              step_cost(inst, k, choices, ci) + togo[k + 1][next_index(k, choices, ci)];
          best = std::min(best, g);
        }
        togo[k][static_cast<std::size_t>(s)] = best;
        // The next assignment in mixed-radix order (first live unit fastest).
        for (std::size_t p = 0; p < choices.size(); ++p) {
          if (++choices[p] < static_cast<int>(inst.unit_cost[live[k][p]].size())) break;
          choices[p] = 0;
        }
      }
    }
  }
};

struct KeyHash {
  std::size_t operator()(const std::vector<int>& v) const {
    std::uint64_t h = 1469598103934665603ULL;
    for (int x : v) h = (h ^ static_cast<std::uint32_t>(x)) * 1099511628211ULL;
    return static_cast<std::size_t>(h);
  }
};

}  // namespace

double program_cost(const SpmdInstance& inst, const std::vector<int>& choice) {
  double total = 0;
  for (std::size_t u = 0; u < inst.unit_cost.size(); ++u)
    total += inst.unit_cost[u][static_cast<std::size_t>(choice[u])];
  for (const auto& e : inst.edges)
    total += e.cost[static_cast<std::size_t>(choice[e.a])][static_cast<std::size_t>(choice[e.b])];
  return total;
}

SpmdProgram synthesize_program(const SpmdInstance& inst, const SpmdSearchLimits& limits) {
  const int n = static_cast<int>(inst.unit_cost.size());
  SpmdProgram out;
  if (n == 0) {
    out.complete = true;
    return out;
  }
  const Levels levels(inst, limits.max_tabulated_states);
  out.exact_heuristic = !levels.togo.empty();
  // Without the table: the units k.. at their cheapest choice, no communication.
  std::vector<double> cheapest(n + 1, 0);
  for (int k = n - 1; k >= 0; --k)
    cheapest[k] =
        cheapest[k + 1] + *std::min_element(inst.unit_cost[k].begin(), inst.unit_cost[k].end());
  auto heuristic = [&](int k, const std::vector<int>& choices) {
    return out.exact_heuristic ? levels.togo[k][static_cast<std::size_t>(levels.index(k, choices))]
                               : cheapest[k];
  };
  // reserve[k][r]: the least units k.. can add to resource r.
  const std::size_t R = inst.capacity.size();
  std::vector<std::vector<double>> reserve(n + 1, std::vector<double>(R, 0));
  for (int k = n - 1; k >= 0; --k)
    for (std::size_t r = 0; r < R; ++r) {
      double least = kNever;
      for (const auto& use : inst.unit_use[k]) least = std::min(least, use[r]);
      reserve[k][r] = reserve[k + 1][r] + least;
    }
  if (!within(inst, std::vector<double>(R, 0), reserve[0])) {
    out.feasible = false;
    return out;
  }

  // Decisions taken, each pointing to the one before it: a node's program is its chain.
  struct Step {
    std::int64_t parent;
    int choice;
  };
  std::vector<Step> steps;
  struct Node {
    double f, g;
    int k;                    // units decided
    std::int64_t step;        // its last decision in `steps` (-1: none)
    std::vector<int> live;    // choices of live[k]
    std::vector<double> use;  // resources used by units < k
  };
  auto worse = [](const Node& x, const Node& y) {
    if (x.f != y.f) return x.f > y.f;
    if (x.k != y.k) return x.k < y.k;  // deeper first among equals
    return x.step > y.step;            // then the first pushed: deterministic
  };
  std::priority_queue<Node, std::vector<Node>, decltype(worse)> open(worse);
  auto program_of = [&](std::int64_t step) {
    std::vector<int> choice;
    for (auto s = step; s >= 0; s = steps[static_cast<std::size_t>(s)].parent)
      choice.push_back(steps[static_cast<std::size_t>(s)].choice);
    std::reverse(choice.begin(), choice.end());
    return choice;
  };
  // Per state (k, live choices), the (cost, use) pairs reached, a Pareto set sorted by cost.
  struct Reached {
    double g;
    std::vector<double> use;
  };
  std::unordered_map<std::vector<int>, std::vector<Reached>, KeyHash> seen;

  const std::vector<int> none;
  open.push(Node{heuristic(0, none), 0, 0, -1, {}, std::vector<double>(R, 0)});
  Node deepest{kNever, 0, -1, -1, {}, {}};
  bool out_of_budget = false;
  while (!open.empty()) {
    Node cur = open.top();
    open.pop();
    ++out.expanded;
    if (cur.k == n) {
      out.choice = program_of(cur.step);
      out.cost = cur.g;
      out.complete = true;
      return out;
    }
    if (cur.k > deepest.k || (cur.k == deepest.k && cur.g < deepest.g)) deepest = cur;
    if (out.expanded >= limits.max_expansions ||
        (limits.stop && (out.expanded & 1023) == 0 && limits.stop())) {
      out_of_budget = true;
      break;
    }
    const int k = cur.k;
    for (std::size_t c = 0; c < inst.unit_cost[k].size(); ++c) {
      const int ci = static_cast<int>(c);
      const double g = cur.g + levels.step_cost(inst, k, cur.live, ci);
      if (g == kNever) continue;
      std::vector<double> use = cur.use;
      for (std::size_t r = 0; r < R; ++r) use[r] += inst.unit_use[k][c][r];
      if (!within(inst, use, reserve[k + 1])) continue;
      std::vector<int> live = levels.next(k, cur.live, ci);
      const double f = g + heuristic(k + 1, live);
      if (f == kNever) continue;
      std::vector<int> key;
      key.reserve(live.size() + 1);
      key.push_back(k + 1);
      key.insert(key.end(), live.begin(), live.end());
      auto& reached = seen[std::move(key)];
      // Only those reached as cheaply can dominate. With one resource their use falls as g grows,
      // so the last of them decides.
      auto dominates = [&](const Reached& o) {
        for (std::size_t r = 0; r < R; ++r)
          if (o.use[r] > use[r]) return false;
        return true;
      };
      const auto cheaper = std::upper_bound(reached.begin(), reached.end(), g,
                                            [](double v, const Reached& o) { return v < o.g; });
      const bool dominated = R <= 1 ? cheaper != reached.begin() && dominates(*(cheaper - 1))
                                    : std::any_of(reached.begin(), cheaper, dominates);
      if (dominated) continue;
      // What the new one dominates (reached at g or more, using as much or more) goes: it can no
      // longer be the only one to dominate a later arrival.
      auto costlier = std::lower_bound(reached.begin(), reached.end(), g,
                                       [](const Reached& o, double v) { return o.g < v; });
      const auto kept = std::remove_if(costlier, reached.end(), [&](const Reached& o) {
        for (std::size_t r = 0; r < R; ++r)
          if (o.use[r] < use[r]) return false;
        return true;
      });
      reached.erase(kept, reached.end());
      reached.insert(std::upper_bound(reached.begin(), reached.end(), g,
                                      [](double v, const Reached& o) { return v < o.g; }),
                     Reached{g, use});
      steps.push_back({cur.step, ci});
      open.push(Node{f, g, k + 1, static_cast<std::int64_t>(steps.size()) - 1, std::move(live),
                     std::move(use)});
    }
  }
  if (deepest.k < 0 || !out_of_budget) {
    out.feasible = false;  // the queue ran dry: no program fits
    return out;
  }
  // Out of budget: complete the deepest partial program greedily (by the cost to go where it is
  // known), keeping within the limits where some choice does.
  std::vector<int> choice = program_of(deepest.step);
  std::vector<int> live = deepest.live;
  std::vector<double> use = deepest.use;
  for (int k = static_cast<int>(choice.size()); k < n; ++k) {
    int best = -1;
    double best_f = kNever;
    bool best_fits = false;
    for (std::size_t c = 0; c < inst.unit_cost[k].size(); ++c) {
      const int ci = static_cast<int>(c);
      std::vector<double> after = use;
      for (std::size_t r = 0; r < R; ++r) after[r] += inst.unit_use[k][c][r];
      const bool fits = within(inst, after, reserve[k + 1]);
      const double f =
          levels.step_cost(inst, k, live, ci) + heuristic(k + 1, levels.next(k, live, ci));
      if (best < 0 || (fits && !best_fits) || (fits == best_fits && f < best_f)) {
        best = ci;
        best_f = f;
        best_fits = fits;
      }
    }
    for (std::size_t r = 0; r < R; ++r) use[r] += inst.unit_use[k][best][r];
    live = levels.next(k, live, best);
    choice.push_back(best);
  }
  out.choice = choice;
  out.cost = program_cost(inst, choice);
  out.complete = false;
  return out;
}

}  // namespace hetplan::search

// The A* search over sharding programs (see hap.h).
#include <algorithm>
#include <limits>
#include <map>
#include <queue>

#include "hetplan/search/hap.h"

namespace hetplan::search {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

// Cost of edge e at the given choices of its two units.
double edge_cost(const SpmdEdge& e, const std::vector<int>& choice) {
  return e.cost[static_cast<std::size_t>(choice[e.a])][static_cast<std::size_t>(choice[e.b])];
}

// Whether resources `use`, plus the least the undecided units add (`reserve`), fit.
bool within(const SpmdInstance& inst, const std::vector<double>& use,
            const std::vector<double>& reserve) {
  for (std::size_t r = 0; r < inst.capacity.size(); ++r)
    if (use[r] + reserve[r] > inst.capacity[r] * (1 + 1e-12) + 1e-9) return false;
  return true;
}

}  // namespace

double program_cost(const SpmdInstance& inst, const std::vector<int>& choice) {
  double total = 0;
  for (std::size_t u = 0; u < inst.unit_cost.size(); ++u)
    total += inst.unit_cost[u][static_cast<std::size_t>(choice[u])];
  for (const auto& e : inst.edges) total += edge_cost(e, choice);
  return total;
}

SpmdProgram synthesize_program(const SpmdInstance& inst, long long max_expansions) {
  const int n = static_cast<int>(inst.unit_cost.size());
  SpmdProgram out;
  if (n == 0) {
    out.complete = true;
    return out;
  }
  // Edges by their later unit (charged when it is decided); the last unit each unit meets.
  std::vector<std::vector<const SpmdEdge*>> closing(n);
  std::vector<int> last_use(n, -1);
  for (const auto& e : inst.edges) {
    closing[e.b].push_back(&e);
    last_use[e.a] = std::max(last_use[e.a], e.b);
  }
  // h[k]: the units k.. at their cheapest choice, no communication (admissible: costs are >= 0).
  std::vector<double> h(n + 1, 0);
  for (int k = n - 1; k >= 0; --k)
    h[k] = h[k + 1] + *std::min_element(inst.unit_cost[k].begin(), inst.unit_cost[k].end());
  // reserve[k][r]: the least units k.. can add to resource r.
  const std::size_t R = inst.capacity.size();
  std::vector<std::vector<double>> reserve(n + 1, std::vector<double>(R, 0));
  for (int k = n - 1; k >= 0; --k)
    for (std::size_t r = 0; r < R; ++r) {
      double least = kNever;
      for (const auto& use : inst.unit_use[k]) least = std::min(least, use[r]);
      reserve[k][r] = reserve[k + 1][r] + least;
    }

  struct Node {
    double f, g;
    int k;                    // units decided
    std::vector<int> choice;  // for units < k
    std::vector<double> use;  // resources used by units < k
  };
  auto worse = [](const Node& x, const Node& y) {
    if (x.f != y.f) return x.f > y.f;
    if (x.k != y.k) return x.k < y.k;  // deeper first among equals
    return x.choice > y.choice;        // then a fixed order: deterministic
  };
  std::priority_queue<Node, std::vector<Node>, decltype(worse)> open(worse);
  // The state: k and the choices of decided units still joined to an undecided one.
  struct Reached {
    double g;
    std::vector<double> use;
  };
  std::map<std::pair<int, std::vector<int>>, std::vector<Reached>> seen;
  auto state_of = [&](int k, const std::vector<int>& choice) {
    std::vector<int> live;
    for (int u = 0; u < k; ++u)
      if (last_use[u] >= k) live.push_back(u * 64 + choice[u]);
    return std::make_pair(k, std::move(live));
  };
  if (!within(inst, std::vector<double>(R, 0), reserve[0])) {
    out.feasible = false;
    return out;
  }
  open.push(Node{h[0], 0, 0, {}, std::vector<double>(R, 0)});
  Node deepest{kNever, 0, -1, {}, {}};
  while (!open.empty()) {
    Node cur = open.top();
    open.pop();
    ++out.expanded;
    if (cur.k == n) {
      out.choice = std::move(cur.choice);
      out.cost = cur.g;
      out.complete = true;
      return out;
    }
    if (cur.k > deepest.k || (cur.k == deepest.k && cur.g < deepest.g)) deepest = cur;
    if (out.expanded >= max_expansions) break;
    const int k = cur.k;
    for (std::size_t c = 0; c < inst.unit_cost[k].size(); ++c) {
      double g = cur.g + inst.unit_cost[k][c];
      if (g == kNever) continue;
      std::vector<int> choice = cur.choice;
      choice.push_back(static_cast<int>(c));
      for (const SpmdEdge* e : closing[k]) g += edge_cost(*e, choice);
      std::vector<double> use = cur.use;
      for (std::size_t r = 0; r < R; ++r) use[r] += inst.unit_use[k][c][r];
      if (!within(inst, use, reserve[k + 1])) continue;
      auto key = state_of(k + 1, choice);
      auto& reached = seen[std::move(key)];
      // The state's reached set is kept a Pareto set sorted by g: only those reached as cheaply
      // can dominate. With one resource their use falls as g grows, so the last of them decides.
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
      open.push(Node{g + h[k + 1], g, k + 1, std::move(choice), std::move(use)});
    }
  }
  if (deepest.k < 0 || (R > 0 && out.expanded < max_expansions)) {
    out.feasible = false;  // the queue ran dry: no program fits
    return out;
  }
  // Out of budget: complete the deepest partial program greedily.
  std::vector<int> choice = deepest.choice;
  for (int k = static_cast<int>(choice.size()); k < n; ++k) {
    int best = 0;
    double best_g = kNever;
    for (std::size_t c = 0; c < inst.unit_cost[k].size(); ++c) {
      choice.push_back(static_cast<int>(c));
      double g = inst.unit_cost[k][c];
      for (const SpmdEdge* e : closing[k]) g += edge_cost(*e, choice);
      choice.pop_back();
      if (g < best_g) {
        best_g = g;
        best = static_cast<int>(c);
      }
    }
    choice.push_back(best);
  }
  out.choice = choice;
  out.cost = program_cost(inst, choice);
  out.complete = false;
  return out;
}

}  // namespace hetplan::search

#include "hetplan/core/graph.h"

#include <algorithm>
#include <functional>
#include <queue>

namespace hetplan {

std::optional<std::vector<int>> topological_order(const std::vector<std::vector<int>>& successors) {
  const int n = static_cast<int>(successors.size());
  std::vector<int> indegree(n, 0);
  for (const auto& succ : successors)
    for (int s : succ) ++indegree[s];
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (int i = 0; i < n; ++i)
    if (indegree[i] == 0) ready.push(i);
  std::vector<int> order;
  order.reserve(n);
  while (!ready.empty()) {
    int u = ready.top();
    ready.pop();
    order.push_back(u);
    for (int s : successors[u])
      if (--indegree[s] == 0) ready.push(s);
  }
  if (static_cast<int>(order.size()) != n) return std::nullopt;
  return order;
}

std::vector<int> find_cycle(const std::vector<std::vector<int>>& successors) {
  const int n = static_cast<int>(successors.size());
  enum : char { kWhite, kGrey, kBlack };
  std::vector<char> colour(n, kWhite);
  std::vector<int> parent(n, -1);
  // Iterative DFS: stack of (node, next successor index).
  std::vector<std::pair<int, std::size_t>> stack;
  for (int root = 0; root < n; ++root) {
    if (colour[root] != kWhite) continue;
    stack.push_back({root, 0});
    colour[root] = kGrey;
    while (!stack.empty()) {
      auto& [u, next] = stack.back();
      if (next < successors[u].size()) {
        int v = successors[u][next++];
        if (colour[v] == kGrey) {
          std::vector<int> cycle{v};
          for (int w = u; w != v; w = parent[w]) cycle.push_back(w);
          cycle.push_back(v);
          return {cycle.rbegin(), cycle.rend()};
        }
        if (colour[v] == kWhite) {
          colour[v] = kGrey;
          parent[v] = u;
          stack.push_back({v, 0});
        }
      } else {
        colour[u] = kBlack;
        stack.pop_back();
      }
    }
  }
  return {};
}

}  // namespace hetplan

namespace hetplan {

std::vector<double> upward_ranks(const std::vector<std::vector<int>>& successors,
                                 const std::vector<double>& node_cost) {
  const auto order = topological_order(successors);
  std::vector<double> rank(successors.size(), 0.0);
  if (!order) return rank;
  for (auto it = order->rbegin(); it != order->rend(); ++it) {
    double longest = 0;
    for (int s : successors[*it]) longest = std::max(longest, rank[s]);
    rank[*it] = node_cost[*it] + longest;
  }
  return rank;
}

}  // namespace hetplan

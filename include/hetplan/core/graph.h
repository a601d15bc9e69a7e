// Small generic graph algorithms over node indices 0..n-1. No DNN knowledge.
#pragma once

#include <optional>
#include <vector>

namespace hetplan {

// Adjacency by successor lists. Returns a topological order (stable: among ready nodes the smallest
// index first), or nullopt when there is a cycle.
std::optional<std::vector<int>> topological_order(const std::vector<std::vector<int>>& successors);

// One cycle as a list of nodes (first == last), or empty when the graph is acyclic.
std::vector<int> find_cycle(const std::vector<std::vector<int>>& successors);

}  // namespace hetplan

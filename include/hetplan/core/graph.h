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

// HEFT's upward rank of every node of a DAG: its own cost plus the largest rank among its
// successors (the longest path from the node to a sink, counting both ends). The graph must be
// acyclic; node_cost has one entry per node.
std::vector<double> upward_ranks(const std::vector<std::vector<int>>& successors,
                                 const std::vector<double>& node_cost);

}  // namespace hetplan

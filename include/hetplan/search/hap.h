// HAP-style SPMD synthesis (EuroSys'24): inside one replica of unlike devices, choose for every op
// how it is split (by its tensor dimension, Megatron-style; by batch; or replicated), which fixes
// the collectives between ops (sim/tensor_layout.h), and the per-device sharding ratios.
//
// The program search is a best-first (A*) search over "units", groups of ops that take one split
// together (an op of every transformer block with the same name suffix, or one op elsewhere).
// Each unit's choice has a cost (the slowest device's compute, plus, split by batch, the weight
// gradients' all-reduce), and each data edge between two units a cost per pair of choices (the
// forward conversion and its backward dual). A state is (units decided so far, the choices of
// decided units with an edge to an undecided one); states reached again at no lower cost are
// pruned, and the heuristic never overestimates (the exact cost to go without memory limits where
// the states are few enough to tabulate, else the undecided units at their cheapest choice with no
// communication), so the first complete program taken from the queue is optimal. With memory
// limits, a partial program is dropped when even the cheapest-memory completion exceeds them, and
// a state keeps every (cost, memory) pair no other reached pair dominates.
#pragma once

#include <functional>
#include <vector>

#include "hetplan/search/planners.h"

namespace hetplan::search {

struct SpmdEdge {
  int a = 0, b = 0;                       // units, a < b
  std::vector<std::vector<double>> cost;  // [choice of a][choice of b], seconds
};

struct SpmdInstance {
  std::vector<std::vector<double>> unit_cost;  // [unit][choice], seconds (infinite: not allowed)
  std::vector<SpmdEdge> edges;
  // Optional resources (device memory per device type): each unit's choice uses
  // unit_use[unit][choice][resource] (may be negative: relative to a baseline), and a program's
  // total use must stay within capacity[resource]. Empty: unconstrained.
  std::vector<std::vector<std::vector<double>>> unit_use;
  std::vector<double> capacity;
};

struct SpmdProgram {
  std::vector<int> choice;  // per unit
  double cost = 0;
  long long expanded = 0;        // states taken from the queue
  bool complete = false;         // false when the expansion budget ran out (choice is then greedy)
  bool feasible = true;          // false when no program fits the capacities
  bool exact_heuristic = false;  // the cost to go was tabulated (else the cheapest-units bound)
};

// The total cost of a choice per unit.
double program_cost(const SpmdInstance& inst, const std::vector<int>& choice);

// How far the program search goes.
struct SpmdSearchLimits {
  long long max_expansions = 2'000'000;  // states taken from the queue
  // Most states (over all levels) whose exact cost to go is tabulated; more: the weaker bound.
  long long max_tabulated_states = 4'000'000;
  std::function<bool()> stop;  // asked every 1,024 expansions whether to end early (may be empty)
};

// The cheapest program by A*. Past a limit, the deepest partial program is completed greedily
// (complete == false).
SpmdProgram synthesize_program(const SpmdInstance& inst, const SpmdSearchLimits& limits = {});

// The planner: SPMD programs over one replica spanning the cluster and over one replica per node
// (data-parallel across nodes, batch shares by the programs' speed), alternating the program search
// with a linear program for the ratios until the cost stops improving.
PlannerOutput hap(const Context& ctx);

}  // namespace hetplan::search

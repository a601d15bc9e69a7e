// Internal to the planners: shared pieces of their search spaces.
#pragma once

#include <string>
#include <vector>

#include "hetplan/search/planners.h"

namespace hetplan::search {

// A plan with the problem's model, cluster, global batch, attention and planner name, no stages
// yet.
plan::Plan base_plan(const Context& ctx, const std::string& planner);

// Transformer blocks (or, for models without them, all layers): how far a pipeline may be cut.
int block_count(const model::Model& m);

// Whether replicas a and b cost alike at the same batch share: their devices' types in order, the
// node group of their first devices, whether each lies in one node, and their tensor shares.
bool same_replica_class(const cluster::Cluster& c, const plan::Replica& a, const plan::Replica& b);

// Recomputation modes worth trying on this model (selective only where attention exists).
std::vector<cost::Recompute> recompute_modes(const model::Model& m);

// Powers of two from 1 up to and including `limit`.
std::vector<int> powers_of_two(int limit);

// Whether an even tensor-parallel degree `tp` splits m's attention heads, key/value heads and
// experts (validation's rule for replicas of even shares).
bool even_tp_splits(const model::Model& m, int tp);

}  // namespace hetplan::search

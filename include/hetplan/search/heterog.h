// HeteroG's planner: the learned network (tag_features.h, TagGuide::decode) used as a policy that
// decodes an op-level plan directly, group after group in TAG's decision order, without a tree
// search. The greedy sequence (most probable option at each step) and `samples` sequences drawn
// from the policy are simulated; the best is the answer.
#pragma once

#include <functional>

#include "hetplan/search/planners.h"
#include "hetplan/search/tag.h"

namespace hetplan::search {

struct HeterogOptions {
  int groups = 0;    // op groups; 0: default_group_count(model)
  int samples = 31;  // sequences drawn beside the greedy one
};

// Decodes one sequence: greedy when rng is null, else drawn with it. The options of each decision
// are weighted by guide.decode (masked options never taken).
std::vector<int> decode_sequence(TagProblem& problem, TagGuide& guide, std::uint64_t* rng);

// Simulates up to `count` decoded plans in the problem (the greedy one first, then drawn ones from
// a stream seeded by `seed`) until `stop` says so; returns how many it simulated. HeteroG's planner
// and TAG's decoded starts both run this, so the same seed gives them the same plans.
int evaluate_decoded(TagProblem& problem, TagGuide& guide, int count, std::uint64_t seed,
                     const std::function<bool()>& stop);

// best.ok false (with the reason) when the ops cannot be grouped. Deterministic for a seed
// (SearchOptions::seed drives the grouping and the draws; the draws use std::discrete_distribution,
// so a seed gives the same plan with the same standard library).
PlannerOutput heterog(const Context& ctx, TagGuide& guide, const HeterogOptions& options = {});

}  // namespace hetplan::search

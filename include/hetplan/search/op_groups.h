// Coarsening a model's forward op graph into groups of ops with METIS, for the op-level planners
// (TAG, HeteroG): they place and replicate groups instead of thousands of single ops. The graph
// is the forward graph, undirected: a node per op weighted by its compute time, an edge per data
// edge weighted by the bytes per sample its producer's output carries. A group's backward pass
// follows its forward ops, so the grouping covers the whole training step.
#pragma once

#include <compare>
#include <cstdint>
#include <vector>

#include "hetplan/cluster/device_type.h"
#include "hetplan/core/error.h"
#include "hetplan/cost/compute_cost.h"
#include "hetplan/model/model.h"

namespace hetplan::search {

struct OpGrouping {
  std::vector<int> group_of_op;          // group index of each op of Model::ops
  std::vector<std::vector<int>> groups;  // ops of each group, ascending; none empty
  auto operator<=>(const OpGrouping&) const = default;
};

// Splits m's ops into at most k groups, balancing the sum of op_weight per group while keeping
// the bytes per sample on edges between groups small (METIS_PartGraphRecursive, its seed = seed:
// the same inputs give the same grouping). Ops that must share a device share a group: the tied LM
// head and the embedding whose table it reads (Model::tied_owner/tied_reader) are one METIS node.
// k is clamped to the number of such nodes: k == 1 gives one group, k >= nodes one group per
// node (neither calls METIS). Groups METIS leaves empty are dropped, so there may be fewer than k.
// Groups are numbered by their smallest op index. op_weight: one value >= 0 per op (e.g.
// op_compute_weights); weights and bytes are scaled to integers for METIS, each at least 1.
// Errors: k < 1, op_weight of the wrong size or with a negative or non-finite value, METIS failing.
Result<OpGrouping> group_ops(const model::Model& m, const std::vector<double>& op_weight, int k,
                             std::uint64_t seed);

// The group count when none is given: 2 * sqrt(ops), rounded, kept within [8, 64] and at most the
// op count (at least 1). About 40 for a model of 400 ops, as TAG's groups; the square root lets
// groups grow with the model as well as their count.
int default_group_count(const model::Model& m);

// Seconds per sample of each op's forward plus backward pass on one device of type dev (whole op,
// no tensor split, m.dtype); the node weights for group_ops.
std::vector<double> op_compute_weights(const model::Model& m, const cluster::DeviceType& dev,
                                       const cost::ComputeCostModel& cost);

// Bytes per sample on the data edges between different groups: output_bytes of the producer for
// each distinct (producer, consumer) pair in different groups (METIS's edge cut, unscaled).
double cut_bytes(const model::Model& m, const OpGrouping& g);

}  // namespace hetplan::search

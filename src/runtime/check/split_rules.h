// Internal to the runtime, free of libtorch: which ops a split group of an op-level plan executes
// split by their tensor dimension, and how a split op's features fall to the ranks.
#pragma once

#include <cstdint>
#include <vector>

#include "hetplan/core/error.h"
#include "hetplan/model/model.h"

namespace hetplan::runtime::detail {

// Whether op `op` runs split by its tensor dimension: ops of ShardKind::replicated (computed whole
// on every device), convolutions by output channel, linear layers by column, row or vocabulary
// (an LM head's classes, its tied table's rows), elementwise ops, softmax and dropout on feature
// shards, the attention core (scores and context) by heads, an embedding by vocabulary (each rank
// its rows of the table, a partial sum over the ranks), a cross-entropy over classes split by
// vocabulary; or why not.
Result<bool> check_split_op(const model::Op& op);

// How a split op's output features (a row-split layer's: its input features) fall to the ranks:
// in units of `unit` features (an attention head's width where they are heads, else 1), in
// `sections` equal parts cut alike (QKV's Q, K and V), each rank taking its share of the units of
// every part (share_counts).
struct FeatureCut {
  std::int64_t unit = 1;
  std::int64_t sections = 1;
};

// Per op of m, its cut: an attention context's output and the projection that reads it by heads;
// the QKV projection its scores and context read by heads in three sections; others by feature.
std::vector<FeatureCut> feature_cuts(const model::Model& m);

}  // namespace hetplan::runtime::detail

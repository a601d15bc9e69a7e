// How a tensor lies across the devices of one tensor-parallel replica, and the collectives that
// move it between layouts. The simulator charges these on every data edge of the model graph
// inside a stage; the HAP-style planner searches over the op splits that decide them.
//
// An op reads its inputs in one layout, writes its output in another, and sends the gradient of
// its inputs back in a third (Megatron-LM: a column-split GEMM reads a replicated input, writes
// feature shards, and its input gradient is a partial sum; a row-split GEMM reads feature shards
// and writes partial sums). Where a producer's layout differs from what its consumer reads, the
// forward pass converts it; the backward pass converts the consumer's input gradient into the
// layout the producer's output gradient needs (a partial-sum output takes a replicated gradient).
#pragma once

#include <optional>

#include "hetplan/cost/collective_cost.h"
#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"

namespace hetplan::sim {

enum class Layout {
  replicated,  // every device holds all of it
  feature,     // split along the hidden/feature dimension (heads, FFN columns, vocabulary)
  partial,     // every device holds a partial sum of all of it
  sequence,    // split along the sequence (Megatron sequence parallelism)
  batch,       // split along the samples
};
const char* to_string(Layout l);

struct OpLayout {
  Layout input = Layout::replicated;
  Layout output = Layout::replicated;
  Layout input_grad = Layout::replicated;
};

// The layouts of op o under the plan's split for it and sequence parallelism.
OpLayout op_layout(const model::Op& o, plan::SplitKind split, bool sequence_parallel);

// Whether every device of a replica computes all of op o, and keeps its activations whole: split
// replicated, or an op of ShardKind::replicated split by tensor without sequence parallelism.
bool computes_whole(const model::Op& o, plan::SplitKind split, bool sequence_parallel);

// Whether every device of a replica holds all of op o's weights: split by batch (not
// batch_sharded) or replicated, or an op of ShardKind::replicated.
bool holds_whole_weights(const model::Op& o, plan::SplitKind split);

// The collective that turns a tensor in layout `from` into layout `to`; nullopt when none is
// needed (same layout, or a local slice of a replicated tensor). Partial sums become replicated by
// all-reduce, become shards by reduce-scatter; shards become replicated by all-gather and other
// shards by all-to-all.
std::optional<cost::Collective> conversion(Layout from, Layout to);

// The layout a producer needs its output's gradient in: replicated for a partial-sum output (each
// partial's gradient is the whole gradient), else the output's own layout.
Layout gradient_layout(Layout output);

}  // namespace hetplan::sim

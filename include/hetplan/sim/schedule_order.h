// The order in which one lane (a replica's devices) runs its forward and backward passes: the
// simulator models it and the runtime executes it.
#pragma once

#include <vector>

#include "hetplan/plan/plan.h"

namespace hetplan::sim {

struct PassRef {
  int chunk = 0;  // index into the lane's chunks (0 = its first stage)
  int microbatch = 0;
  bool forward = true;
  auto operator<=>(const PassRef&) const = default;
};

// The pass order of a lane that holds `num_chunks` chunks and sits at pipeline position
// `position` of `pipeline_size` positions, for `microbatches` micro-batches:
// - GPipe: every forward (micro-batch major, chunks ascending), then every backward.
// - 1F1B (one chunk): min(pipeline_size - position - 1, m) warm-up forwards, then alternating
//   forward/backward, then the remaining backwards (PipeDream-Flush / Megatron-LM).
// - Interleaved 1F1B (Megatron-LM, Narayanan et al. 2021): virtual micro-batch k maps to chunk
//   (k / P) % v (reversed for backwards) and micro-batch (k / (P v)) P + k % P; warm-up of
//   (P - position - 1) * 2 + (v - 1) * P passes. Requires m % P == 0.
std::vector<PassRef> pass_order(plan::Schedule schedule, int num_chunks, int position,
                                int pipeline_size, int microbatches);

// Largest number of micro-batches whose activations a chunk holds at once in `order`
// (forwards done, backwards not yet), per chunk.
std::vector<int> peak_inflight(const std::vector<PassRef>& order, int num_chunks);

}  // namespace hetplan::sim

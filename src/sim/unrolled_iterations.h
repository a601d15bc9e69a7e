// Internal to the simulator: iterations run back to back in one task graph, so that the next
// iteration's work can start while this one's gradients are still on the network (DLCP's
// per-layer start, plan.h's GradPriority).
#pragma once

#include <vector>

#include "task_graph.h"

namespace hetplan::sim::detail {

// A dependency from a task of one iteration to a task of the next: a layer's gradient chunk (or
// the collective that sums a tied weight's copies) before that layer's next forward pass.
struct NextIterationEdge {
  int from = 0, to = 0;  // task ids of the one-iteration graph
};

// `iterations` copies of one iteration's graph `g`, copy k's task t at k * g.tasks.size() + t.
// Each stream runs its copies in order (a dynamic stream prefers the earlier iteration's ready
// tasks); copies share g's link loads; `next` links each copy to the one after it (a chunk among
// a task's drop preds stays droppable across the edge). Drop pools: pool p of copy k is
// k * g.drop_budget.size() + p, with the same budget.
TaskGraph unroll_iterations(const TaskGraph& g, int iterations,
                            const std::vector<NextIterationEdge>& next);

}  // namespace hetplan::sim::detail

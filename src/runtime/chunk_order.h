// DLCP's gradient chunks as the runtime sends them (plan.h's GradPriority, loss_bound): which
// slice of a stage's flat gradient each chunk holds, the order chunks go in, the traffic class
// each travels in and which a loss bound lets the transport drop. A pure function of values every
// rank of a group holds alike (the layer sizes, the plan and the previous step's summed
// gradient), so that every rank orders and classes the chunks the same way without asking.
#pragma once

#include <cstdint>
#include <vector>

#include "hetplan/plan/plan.h"
#include "hetplan/runtime/emulate.h"

namespace hetplan::runtime::detail {

// Traffic classes, the most urgent first: 0 carries the first half of the gradient in priority
// order (the layers the next forward pass needs first), 1 the rest, and 2 the chunks a loss bound
// lets the transport drop. The emulated links serve them in this order (emulate.h).
inline constexpr int kTrafficClasses = kEmulatedClasses;

struct OrderedChunk {
  std::int64_t offset = 0;  // in the flat gradient (elements)
  std::int64_t numel = 0;
  int layer = 0;  // index into the layer sizes given
  int cls = 0;    // traffic class
  bool droppable = false;
};

// The chunks of a flat gradient laid out layer after layer (`layer_numel`, input side first),
// each layer cut into ceil(numel / chunk_numel) chunks (the last one smaller; a layer of no
// elements has none), in priority order: layer order, and within a layer, with layer_magnitude,
// the largest mean square first (`chunk_mean_square`: one value per chunk in layout order, as
// chunk_mean_squares returns; empty: layout order). With a loss bound, the least important chunks
// whose elements together are at most loss_bound of all are droppable (class 2): those of
// smallest mean square under layer_magnitude, else the last in priority order (never one of
// infinite mean square). priority none is
// refused by the plan's validation for a loss bound; here it orders like layer.
std::vector<OrderedChunk> order_chunks(const std::vector<std::int64_t>& layer_numel,
                                       std::int64_t chunk_numel, plan::GradPriority priority,
                                       double loss_bound,
                                       const std::vector<double>& chunk_mean_square);

// The mean square of each chunk of `flat` (layout order: by offset), for the next step's order.
// A chunk whose sum missed a part (`complete`, per chunk in the order of `chunks`, 0; empty: all
// complete) gets +infinity: it goes first in its layer next step and cannot be dropped then, so
// that no chunk is dropped twice in a row (its zero or partial sum would otherwise rank it least
// important again).
std::vector<double> chunk_mean_squares(const float* flat, const std::vector<OrderedChunk>& chunks,
                                       const std::vector<char>& complete = {});

}  // namespace hetplan::runtime::detail

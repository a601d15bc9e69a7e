// Internal to the runtime: a CNN other than the ResNets (VGG, Inception) as a stage module, its op
// graph (op_graph.h) run layer by layer, so that its stage plans run as a ResNet's do.
#pragma once

#include <memory>

#include "hetplan/model/model.h"
#include "torch_modules.h"

namespace hetplan::runtime::detail {

// The module for `m` (which must pass check/op_graph_check.h's check_layer_chain), initialised
// from the current torch seed as OpGraph initialises it. A layer's batch normalisation covers the
// stage's replicas (set_batch_group); its dropout draws the masks the op-by-op runtime draws for
// the same samples (set_rows). Full recomputation reruns each layer but the last.
std::shared_ptr<TrainModule> build_op_graph_module(const model::Model& m);

}  // namespace hetplan::runtime::detail

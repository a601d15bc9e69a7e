// Internal to the runtime, free of libtorch: whether a model can be executed op by op (every op
// says what it computes, with shapes that fit together), and the shape rules that OpGraph shares.
#pragma once

#include <cstdint>

#include "hetplan/core/error.h"
#include "hetplan/model/model.h"

namespace hetplan::runtime::detail {

// Whether every op of m says what it computes, with shapes that fit together, or the first op
// that does not and why.
Result<bool> check_op_graph(const model::Model& m);

// Whether m's op graph runs as a stage module, layer by layer (op_graph_module.h): it passes
// check_op_graph, its last layer ends with its loss, and each layer reads only its own ops'
// outputs and the one tensor a pipeline stage sends, the last op of the layer before (the first
// layer: the batch's inputs); else the first op that reads across.
Result<bool> check_layer_chain(const model::Model& m);

// Whether m's batches are images (CNNs, vision transformers).
inline bool reads_images(const model::Model& m) {
  return m.family == model::Family::cnn || m.family == model::Family::vision_transformer;
}

// Rows of a linear layer's input per sample: one per token when its output is {tokens, out}, else
// one (its input flattened, or its first token).
inline std::int64_t linear_rows_per_sample(const model::OpCompute& c) {
  return c.shape.size() == 2 ? c.shape[0] : 1;
}

// The input channels of a conv2d (its implicit GEMM's k is in * kh * kw).
std::int64_t conv_in_channels(const model::Op& op);

// The op that owns the table a linear layer's weight is tied to (an embedding), or -1.
int tied_table(const model::Model& m, const model::Op& op);

}  // namespace hetplan::runtime::detail

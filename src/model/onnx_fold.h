// Folds an ONNX graph's shape arithmetic (Shape -> Gather -> Div -> Concat -> Reshape chains,
// which exporters emit for every view of a dynamic tensor) into Constant nodes, so that ONNX
// shape inference, which propagates only some of these ops' values, can find the shapes after
// them.
#pragma once

#include <onnx/onnx_pb.h>

namespace hetplan::model::detail {

// Replaces every node whose outputs are small integer tensors computable from constants and known
// shapes by a Constant node with those values. Call it after shape inference, and infer again
// while it returns a positive count (the number of nodes folded).
int fold_shape_arithmetic(onnx::ModelProto& model);

}  // namespace hetplan::model::detail

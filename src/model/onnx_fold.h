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

// Gives each op that has no ONNX schema (a custom domain's op) and whose first output has no
// inferred shape its first input's type and shape, so that inference can go on past it. Returns
// the number of outputs given; infer again while it is positive.
int assume_unknown_op_shapes(onnx::ModelProto& model);

}  // namespace hetplan::model::detail

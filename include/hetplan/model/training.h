// The training step derived from a forward graph: each forward op gets a backward counterpart
// (gradient w.r.t. inputs and, for ops with weights, w.r.t. weights), and each parameter an
// optimizer update (Adam: fp32 master weights, two moments).
#pragma once

#include <vector>

#include "hetplan/model/model.h"

namespace hetplan::model {

enum class Phase { forward, backward, optimizer };
const char* to_string(Phase p);

struct TrainOp {
  int op = 0;  // forward op index in Model::ops
  Phase phase = Phase::forward;
  OpKind kind = OpKind::elementwise;
  // Per sample for forward and backward; per step (batch-independent) for optimizer.
  double flops = 0;
  double bytes = 0;  // bytes moved to and from memory, activations and weights together
  // The part of `bytes` that is weight traffic (weights read, fp32 gradients accumulated); it
  // does not grow with the batch, so a cost model may count it once per micro-batch.
  double weight_bytes = 0;
  GemmShape gemm;     // the dominant GEMM of this pass (backward: dgrad/wgrad have the same volume)
  double params = 0;  // optimizer only: the parameters the step updates
  // Optimizer only: the parameter tensors they are held in (a linear layer's weight and bias),
  // which an optimizer that steps tensor by tensor visits one at a time (parameter_tensors).
  int tensors = 0;
  // Forward and backward of a whole loss (is_whole_loss): `bytes` when the engine fuses it into one
  // kernel per pass (flash-attn's or Megatron-Core's fused cross entropy), which reads the 16-bit
  // logits forward and reads them and writes their gradient backward. 0 for every other op.
  double fused_bytes = 0;
};

struct TrainingGraph {
  std::vector<TrainOp> forward;    // same order as Model::ops
  std::vector<TrainOp> backward;   // reverse order of Model::ops
  std::vector<TrainOp> optimizer;  // one per op that has parameters
};

// The parameter tensors of an op with parameters, as PyTorch's modules hold them: a linear layer or
// convolution its weight and, where it has one, its bias (MoE experts: each expert's), a layernorm
// or batchnorm its scale and shift, an RMSNorm its scale, BERT's positions and ViT's class token
// their two tables, anything else one. 0 for an op without parameters.
int parameter_tensors(const Op& op);

// Whether `op` is a whole cross-entropy loss over its logits: a cross_entropy op that does not read
// a softmax op's output (an ONNX graph's LogSoftmax then NegativeLogLikelihoodLoss is the NLL
// alone).
bool is_whole_loss(const Model& m, const Op& op);

// Backward FLOPs: 2x forward for ops with weights (input and weight gradients) and for
// batched_matmul (gradients of both operands); about 1x for memory-bound ops.
TrainingGraph derive_training_graph(const Model& m);

}  // namespace hetplan::model

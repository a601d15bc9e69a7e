#include "hetplan/model/training.h"

#include <algorithm>

namespace hetplan::model {
namespace {

// Adam with mixed precision, per parameter and step: read the fp32 gradient (4 bytes), read and
// write the fp32 master weight and both fp32 moments (3 x 8), write the 16-bit weight (2).
constexpr double kAdamBytesPerParam = 4 + 3 * 8 + 2;
// Weight decay 2, first moment 3, second moment 4, sqrt, epsilon, divide, learning rate, update.
constexpr double kAdamFlopsPerParam = 14;
// Backward pass per weight: read the 16-bit weight, read-modify-write its fp32 gradient
// (accumulated across micro-batches, as Megatron-LM's main_grad).
constexpr double kFp32GradBytes = 2 * 4;

// The loss as PyTorch computes it (F.cross_entropy under autocast; Megatron-LM's
// vocabulary-parallel loss after its .float()), per logit. Forward: the cast of 16-bit logits to
// fp32 (read the logit, write 4 bytes), log-softmax reading each fp32 row twice (its max and sum of
// exponentials, then its output) and writing 4. Backward: the NLL gradient written (4: zeros, then
// a scatter), log-softmax's backward reading the gradient twice (its sum, then the output) and its
// saved output once and writing 4, and the cast's backward (read 4, write the logit). fp32 logits
// skip both casts. A loss reading a softmax op's output (an ONNX graph's LogSoftmax, then
// NegativeLogLikelihoodLoss) is the NLL alone, priced as any other op: that op is the log-softmax.
constexpr double kLogSoftmaxForwardBytes = 2 * 4 + 4;
constexpr double kLogSoftmaxBackwardBytes = 4 + 3 * 4 + 4;

bool is_gemm(OpKind k) {
  return k == OpKind::matmul || k == OpKind::batched_matmul || k == OpKind::conv2d ||
         k == OpKind::moe_router;
}

}  // namespace

bool is_whole_loss(const Model& m, const Op& op) {
  return op.kind == OpKind::cross_entropy &&
         std::none_of(op.inputs.begin(), op.inputs.end(), [&](int in) {
           return m.ops[static_cast<std::size_t>(in)].kind == OpKind::softmax;
         });
}

int parameter_tensors(const Op& op) {
  if (op.params <= 0) return 0;
  switch (op.kind) {
    case OpKind::layernorm:
    case OpKind::batchnorm:
      return 2;
    case OpKind::rmsnorm:
      return 1;
    default:
      break;
  }
  if (op.compute.fn == OpFn::positions || op.compute.fn == OpFn::class_token) return 2;
  if ((op.kind == OpKind::matmul || op.kind == OpKind::conv2d) && op.gemm.k > 0 && op.gemm.n > 0) {
    // Weights of k x n per matrix (a convolution's k holds its window); a bias beside them where
    // the parameters are more. A head tied to the embedding owns its bias alone.
    const std::int64_t matrices =
        op.shard == ShardKind::expert && op.gemm.batch_count > 1 ? op.gemm.batch_count : 1;
    const std::int64_t weights = matrices * op.gemm.k * op.gemm.n;
    if (op.params < weights) return 1;
    return static_cast<int>(matrices * (op.params > weights ? 2 : 1));
  }
  return 1;
}

const char* to_string(Phase p) {
  switch (p) {
    case Phase::forward:
      return "forward";
    case Phase::backward:
      return "backward";
    case Phase::optimizer:
      return "optimizer";
  }
  return "?";
}

// Forward: the op's own figures plus its weights read once.
// Backward of a GEMM: the input gradient (dY W^T) and the weight gradient (X^T dY) each cost
// the forward FLOPs; they read dY twice and X once and write dX, so 2 x written + 2 x read.
// (batched_matmul has two activation operands: the same count.) Backward of any other op: about
// its forward FLOPs, reading dY and its input, writing dX. An embedding's backward scatter-adds
// one gradient element per output element.
TrainingGraph derive_training_graph(const Model& m) {
  TrainingGraph tg;
  const double act = dtype_bytes(m.dtype);
  tg.forward.reserve(m.ops.size());
  tg.backward.reserve(m.ops.size());
  for (std::size_t i = 0; i < m.ops.size(); ++i) {
    const Op& op = m.ops[i];
    const double weights = static_cast<double>(op.params + op.tied_params);
    TrainOp f;
    f.op = static_cast<int>(i);
    f.phase = Phase::forward;
    f.kind = op.kind;
    f.flops = op.flops;
    f.weight_bytes = act * weights;
    f.bytes = op.bytes_read + op.bytes_written + f.weight_bytes;
    if (is_whole_loss(m, op)) {
      const double logits = op.bytes_read / act;
      const double cast = act < 4 ? act + 4 : 0;  // 16-bit logits to fp32
      f.bytes = logits * (cast + kLogSoftmaxForwardBytes) + op.bytes_written;
      f.fused_bytes = logits * act + op.bytes_written;
    }
    f.gemm = op.gemm;
    tg.forward.push_back(f);
    if (op.params > 0) {
      TrainOp o;
      o.op = f.op;
      o.phase = Phase::optimizer;
      o.kind = op.kind;
      o.flops = kAdamFlopsPerParam * static_cast<double>(op.params);
      o.bytes = kAdamBytesPerParam * static_cast<double>(op.params);
      o.params = static_cast<double>(op.params);
      o.tensors = parameter_tensors(op);
      tg.optimizer.push_back(o);
    }
  }
  for (std::size_t r = m.ops.size(); r-- > 0;) {
    const Op& op = m.ops[r];
    TrainOp b = tg.forward[r];
    b.phase = Phase::backward;
    b.weight_bytes = static_cast<double>(op.params + op.tied_params) * (act + kFp32GradBytes);
    if (is_gemm(op.kind)) {
      b.flops = 2 * op.flops;
      b.bytes = 2 * op.bytes_written + 2 * op.bytes_read + b.weight_bytes;
    } else if (is_whole_loss(m, op)) {
      const double logits = op.bytes_read / act;
      b.bytes = logits * ((act < 4 ? 4 + act : 0) + kLogSoftmaxBackwardBytes);
      b.fused_bytes = 2 * logits * act;
    } else {
      b.flops = op.kind == OpKind::embedding ? op.bytes_written / act : op.flops;
      b.bytes = op.bytes_written + 2 * op.bytes_read + b.weight_bytes;
    }
    tg.backward.push_back(b);
  }
  return tg;
}

}  // namespace hetplan::model

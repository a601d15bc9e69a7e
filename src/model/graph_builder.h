// Building blocks for the zoo builders: a builder that appends ops to layers, and factories for
// the common ops with their per-sample costs. Callers set saved_bytes themselves, next to the
// reasoning for it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hetplan/model/model.h"

namespace hetplan::model::detail {

// FLOPs per element of the memory-bound ops (a multiply-add counts 2). Conventions rather than
// measurements; they are well under 1% of a transformer's FLOPs, which its GEMMs dominate.
inline constexpr double kLayerNormFlops = 8;     // mean, variance, normalise, scale, shift
inline constexpr double kRmsNormFlops = 4;       // square-sum, rsqrt scale, weight
inline constexpr double kBatchNormFlops = 7;     // batch mean and variance, normalise, affine
inline constexpr double kSoftmaxFlops = 4;       // scale and mask fused in, max, exp, sum, divide
inline constexpr double kGeluFlops = 8;          // tanh approximation
inline constexpr double kSiluMulFlops = 5;       // x * sigmoid(x) * up
inline constexpr double kDropoutFlops = 1;       // multiply by the scaled mask
inline constexpr double kAddFlops = 1;           // residual add, bias add
inline constexpr double kRopeFlops = 3;          // x * cos + rotate(x) * sin
inline constexpr double kCrossEntropyFlops = 5;  // max, exp, sum, log, pick (per logit)
inline constexpr double kReluFlops = 1;
inline constexpr double kMaskBytes = 1;     // dropout masks are kept as one byte per element
inline constexpr double kFp32Bytes = 4;     // fp32 logits of the loss, router probabilities
inline constexpr double kTokenIdBytes = 8;  // int64 token ids

class GraphBuilder {
 public:
  explicit GraphBuilder(Model& m) : m_(m) {}
  double act() const { return dtype_bytes(m_.dtype); }  // bytes per activation element
  void begin_layer(std::string name, LayerKind kind);
  int add(Op op);  // appends to the current layer; returns the op's index
  const Op& op(int i) const { return m_.ops[static_cast<std::size_t>(i)]; }

 private:
  Model& m_;
};

// What an op computes: fn, its per-sample output shape, bias and dropout probability.
OpCompute op_compute(OpFn fn, std::vector<std::int64_t> shape, bool bias = false, double drop = 0);

// y = x W (+ b) on `tokens` rows: [tokens x in] * [in x out].
Op linear(std::string name, std::vector<int> inputs, double act, std::int64_t tokens,
          std::int64_t in, std::int64_t out, bool bias, ShardKind shard);

// An op that reads `operands` tensors of `elements` elements and writes one.
Op pointwise(std::string name, OpKind kind, ShardKind shard, std::vector<int> inputs, double act,
             double elements, double flops_per_element, int operands = 1);

// batch independent [m x k] * [k x n] products of two activations.
Op batched_matmul(std::string name, std::vector<int> inputs, double act, std::int64_t batch,
                  std::int64_t m, std::int64_t n, std::int64_t k);

// Layernorm or RMSNorm over `tokens` rows of `width`, with its scale (and for layernorm shift).
Op norm(std::string name, OpKind kind, std::vector<int> inputs, double act, std::int64_t tokens,
        std::int64_t width);

// Cross-entropy over `tokens` rows of `classes` logits; keeps fp32 logits for the backward pass
// (Korthikanti et al.: 4*s*v bytes).
Op cross_entropy(std::string name, ShardKind shard, std::vector<int> inputs, double act,
                 std::int64_t tokens, std::int64_t classes);

// Dropout over `elements`: writes the output and a one-byte mask, keeps the mask.
Op dropout(std::string name, ShardKind shard, std::vector<int> inputs, double act, double elements);

}  // namespace hetplan::model::detail

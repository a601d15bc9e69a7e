// The DNN graph: operators of the forward pass with their per-sample costs, grouped into layers.
// Everything batch-dependent is given per sample (one sequence or one image), so the cost of a
// micro-batch of b samples is b times the per-sample figure; parameter costs do not scale with b.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hetplan::model {

// tf32: fp32 tensors whose GEMMs run on the tensor cores' TF32 path (Ampere and later; PyTorch's
// allow_tf32), everything else as fp32.
enum class DType { fp32, fp16, bf16, fp8, int32, int64, tf32 };
int dtype_bytes(DType t);
const char* to_string(DType t);
std::optional<DType> parse_dtype(std::string_view s);  // inverse of to_string

// The kind of computation; the cost model keys its efficiency curves and calibration on it.
enum class OpKind {
  matmul,          // dense GEMM with a weight (linear layers, LM head)
  batched_matmul,  // activation x activation (attention scores QK^T, scores x V)
  softmax,
  layernorm,
  rmsnorm,
  elementwise,  // gelu, silu*mul, residual add, dropout, bias, rope, scaling
  embedding,    // table lookup (+ position embedding)
  conv2d,
  pool,
  batchnorm,
  cross_entropy,  // loss (with the final softmax)
  moe_router,     // gate GEMM + top-k
};
const char* to_string(OpKind k);
std::optional<OpKind> parse_op_kind(std::string_view s);

// How the op splits across the ranks of a tensor-parallel group (Megatron-LM style).
enum class ShardKind {
  replicated,  // each rank computes all of it (layernorm without sequence parallelism)
  column,      // weight split by output features; output sharded, no communication
  row,      // weight split by input features; output partial sums, all-reduce (or reduce-scatter)
  heads,    // follows a column split (attention core, activation); no communication
  vocab,    // embedding or LM head split along the vocabulary
  expert,   // MoE experts spread over ranks; tokens move by all-to-all
  channel,  // convolution split by output channels (output sharded)
};
const char* to_string(ShardKind k);
std::optional<ShardKind> parse_shard_kind(std::string_view s);

// GEMM dimensions per sample: batch_count independent [m x k] * [k x n] products.
struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0, batch_count = 0;
  auto operator<=>(const GemmShape&) const = default;
};

// What an op computes from its inputs, beyond its costs: enough for a runtime to execute the graph
// op by op (the CNN, MLP, BERT and GPT builders set it). none: only the costs are known.
enum class OpFn {
  none,
  conv2d,     // weight [out, in, kh, kw] (+ bias), window
  batchnorm,  // per-channel scale and shift over the batch's statistics
  relu,
  add,                // the sum of its two inputs (a residual connection)
  concat,             // its inputs joined along channels, in input order
  max_pool,           // window
  avg_pool,           // window, padding counted in the average (PyTorch's default)
  adaptive_avg_pool,  // to the output shape's h x w
  linear,             // the input flattened per sample, weight [out, in] (+ bias)
  dropout,            // drops elements with probability `drop`, scales the rest by 1/(1-drop)
  cross_entropy,      // of its logits against the sample's class (or each token's label: masked
                      // language modelling), summed over the samples
  // Transformers (per sample, a sequence of s tokens of h features: shape {s, h}). A linear layer
  // with a {tokens, out} shape applies to each token; one with an {out} shape reading {s, k}
  // applies to the first token ([CLS] pooling).
  embedding,  // rows of a [vocab, h] table looked up by the sample's token ids
  positions,  // adds a learned row per position and per token type (the first half of
              // the sequence is sentence A, type 0; the second, type 1): BERT's tables
  layernorm,  // over the last dimension, with a scale and a shift
  gelu,       // exact (erf)
  tanh,
  softmax,           // over the last dimension
  attention_scores,  // Q K^T / sqrt(d) per head, from a [s, 3 * heads * d] QKV input: {heads, s, s}
  attention_context,  // probabilities [heads, s, s] times V (QKV's last third): {s, heads * d}
  learned_positions,  // adds the first s rows of a [positions, h] table (GPT's positions)
  // A ViT's patches [h, p, q] (a patch convolution's output) as p * q tokens after a learned class
  // token, plus a learned row per position: {p * q + 1, h}; weights positions [s, h] and the
  // class token [1, h].
  class_token,
};
inline constexpr OpFn kLastOpFn = OpFn::class_token;
const char* to_string(OpFn f);
std::optional<OpFn> parse_op_fn(std::string_view s);

struct OpCompute {
  OpFn fn = OpFn::none;
  std::vector<std::int64_t> shape;  // per-sample output shape: {c, h, w} or {features}
  // conv2d and pools: kernel, stride and zero padding, per dimension (h, w).
  std::int64_t kernel_h = 1, kernel_w = 1, stride = 1, pad_h = 0, pad_w = 0;
  bool bias = false;    // conv2d, linear
  double drop = 0;      // dropout
  bool causal = false;  // attention_scores: each token sees only itself and the tokens before it
  auto operator<=>(const OpCompute&) const = default;
};

struct Op {
  std::string name;  // unique, dotted: "layers.3.attn.qkv"
  OpKind kind = OpKind::elementwise;
  ShardKind shard = ShardKind::replicated;
  int layer = 0;            // index into Model::layers
  std::vector<int> inputs;  // producer ops (data edges)
  // Forward pass, per sample:
  double flops = 0;          // FLOPs (a multiply-add counts 2)
  double bytes_read = 0;     // activation bytes read (weights excluded, see params)
  double bytes_written = 0;  // activation bytes written
  // Bytes of the output tensor its consumers read, when less than bytes_written (a dropout also
  // writes its mask); 0: bytes_written. What moves when the output changes layout.
  double output_bytes = 0;
  // Activation bytes kept for the backward pass without recomputation. Each stored tensor is
  // counted once, on the op whose split it follows, so that dividing the saved bytes of sharded
  // (non-replicated) ops by the tensor-parallel size gives Korthikanti et al.'s
  // s*h*(10 + 24/t + 5*a*s/(h*t)) per GPT layer. E.g. the QKV GEMM holds Q, K and V (its output,
  // which the attention core needs and which selective recomputation keeps), a layernorm holds its
  // input and its output (the next GEMM's input), a dropout holds its 1-byte mask.
  double saved_bytes = 0;
  std::int64_t params = 0;  // parameter count (weights and biases)
  GemmShape gemm;           // set for matmul, batched_matmul, moe_router, conv2d (implicit GEMM)
  // Part of the attention core (QK^T, softmax, its dropout, scores x V) whose activations selective
  // recomputation drops and recomputes (Korthikanti et al. 2022).
  bool attention_core = false;
  // Weights this op uses but another op owns and counts in its params (a language-model head
  // tied to the input embedding). They are read like weights, but are neither counted in
  // Model::parameters() nor given an optimizer step here.
  std::int64_t tied_params = 0;
  OpCompute compute;  // what it computes, where known
  auto operator<=>(const Op&) const = default;
};

enum class LayerKind { embedding, transformer, head, conv_block, other };
const char* to_string(LayerKind k);
std::optional<LayerKind> parse_layer_kind(std::string_view s);

// A contiguous run of ops; the unit a pipeline stage boundary may fall between.
struct Layer {
  std::string name;  // "embedding", "layers.3", "head"
  LayerKind kind = LayerKind::other;
  int first_op = 0;
  int num_ops = 0;
  auto operator<=>(const Layer&) const = default;
};

enum class Family { decoder_lm, encoder, vision_transformer, moe_lm, cnn, mlp };
const char* to_string(Family f);
std::optional<Family> parse_family(std::string_view s);

struct Model {
  std::string name;  // preset name or the spec it was built from
  Family family = Family::decoder_lm;
  DType dtype = DType::bf16;  // compute/activation dtype (mixed precision: fp32 master weights)
  // Architecture parameters (0 where not applicable), as the builders and the memory model use
  // them.
  int seq_len = 0;  // tokens per sample (patches + cls for ViT)
  int vocab = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;  // grouped-query attention; == heads for multi-head attention
  int head_dim = 0;  // per attention head; heads * head_dim == hidden except in a few published
                     // configurations (GPT-3 13B: hidden 5140, 40 heads of 128)
  int ffn_hidden = 0;
  int num_blocks = 0;  // transformer blocks (or CNN blocks)
  int experts = 0;     // MoE experts per layer
  int top_k = 0;       // experts per token
  int image_size = 0;  // vision models
  int num_classes = 0;
  std::vector<Op> ops;  // in a topological order: every input index is smaller than the op's own
  std::vector<Layer> layers;

  // Bytes per sample of op i's output tensor (Op::output_bytes, or bytes_written when 0).
  double output_bytes(int op) const;
  std::int64_t parameters() const;                 // sum of Op::params
  std::int64_t layer_parameters(int layer) const;  // sum of Op::params over one layer's ops
  // The op whose weights tied ops (Op::tied_params, an LM head) read: the word embedding, the
  // first op of kind embedding split by vocabulary; -1 when there is none.
  int tied_owner() const;
  // The tied op that reads tied_owner()'s table (an LM head): the last op with tied_params; -1 when
  // there is none, or no table to read.
  int tied_reader() const;
  // The layer that holds op `op` (layers cover the ops in order); -1 for none.
  int layer_of(int op) const;
  // Bytes per sample the layer's last op writes: what crosses a pipeline boundary after it.
  double layer_output_bytes(int layer) const;
  double forward_flops_per_sample() const;  // sum of Op::flops
  bool is_language_model() const;           // tokens per sample are meaningful for throughput
  bool causal_attention() const;  // each token attends to the tokens before it (decoder LMs)
  auto operator<=>(const Model&) const = default;
};

}  // namespace hetplan::model

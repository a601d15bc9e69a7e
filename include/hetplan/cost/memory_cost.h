// Per-device memory of a training step: parameters, gradients, optimizer states (mixed-precision
// Adam: 2 + 2 + 12 bytes per parameter in fp16, 2 + 4 + 12 in bf16, split by ZeRO stage),
// activations by pipeline schedule and
// recomputation mode, and working buffers.
#pragma once

#include <string>
#include <vector>

#include "hetplan/core/units.h"
#include "hetplan/model/model.h"

namespace hetplan::cost {

enum class Recompute { none, selective, full };
const char* to_string(Recompute r);
// Whether full recomputation keeps only a layer of this kind's input and reruns the layer whole
// (transformer blocks and convolution blocks; embeddings and heads keep their activations).
inline bool recomputes_whole_layer(model::LayerKind k) {
  return k == model::LayerKind::transformer || k == model::LayerKind::conv_block;
}
// Whether the backward pass reruns op o of model m's forward pass: under full recomputation the
// ops of the layers it reruns whole, under selective the attention cores (Megatron-LM's count:
// the LM head is not recomputed).
inline bool recomputes(Recompute r, const model::Model& m, const model::Op& o) {
  if (r == Recompute::selective) return o.attention_core;
  return r == Recompute::full && o.layer >= 0 && o.layer < static_cast<int>(m.layers.size()) &&
         recomputes_whole_layer(m.layers[static_cast<std::size_t>(o.layer)].kind);
}

// How the attention core (QK^T, softmax, its dropout, scores x V) runs: op by op, keeping the
// softmax output (and dropout mask) of every head for the backward pass (plain), or as one fused
// kernel per pass that keeps none of them and recomputes the scores in its backward pass. Two
// generations of that kernel differ in speed alone (cost::fused_attention_efficiency):
// - flash: FlashAttention-2 (Dao 2023) and what runs as fast, PyTorch's
//   scaled_dot_product_attention, Transformer Engine's fused attention;
// - flash1: the first FlashAttention's kernels (Dao et al. 2022; flash-attn 1.x) and their Triton
//   port (llm-foundry's attn_impl: triton, 2023).
enum class Attention { plain, flash, flash1 };
const char* to_string(Attention a);
// Whether the core runs as one fused kernel per pass (flash or flash1).
inline bool fused(Attention a) { return a != Attention::plain; }

// How the engine computes a language model's loss (model::is_whole_loss): op by op, as PyTorch's
// F.cross_entropy and Megatron-LM's vocabulary-parallel loss do (the logits cast to fp32,
// log-softmax, NLL; its fp32 output kept for the backward pass), or as one fused kernel per pass
// that keeps the 16-bit logits instead (flash-attn's cross entropy, llm-foundry's default;
// Megatron-Core's --cross-entropy-loss-fusion).
enum class Loss { unfused, fused };

// Bytes `op` keeps per sample for its backward pass under `loss`: its saved_bytes, or for a whole
// loss computed fused, its logits in the model's dtype.
double saved_bytes(const model::Model& m, const model::Op& op, Loss loss);

// Bytes per sample that `op` holds beyond its saved bytes while its backward pass runs: for a
// whole loss computed unfused, the NLL gradient and log-softmax's fp32 gradient (8 per logit);
// fused, the 16-bit gradient of its logits. 0 for any other op.
double transient_bytes(const model::Model& m, const model::Op& op, Loss loss);

struct MemoryConfig {
  int first_layer = 0;  // the stage's layers [first_layer, first_layer + num_layers)
  int num_layers = 0;
  double param_shard = 1.0;  // this device's fraction of the stage's parameters (1/tp when even)
  double activation_shard = 1.0;  // this device's fraction of each sample's activations
  int zero_stage = 0;             // 0..3
  int zero_group = 1;             // devices the ZeRO states are split over (data-parallel size)
  Recompute recompute = Recompute::none;
  Attention attention = Attention::plain;
  Loss loss = Loss::unfused;
  bool sequence_parallel = false;  // layernorm/dropout activations split across the TP group too
  int tensor_parallel = 1;         // TP degree (for the replicated-op activations without SP)
  // Per model op, when the plan splits ops other than by their ShardKind (else empty): whether the
  // device holds the op's parameters whole (split by batch, or replicated), and its activations
  // whole (replicated). Empty: parameters follow param_shard, activations as described below.
  std::vector<bool> whole_params, whole_activations;
  // Per model op, likewise: whether the device holds only its activation_shard of the op's input
  // (split by batch or by sequence), what full recomputation keeps of a layer at its first op.
  // Empty: under sequence parallelism.
  std::vector<bool> split_inputs;
  double micro_batch = 1;            // samples per micro-batch on this device
  double inflight_microbatches = 1;  // activations of this many micro-batches live at the peak
  // Outside the model's tensors, counted whole on every device (sources in memory_cost.cc):
  Bytes context = Bytes(512.0 * 1024 * 1024);    // CUDA context and the kernels loaded into it
  Bytes workspace = Bytes(160.0 * 1024 * 1024);  // cuBLAS workspaces, NCCL channel buffers
  Bytes gradient_buckets = Bytes(50.0 * 1024 * 1024);  // two 25 MiB communication buckets in flight
  // The caching allocator's share of cached but unusable bytes, of what it allocates and frees
  // during a step (activations and buffers; see allocator_fragmentation). 0 by default: see
  // memory_cost.cc for why.
  double fragmentation = 0.0;
  // Ops whose sharded weights are gathered whole for each pass (split batch_sharded): the rest of
  // the largest one's weights and gradient, held while it runs (counted with the buffers).
  Bytes gathered_weights;
};

// Bytes per parameter of its weight, its gradient and its optimizer states (mixed-precision Adam:
// 2, 2 and 12 for fp16 models, 2, 4 and 12 for bf16 (fp32 gradients); 4, 4 and 8 for fp32).
struct StateBytes {
  double weight = 0, gradient = 0, optimizer = 0;
};
StateBytes state_bytes(model::DType t);

struct MemoryBreakdown {
  Bytes parameters;  // 16-bit weights (plus fp32 master copy counted in optimizer)
  Bytes gradients;
  Bytes optimizer;  // fp32 master weights and Adam moments
  Bytes activations;
  // Live for a moment of the step beyond the activations and their recomputation: the loss's
  // gradient buffers as its backward pass runs (what of them the working set does not cover).
  Bytes transient;
  Bytes buffers;        // communication buckets, gathered weights (ZeRO-3's too)
  Bytes reserve;        // CUDA context, library workspaces: outside the allocator
  Bytes fragmentation;  // held by the caching allocator, not usable by the step's tensors
  Bytes total() const {
    return parameters + gradients + optimizer + activations + transient + buffers + reserve +
           fragmentation;
  }
};

// The bytes a caching allocator (PyTorch's) holds beyond the live tensors at the peak: `share` of
// what it allocates and frees during a step, the activations, transient buffers and buffers of `b`.
// The model's states are allocated once at start-up, in large blocks that do not fragment.
Bytes allocator_fragmentation(const MemoryBreakdown& b, double share);

// Peak memory of one device of a pipeline stage. Per op, saved_bytes (per sample) are split by
// activation_shard, except for ops of ShardKind::replicated without sequence parallelism, which
// every TP rank keeps whole. Recompute::selective and Attention::flash drop the ops with
// attention_core (flash keeps only each row's softmax statistics, 4 bytes per head and token: under
// 0.1% of a GPT layer's activations at hidden 1024 or more, not counted); full keeps,
// for transformer and conv blocks, only each layer's input (its first op's bytes_read, split only
// under sequence parallelism) plus the largest such layer's activations for one micro-batch (the
// recomputation's working set); embedding, head and other layers always keep everything (so the
// loss's logits count: whatever the head's ops save). Parameters, gradients and optimizer states:
// state_bytes per parameter (2 + 2 + 12 in fp16, 2 + 4 + 12 in bf16, 4 + 4 + 8 in fp32), times
// param_shard, then
// divided by zero_group for optimizer (ZeRO >= 1), gradients (>= 2) and parameters (3).
MemoryBreakdown stage_memory(const model::Model& m, const MemoryConfig& cfg);

// The per-sample activation bytes one device keeps for the backward pass (before micro_batch and
// inflight_microbatches), the recomputation working set per sample (0 unless full), and the
// loss's transient buffers per sample (a whole loss's: 8 bytes per logit unfused, the model's
// dtype fused; 0 on stages without it).
struct ActivationBytes {
  double stored_per_sample = 0;
  double working_set_per_sample = 0;
  double transient_per_sample = 0;
};
ActivationBytes stage_activation_bytes(const model::Model& m, const MemoryConfig& cfg);

// One layer's part of a stage's memory on a device set up as cfg (its layer range unused): the
// parameters it holds (times the device's share), those of a tied head's table copy, the
// activation bytes it keeps per sample, under full recomputation its rebuilt activations, and a
// whole loss's transient buffers.
struct LayerMemory {
  double params = 0;
  double tied_copy = 0;
  double stored_per_sample = 0;
  double working_per_sample = 0;
  double transient_per_sample = 0;
};
LayerMemory layer_memory(const model::Model& m, const MemoryConfig& cfg, int layer);

// The layer holding the table a tied head reads (the word embedding's); -1 without one.
int tied_table_layer(const model::Model& m);

// What a stage's layers add up to: parameters held, a tied table's copy (0 where the stage holds
// the table), activations. stage_memory(dtype, cfg, parts) turns them into a breakdown.
struct StageMemoryParts {
  double params = 0;
  double tied_copy = 0;
  double largest_layer = 0;  // the parameters (and tied copy) of the stage's largest layer
  ActivationBytes activations;
};
// The parts of cfg's layers [first_layer, first_layer + num_layers).
StageMemoryParts stage_memory_parts(const model::Model& m, const MemoryConfig& cfg);
MemoryBreakdown stage_memory(model::DType dtype, const MemoryConfig& cfg,
                             const StageMemoryParts& parts);
// The same with gathered weights in place of cfg.gathered_weights (cfg's layer range unused).
MemoryBreakdown stage_memory(model::DType dtype, const MemoryConfig& cfg,
                             const StageMemoryParts& parts, Bytes gathered_weights);

}  // namespace hetplan::cost

// Per-device memory of a training step (Rajbhandari et al. 2020 for the ZeRO split of the 16 bytes
// per parameter of mixed-precision Adam; Korthikanti et al. 2022 for activations with tensor and
// sequence parallelism and selective or full recomputation).
//
// Memory outside the model's tensors (MemoryConfig, explicit and overridable; one set for every
// device and run, set from these sources, not fitted):
// - context 512 MiB, the reserve a CUDA process holds before it allocates a tensor: PyTorch's
//   context measured 274 MiB with CUDA's lazy module loading (its default since PyTorch 1.13) and
//   636 MiB without (pytorch/pytorch#86509); Hugging Face's "Model training anatomy" measured
//   1,343 MB of NVML-used memory on a V100 after moving one element to it. A step loads the kernels
//   of cuBLAS, cuDNN, NCCL and its attention on first use: between the first two figures, taken as
//   512 MiB until `calibrate --device cuda` measures it per device;
// - workspace 160 MiB: cuBLAS workspaces (PyTorch's default :4096:8, 32 MiB on Hopper, less
//   before it) and NCCL's channel buffers (NCCL_BUFFSIZE 4 MiB per channel and protocol, about
//   16 channels on NVLink: 128 MiB);
// - gradient_buckets 50 MiB: two PyTorch DDP buckets (bucket_cap_mb = 25) being reduced while the
//   next fills;
// - fragmentation, a share of the bytes allocated and freed during a step (static states are
//   allocated once and not counted), 0 by default. GMLake (Guo et al., ASPLOS 2024) removed 15%
//   fragmentation on average (up to 33%) from PyTorch's caching allocator over eight LLMs trained
//   with recomputation, ZeRO and offloading on A100 80GB; but at that share 8 of the 26 llm-foundry
//   runs in data/measured/ (FSDP, micro-batches chosen to fill 40 or 80 GB) would not fit under
//   this file's activation count, and mpt-1b on 64 H100 leaves room for 2.4% at most. The
//   activation count (Korthikanti et al.'s, with dropout masks those runs do not keep) is the
//   likelier excess; until that is settled, the line is there and its share is 0.
#include "hetplan/cost/memory_cost.h"

#include <algorithm>
#include <cassert>

#include "hetplan/model/training.h"

namespace hetplan::cost {

const char* to_string(Recompute r) {
  switch (r) {
    case Recompute::none:
      return "none";
    case Recompute::selective:
      return "selective";
    case Recompute::full:
      return "full";
  }
  return "?";
}

const char* to_string(Attention a) {
  switch (a) {
    case Attention::plain:
      return "plain";
    case Attention::flash:
      return "flash";
    case Attention::flash1:
      return "flash1";
  }
  return "?";
}

double saved_bytes(const model::Model& m, const model::Op& op, Loss loss) {
  if (loss == Loss::fused && model::is_whole_loss(m, op))
    return op.bytes_read;  // its logits, as read
  return op.saved_bytes;
}

// The loss's backward pass as PyTorch runs it (F.cross_entropy; the kernels priced in
// model/training.cc): while log-softmax's backward runs, the NLL gradient it reads (4 bytes per
// logit) and the fp32 gradient it writes (4) are live beside its saved output (counted by
// saved_bytes); the cast back to 16 bits comes after the first two are freed (4 + 2 bytes). The
// forward pass holds less beyond what it saves: the 16-bit logits and their fp32 cast (2 + 4). A
// fused loss writes the logits' gradient in the model's dtype beside the logits it kept.
// Megatron-LM's vocabulary-parallel loss computes its gradient in place of its saved softmax and
// holds less.
double transient_bytes(const model::Model& m, const model::Op& op, Loss loss) {
  if (!model::is_whole_loss(m, op)) return 0;
  const double act = model::dtype_bytes(m.dtype);
  const double logits = op.bytes_read / act;
  return logits * (loss == Loss::fused ? act : 4.0 + 4.0);
}

// Mixed precision keeps 16-bit weights and an fp32 master copy with Adam's m and v (12 bytes). Its
// gradients are 16-bit in fp16 (Rajbhandari et al.'s 16 bytes per parameter; Megatron-LM's fp16
// default) and fp32 in bf16: Megatron-LM accumulates and reduces bf16 models' gradients in fp32
// (--bf16 sets accumulate_allreduce_grads_in_fp32), and PyTorch's autocast keeps fp32 weights and
// gradients (4 + 4 + 8) plus each weight's 16-bit cast for the backward pass: 18 bytes either way.
// Pure fp32 (and TF32) keeps 4 + 4 and two 4-byte moments.
StateBytes state_bytes(model::DType t) {
  if (t == model::DType::fp32 || t == model::DType::tf32) return {4, 4, 8};
  if (t == model::DType::bf16) return {2, 4, 12};
  return {2, 2, 12};
}

LayerMemory layer_memory(const model::Model& m, const MemoryConfig& cfg, int li) {
  assert(li >= 0 && li < static_cast<int>(m.layers.size()));
  const model::Layer& layer = m.layers[li];
  LayerMemory out;
  double kept = 0, all = 0, transient = 0;
  for (int oi = layer.first_op; oi < layer.first_op + layer.num_ops; ++oi) {
    const model::Op& op = m.ops[oi];
    const double param_share =
        !cfg.whole_params.empty() && cfg.whole_params[oi] ? 1.0 : cfg.param_shard;
    out.params += static_cast<double>(op.params) * param_share;
    out.tied_copy += static_cast<double>(op.tied_params) * param_share;
    const bool whole = cfg.whole_activations.empty()
                           ? op.shard == model::ShardKind::replicated && !cfg.sequence_parallel
                           : cfg.whole_activations[oi];
    // A fused attention kernel keeps no scores, neither for the backward pass nor while a
    // recomputed layer runs again.
    if (fused(cfg.attention) && op.attention_core) continue;
    const double split = whole ? 1.0 : cfg.activation_shard;
    const double bytes = saved_bytes(m, op, cfg.loss) * split;
    transient = std::max(transient, transient_bytes(m, op, cfg.loss) * split);
    all += bytes;
    if (!(cfg.recompute == Recompute::selective && op.attention_core)) kept += bytes;
  }
  if (layer.num_ops > 0 && cfg.recompute == Recompute::full && recomputes_whole_layer(layer.kind)) {
    // The checkpointed layer input: this device's share of it where it is split (by sequence
    // across the TP group under SP, by batch where the plan splits the op so), else whole.
    const double input = m.ops[layer.first_op].bytes_read;
    const bool split_input = cfg.split_inputs.empty()
                                 ? cfg.sequence_parallel
                                 : cfg.split_inputs[static_cast<std::size_t>(layer.first_op)];
    out.stored_per_sample = input * (split_input ? cfg.activation_shard : 1.0);
    out.working_per_sample = all;
  } else {
    out.stored_per_sample = kept;
  }
  out.transient_per_sample = transient;
  return out;
}

int tied_table_layer(const model::Model& m) {
  const int owner = m.tied_owner();
  return owner < 0 ? -1 : m.layer_of(owner);
}

StageMemoryParts stage_memory_parts(const model::Model& m, const MemoryConfig& cfg) {
  assert(cfg.first_layer >= 0 && cfg.num_layers >= 0);
  assert(cfg.first_layer + cfg.num_layers <= static_cast<int>(m.layers.size()));
  StageMemoryParts parts;
  const int end = cfg.first_layer + cfg.num_layers;
  for (int li = cfg.first_layer; li < end; ++li) {
    const LayerMemory l = layer_memory(m, cfg, li);
    parts.params += l.params;
    parts.tied_copy += l.tied_copy;
    parts.largest_layer = std::max(parts.largest_layer, l.params + l.tied_copy);
    parts.activations.stored_per_sample += l.stored_per_sample;
    parts.activations.working_set_per_sample =
        std::max(parts.activations.working_set_per_sample, l.working_per_sample);
    parts.activations.transient_per_sample =
        std::max(parts.activations.transient_per_sample, l.transient_per_sample);
  }
  // A tied head on a stage without the table it reads holds a copy of it, with its own gradient
  // and optimizer state (Megatron-LM's; the runtime's untie_head), split as the head.
  if (parts.tied_copy > 0) {
    const int table = tied_table_layer(m);
    if (table >= cfg.first_layer && table < end) parts.tied_copy = 0;
  }
  return parts;
}

ActivationBytes stage_activation_bytes(const model::Model& m, const MemoryConfig& cfg) {
  return stage_memory_parts(m, cfg).activations;
}

MemoryBreakdown stage_memory(const model::Model& m, const MemoryConfig& cfg) {
  return stage_memory(m.dtype, cfg, stage_memory_parts(m, cfg));
}

MemoryBreakdown stage_memory(model::DType dtype, const MemoryConfig& cfg,
                             const StageMemoryParts& parts) {
  return stage_memory(dtype, cfg, parts, cfg.gathered_weights);
}

MemoryBreakdown stage_memory(model::DType dtype, const MemoryConfig& cfg,
                             const StageMemoryParts& parts, Bytes gathered_weights) {
  assert(cfg.zero_stage >= 0 && cfg.zero_stage <= 3 && cfg.zero_group >= 1);
  const double local = parts.params + parts.tied_copy;
  const double g = cfg.zero_group;
  const StateBytes sb = state_bytes(dtype);

  MemoryBreakdown b;
  b.parameters = Bytes(sb.weight * local / (cfg.zero_stage >= 3 ? g : 1.0));
  b.gradients = Bytes(sb.gradient * local / (cfg.zero_stage >= 2 ? g : 1.0));
  b.optimizer = Bytes(sb.optimizer * local / (cfg.zero_stage >= 1 ? g : 1.0));

  const ActivationBytes& act = parts.activations;
  b.activations = Bytes(act.stored_per_sample * cfg.micro_batch * cfg.inflight_microbatches +
                        act.working_set_per_sample * cfg.micro_batch);
  // The loss's buffers are live as the backward pass starts, before any layer is recomputed: the
  // peak holds the larger of the two working sets.
  b.transient =
      Bytes(std::max(0.0, act.transient_per_sample - act.working_set_per_sample) * cfg.micro_batch);
  b.buffers = cfg.gradient_buckets + gathered_weights;
  // ZeRO-3 over several devices, as PyTorch FSDP runs it with a unit per layer: the layer a pass
  // computes gathered whole (this device's tensor-parallel part of it) and the next one
  // prefetched (FSDP's default BACKWARD_PRE prefetch), and in the backward pass the layer's whole
  // gradient before its reduce-scatter, which takes the place of the communication buckets when
  // larger. The sliced weights are counted in `parameters` besides.
  if (cfg.zero_stage >= 3 && cfg.zero_group > 1) {
    const double layer = parts.largest_layer;
    b.buffers =
        Bytes(std::max(cfg.gradient_buckets.value, sb.gradient * layer) + 2 * sb.weight * layer) +
        gathered_weights;
  }
  b.reserve = cfg.context + cfg.workspace;
  b.fragmentation = allocator_fragmentation(b, cfg.fragmentation);
  return b;
}

Bytes allocator_fragmentation(const MemoryBreakdown& b, double share) {
  return Bytes(share * (b.activations + b.transient + b.buffers).value);
}

}  // namespace hetplan::cost

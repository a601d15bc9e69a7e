// A stage plan as a Megatron-LM launch: pretrain_gpt.py (or _bert, _vision_classify) under
// torchrun, one torchrun per node, with the parallel, batch, memory and model flags.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "export_parts.h"
#include "hetplan/model/onnx_import.h"

namespace hetplan::plan::detail {
namespace {

bool has_op_kind(const model::Model& m, model::OpKind kind) {
  return std::any_of(m.ops.begin(), m.ops.end(),
                     [&](const model::Op& op) { return op.kind == kind; });
}

// Megatron-LM's training script for the model's family; "" for none.
const char* script_for(model::Family f) {
  switch (f) {
    case model::Family::decoder_lm:
    case model::Family::moe_lm:
      return "pretrain_gpt.py";
    case model::Family::encoder:
      return "pretrain_bert.py";
    case model::Family::vision_transformer:
      return "pretrain_vision_classify.py";
    case model::Family::cnn:
    case model::Family::mlp:
      return "";
  }
  return "";
}

// The model's architecture as Megatron-LM's flags.
std::vector<std::string> model_flags(const model::Model& m, model::DType dtype) {
  std::vector<std::string> f{
      fmt::format("--num-layers {}", m.num_blocks),
      fmt::format("--hidden-size {}", m.hidden),
      fmt::format("--ffn-hidden-size {}", m.ffn_hidden),
      fmt::format("--num-attention-heads {}", m.heads),
  };
  if (m.head_dim > 0 && m.head_dim * m.heads != m.hidden)
    f.push_back(fmt::format("--kv-channels {}", m.head_dim));
  if (m.kv_heads > 0 && m.kv_heads != m.heads)
    f.push_back(fmt::format("--group-query-attention --num-query-groups {}", m.kv_heads));
  if (m.family == model::Family::vision_transformer) {
    const int patches = static_cast<int>(std::lround(std::sqrt(m.seq_len - 1)));
    f.push_back(fmt::format("--img-h {0} --img-w {0} --patch-dim {1} --num-classes {2}",
                            m.image_size, patches > 0 ? m.image_size / patches : 0, m.num_classes));
  }
  f.push_back(fmt::format("--seq-length {0} --max-position-embeddings {0}", m.seq_len));
  // Llama-style blocks: RMSNorm, SwiGLU, rotary positions, no biases.
  if (has_op_kind(m, model::OpKind::rmsnorm))
    f.push_back(
        "--normalization RMSNorm --swiglu --position-embedding-type rope --disable-bias-linear");
  if (m.is_language_model() && m.tied_reader() < 0)
    f.push_back("--untie-embeddings-and-output-weights");
  if (m.experts > 0)
    f.push_back(fmt::format("--num-experts {} --moe-router-topk {}", m.experts, m.top_k));
  if (dtype == model::DType::bf16) f.push_back("--bf16");
  if (dtype == model::DType::fp16) f.push_back("--fp16");
  return f;
}

}  // namespace

Result<Exported> export_megatron(const Plan& p, const model::Model& m, const cluster::Cluster& c,
                                 const ExportInputs& in) {
  if (p.is_op_level())
    return Error{
        "--to megatron: an op-level plan (op groups on their own devices) has no Megatron-LM "
        "form; export it --to torchrun"};
  if (model::parse_onnx_spec(m.name).has_value())
    return Error{fmt::format(
        "--to megatron: Megatron-LM trains its own GPT, BERT and ViT; the model {} is imported "
        "from ONNX, whose architecture Megatron-LM's flags cannot give (export it --to deepspeed, "
        "which runs your own training script)",
        m.name)};
  const std::string script = script_for(m.family);
  if (script.empty())
    return Error{fmt::format(
        "--to megatron: Megatron-LM trains transformers; the model {} is a {} (export it --to "
        "deepspeed or --to torchrun)",
        m.name, model::to_string(m.family))};
  Exported out;
  auto& diff = out.differences;
  const Grid g = plan_grid(p, m, "Megatron-LM", diff);

  std::vector<std::string> parallel{fmt::format("--tensor-model-parallel-size {}", g.tp),
                                    fmt::format("--pipeline-model-parallel-size {}", g.pp)};
  if (p.sequence_parallel && g.tp > 1) parallel.push_back("--sequence-parallel");
  if (!p.sequence_parallel && m.experts > 0 && g.tp > 1) {
    parallel.push_back("--sequence-parallel");
    diff.push_back(
        "sequence_parallel off: Megatron-LM runs MoE layers under tensor parallelism only with "
        "sequence parallelism; written: --sequence-parallel");
  }
  if (m.experts > 0 && g.tp > 1)
    // hetplan spreads each layer's experts over the tensor-parallel group.
    parallel.push_back(
        fmt::format("--expert-model-parallel-size {} --expert-tensor-parallel-size 1", g.tp));
  // Blocks per stage: even, or (Megatron-core) other counts on the first and the last stage.
  const auto& blocks = g.blocks_per_stage;
  const bool even =
      std::adjacent_find(blocks.begin(), blocks.end(), std::not_equal_to<>()) == blocks.end();
  if (p.schedule == Schedule::interleaved && g.vpp > 1) {
    parallel.push_back(
        fmt::format("--num-layers-per-virtual-pipeline-stage {}", m.num_blocks / (g.pp * g.vpp)));
    if (!even)
      diff.push_back(fmt::format(
          "the interleaved stages hold {} blocks: Megatron-LM gives every model chunk the same "
          "number; written: {} each",
          join(blocks), m.num_blocks / (g.pp * g.vpp)));
    if (g.accumulation % g.pp != 0)
      diff.push_back(fmt::format(
          "interleaved 1F1B: Megatron-LM needs a multiple of pp={} micro-batches, the plan has {}",
          g.pp, g.accumulation));
  } else if (!even) {
    // Megatron-core gives the middle stages equal counts; the first and the last may differ,
    // each at least one block (with two stages, the first's count fixes the last's).
    const std::size_t n = blocks.size();
    const bool middle_even =
        n <= 3 || std::adjacent_find(blocks.begin() + 1, blocks.end() - 1, std::not_equal_to<>()) ==
                      blocks.end() - 1;
    const bool ends_hold_blocks = blocks.front() > 0 && blocks.back() > 0;
    if (middle_even && ends_hold_blocks) {
      if (n == 2 || blocks.front() != blocks[1])
        parallel.push_back(fmt::format("--decoder-first-pipeline-num-layers {}", blocks.front()));
      if (n > 2 && blocks.back() != blocks[n - 2])
        parallel.push_back(fmt::format("--decoder-last-pipeline-num-layers {}", blocks.back()));
    } else {
      diff.push_back(fmt::format(
          "the stages hold {} blocks: Megatron-LM splits them evenly but for the first and the "
          "last stage, each with at least one; written: an even split",
          join(blocks)));
    }
  }
  if (p.schedule == Schedule::gpipe && g.pp > 1)
    diff.push_back(
        "schedule gpipe: Megatron-LM runs 1F1B (the same step, with fewer activations held)");

  std::vector<std::string> batch{fmt::format("--micro-batch-size {}", g.micro_batch),
                                 fmt::format("--global-batch-size {}", g.global_batch)};
  std::vector<std::string> memory;
  if (p.recompute == cost::Recompute::selective)
    memory.push_back("--recompute-granularity selective");
  if (p.recompute == cost::Recompute::full)
    memory.push_back(
        "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1");
  if (p.zero_stage >= 1) memory.push_back("--use-distributed-optimizer");
  if (cost::fused(p.attention)) memory.push_back("--use-flash-attn");
  if (p.attention == cost::Attention::flash1)
    diff.push_back(
        "attention flash1: Megatron-LM's --use-flash-attn runs FlashAttention-2, faster than the "
        "first FlashAttention's kernels the plan was timed with");
  if (p.loss == cost::Loss::fused) memory.push_back("--cross-entropy-loss-fusion");
  if (p.zero_stage >= 2)
    diff.push_back(fmt::format(
        "zero_stage {}: Megatron-LM's distributed optimizer shards the optimizer states only "
        "(ZeRO-1); written: --use-distributed-optimizer",
        p.zero_stage));
  if (overlaps_tp(p.overlap)) {
    if (p.sequence_parallel && g.tp > 1)
      parallel.push_back("--tp-comm-overlap");
    else
      diff.push_back(
          "overlap tp: Megatron-LM overlaps tensor-parallel collectives with GEMMs only under "
          "sequence parallelism (--tp-comm-overlap needs --sequence-parallel and tp > 1); not "
          "written");
  }
  if (overlaps_param_gather(p.overlap))
    parallel.push_back("--overlap-grad-reduce --overlap-param-gather");
  add_sync_differences(p, "Megatron-LM", diff);
  add_adam_difference(p, "Megatron-LM", diff);
  add_metrics_difference(p, "Megatron-LM", diff);
  const model::DType dtype = engine_dtype(p, m, c, "Megatron-LM", diff);

  const auto launch = placed_launch_nodes(g.rank_devices, c, "Megatron-LM", diff);

  std::string s = launch_preamble(
      fmt::format("Megatron-LM launch of {} (written by hetplan export): tp {} x pp {} x dp {}{}",
                  plan_title(p, m, c), g.tp, g.pp, g.dp,
                  g.vpp > 1 ? fmt::format(", {} model chunks per stage", g.vpp) : ""),
      diff, launch, c, in.master_port);
  s += "# Megatron-LM's checkout, and your data and training settings:\n";
  s += "MEGATRON=\"${MEGATRON:-.}\"\n";
  if (m.family == model::Family::decoder_lm || m.family == model::Family::moe_lm)
    s += fmt::format(
        "DATA_ARGS=\"${{DATA_ARGS:---mock-data --tokenizer-type NullTokenizer --vocab-size {}}}\"  "
        "# NullTokenizer adds the end-of-document token\n",
        m.vocab - 1);
  else  // pretrain_bert.py and pretrain_vision_classify.py have no mock data
    s += "DATA_ARGS=\"${DATA_ARGS:?set DATA_ARGS to your data's flags (--data-path ...)}\"\n";
  s += "TRAIN_ARGS=\"${TRAIN_ARGS:---train-iters 100 --lr 1.0e-4 --eval-iters 0}\"\n";
  auto block = [&](const char* name, const std::vector<std::string>& flags) {
    std::string b = fmt::format("{}=(\n", name);
    for (const auto& f : flags) b += fmt::format("  {}\n", f);
    return b + ")\n";
  };
  s += block("PARALLEL_ARGS", parallel);
  s += block("BATCH_ARGS", batch);
  s += block("MEMORY_ARGS", memory);
  s += block("MODEL_ARGS", model_flags(m, dtype));
  // Megatron-LM asks for it with tensor parallelism (its overlap of communication with GEMMs).
  s += "export CUDA_DEVICE_MAX_CONNECTIONS=1\n";
  s += fmt::format(
      "exec {} \\\n  \"$MEGATRON/{}\" \"${{PARALLEL_ARGS[@]}}\" \"${{BATCH_ARGS[@]}}\" "
      "\"${{MEMORY_ARGS[@]}}\" \\\n  \"${{MODEL_ARGS[@]}}\" $DATA_ARGS $TRAIN_ARGS \"$@\"\n",
      torchrun_arguments(), script);
  out.files.push_back({"megatron.sh", s, true});
  return out;
}

}  // namespace hetplan::plan::detail

// A stage plan as a DeepSpeed launch: ds_config.json (batch, ZeRO, precision, activation
// checkpointing, AutoTP), a hostfile and the deepspeed launcher's command with the devices the plan
// uses on each host.
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "export_parts.h"

namespace hetplan::plan::detail {

Result<Exported> export_deepspeed(const Plan& p, const model::Model& m, const cluster::Cluster& c,
                                  const ExportInputs& in) {
  if (p.is_op_level())
    return Error{
        "--to deepspeed: an op-level plan (op groups on their own devices) has no DeepSpeed "
        "form; export it --to torchrun"};
  Exported out;
  auto& diff = out.differences;
  const Grid g = plan_grid(p, m, "DeepSpeed", diff);

  nlohmann::ordered_json j;
  j["train_batch_size"] = g.global_batch;
  j["train_micro_batch_size_per_gpu"] = g.micro_batch;
  j["gradient_accumulation_steps"] = g.accumulation;
  int zero = p.zero_stage;
  if (g.pp > 1 && zero >= 2) {
    diff.push_back(fmt::format(
        "zero_stage {}: DeepSpeed's pipeline engine takes ZeRO stages 0 and 1 only; written: 1",
        zero));
    zero = 1;
  }
  j["zero_optimization"] = {{"stage", zero}};
  const model::DType dtype = engine_dtype(p, m, c, "DeepSpeed", diff);
  if (dtype == model::DType::bf16) j["bf16"] = {{"enabled", true}};
  if (dtype == model::DType::fp16) j["fp16"] = {{"enabled", true}, {"loss_scale", 0}};
  if (cost::fused(p.attention))
    diff.push_back(fmt::format(
        "attention {}: DeepSpeed's config has no attention setting; compute your model's "
        "attention with torch.nn.functional.scaled_dot_product_attention (or flash-attn) for the "
        "plan's memory",
        attention_name(p.attention)));
  if (p.recompute != cost::Recompute::none) {
    // The model's code checkpoints (deepspeed.checkpointing.checkpoint, or PipelineModule's
    // activation_checkpoint_interval); these settings shape how.
    j["activation_checkpointing"] = {{"partition_activations", false},
                                     {"contiguous_memory_optimization", false},
                                     {"cpu_checkpointing", false}};
    if (p.recompute == cost::Recompute::selective)
      diff.push_back(
          "recompute selective: DeepSpeed checkpoints whole layers; written for full "
          "recomputation (less memory, more time than the plan's)");
  }
  if (g.tp > 1 && g.pp == 1) {
    j["tensor_parallel"] = {{"autotp_size", g.tp}};
    diff.push_back(fmt::format(
        "tp {}: DeepSpeed's own tensor parallelism is AutoTP (DeepSpeed 0.16.4 and later, for "
        "the models it knows)",
        g.tp));
  } else if (g.tp > 1) {
    diff.push_back(fmt::format(
        "tp {} with pipeline stages: DeepSpeed's pipeline engine splits tensors only with "
        "tensor-parallel layers of your own (Megatron-DeepSpeed's); written: the topology "
        "PipeModelDataParallelTopology(num_pp={}, num_mp={}, num_dp={}) for them",
        g.tp, g.pp, g.tp, g.dp));
  }
  if (p.sequence_parallel)
    diff.push_back(
        "sequence_parallel: DeepSpeed has no Megatron-style sequence parallelism (its Ulysses "
        "splits attention differently); not written");
  if (p.batch_norm == BatchNormStats::synced)
    diff.push_back("batch_norm synced: DeepSpeed has no setting for it; use SyncBatchNorm");
  if (p.schedule == Schedule::interleaved && g.vpp > 1)
    diff.push_back(fmt::format(
        "schedule interleaved ({} model chunks per stage): DeepSpeed's pipeline runs 1F1B with one "
        "chunk per stage",
        g.vpp));
  if (p.schedule == Schedule::gpipe && g.pp > 1)
    diff.push_back("schedule gpipe: DeepSpeed's pipeline runs 1F1B (the same step)");
  const bool even = std::adjacent_find(g.blocks_per_stage.begin(), g.blocks_per_stage.end(),
                                       std::not_equal_to<>()) == g.blocks_per_stage.end();
  if (g.pp > 1 && !even)
    diff.push_back(fmt::format(
        "the stages hold {} blocks: DeepSpeed's PipelineModule partitions uniformly or by "
        "parameters; written: uniform",
        join(g.blocks_per_stage)));
  add_sync_differences(p, "DeepSpeed", diff);
  add_overlap_difference(p, "DeepSpeed", diff);
  add_adam_difference(p, "DeepSpeed", diff);
  add_metrics_difference(p, "DeepSpeed", diff);
  j["steps_per_print"] = 10;
  out.files.push_back({"ds_config.json", j.dump(2) + "\n", false});

  // The hosts: the deepspeed launcher numbers ranks host by host, each host's devices in the
  // order --include lists them.
  const auto nodes = placed_launch_nodes(g.rank_devices, c, "DeepSpeed", diff);
  std::string hostfile =
      "# One line per host the plan uses. nodeN must reach the host over ssh (an alias in "
      "~/.ssh/config or /etc/hosts), or rename it here and in deepspeed.sh's --include.\n";
  std::string include;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const auto& node = c.nodes[static_cast<std::size_t>(nodes[i].node)];
    hostfile += fmt::format("node{} slots={}\n", i, node.devices.size());
    std::vector<int> local;
    for (int d : nodes[i].devices)
      local.push_back(c.devices[static_cast<std::size_t>(d)].local_rank);
    include += fmt::format("{}node{}:{}", i == 0 ? "" : "@", i, join(local, ","));
  }
  out.files.push_back({"hostfile", hostfile, false});
  for (const auto& n : nodes)
    if (n.devices.size() != nodes.front().devices.size()) {
      diff.push_back(
          "the hosts run different numbers of workers: DeepSpeed's launcher numbers a worker's "
          "local rank as its global rank modulo its host's count, which can swap a host's "
          "devices between ranks");
      break;
    }

  std::string s = "#!/usr/bin/env bash\n";
  s += fmt::format("# DeepSpeed launch of {} (written by hetplan export): pp {} x dp {}{}\n",
                   plan_title(p, m, c), g.pp, g.dp, g.tp > 1 ? fmt::format(" x tp {}", g.tp) : "");
  s += differences_comment(diff);
  if (g.pp > 1)
    s += fmt::format(
        "# Your model is a deepspeed.pipe.PipelineModule(layers, {}, "
        "partition_method=\"uniform\"{}).\n",
        g.tp > 1 ? fmt::format("topology=PipeModelDataParallelTopology(num_pp={}, num_mp={}, "
                               "num_dp={})",
                               g.pp, g.tp, g.dp)
                 : fmt::format("num_stages={}", g.pp),
        p.recompute != cost::Recompute::none ? ", activation_checkpoint_interval=1" : "");
  s += "# Run it on the first host; the launcher reaches the others over ssh.\n";
  s += "set -euo pipefail\n";
  s += "HERE=\"$(cd \"$(dirname \"$0\")\" && pwd)\"\n";
  s += "TRAIN_SCRIPT=\"${TRAIN_SCRIPT:?set TRAIN_SCRIPT to your training script}\"\n";
  s += "MASTER_ADDR=\"${MASTER_ADDR:-node0}\"\n";
  s += fmt::format("MASTER_PORT=\"${{MASTER_PORT:-{}}}\"\n", in.master_port);
  s += fmt::format(
      "exec deepspeed --hostfile \"$HERE/hostfile\" --include \"{}\" \\\n"
      "  --master_addr \"$MASTER_ADDR\" --master_port \"$MASTER_PORT\" \\\n"
      "  \"$TRAIN_SCRIPT\" --deepspeed --deepspeed_config \"$HERE/ds_config.json\" \"$@\"\n",
      include);
  out.files.push_back({"deepspeed.sh", s, true});
  return out;
}

}  // namespace hetplan::plan::detail

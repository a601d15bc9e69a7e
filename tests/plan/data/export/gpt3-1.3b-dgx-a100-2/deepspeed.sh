#!/usr/bin/env bash
# DeepSpeed launch of the strategy:dp=4,tp=2,pp=2,vpp=1,mbs=2,gbs=512,recompute=selective,zero=1,schedule=1f1b,sp=1 plan for gpt3-1.3b on dgx-a100:2 (written by hetplan export): pp 2 x dp 4 x tp 2
# What the engine cannot express of the plan:
#   - recompute selective: DeepSpeed checkpoints whole layers; written for full recomputation (less memory, more time than the plan's)
#   - tp 2 with pipeline stages: DeepSpeed's pipeline engine splits tensors only with tensor-parallel layers of your own (Megatron-DeepSpeed's); written: the topology PipeModelDataParallelTopology(num_pp=2, num_mp=2, num_dp=4) for them
#   - sequence_parallel: DeepSpeed has no Megatron-style sequence parallelism (its Ulysses splits attention differently); not written
# Your model is a deepspeed.pipe.PipelineModule(layers, topology=PipeModelDataParallelTopology(num_pp=2, num_mp=2, num_dp=4), partition_method="uniform", activation_checkpoint_interval=1).
# Run it on the first host; the launcher reaches the others over ssh.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
TRAIN_SCRIPT="${TRAIN_SCRIPT:?set TRAIN_SCRIPT to your training script}"
MASTER_ADDR="${MASTER_ADDR:-node0}"
MASTER_PORT="${MASTER_PORT:-29500}"
exec deepspeed --hostfile "$HERE/hostfile" --include "node0:0,1,2,3,4,5,6,7@node1:0,1,2,3,4,5,6,7" \
  --master_addr "$MASTER_ADDR" --master_port "$MASTER_PORT" \
  "$TRAIN_SCRIPT" --deepspeed --deepspeed_config "$HERE/ds_config.json" "$@"

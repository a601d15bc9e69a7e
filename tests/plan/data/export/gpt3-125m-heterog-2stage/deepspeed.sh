#!/usr/bin/env bash
# DeepSpeed launch of the hand: 2 uneven stages, the V100 servers take the embedding and 7 blocks, the 1080Ti and P100 servers the last 5 blocks and the head plan for gpt3-125m on heterog-mixed (written by hetplan export): pp 2 x dp 2 x tp 2
# What the engine cannot express of the plan:
#   - stage 1 gives its replicas uneven batch shares (0.375/0.625): DeepSpeed gives every replica the same micro-batch
#   - bf16: V100-PCIE-16GB (Volta), GTX-1080Ti (Pascal), P100-PCIE-16GB (Pascal) have no BF16 arithmetic; DeepSpeed is written for fp16 mixed precision with dynamic loss scaling (hetplan prices either 16-bit type at the same rate)
#   - recompute selective: DeepSpeed checkpoints whole layers; written for full recomputation (less memory, more time than the plan's)
#   - tp 2 with pipeline stages: DeepSpeed's pipeline engine splits tensors only with tensor-parallel layers of your own (Megatron-DeepSpeed's); written: the topology PipeModelDataParallelTopology(num_pp=2, num_mp=2, num_dp=2) for them
#   - the stages hold 7, 5 blocks: DeepSpeed's PipelineModule partitions uniformly or by parameters; written: uniform
#   - the gradients of embedding.* synchronise by parameter_server: DeepSpeed all-reduces every gradient
#   - the ops layers.*.norm* are split by replicate: DeepSpeed splits every layer's ops its own way
# Your model is a deepspeed.pipe.PipelineModule(layers, topology=PipeModelDataParallelTopology(num_pp=2, num_mp=2, num_dp=2), partition_method="uniform", activation_checkpoint_interval=1).
# Run it on the first host; the launcher reaches the others over ssh.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
TRAIN_SCRIPT="${TRAIN_SCRIPT:?set TRAIN_SCRIPT to your training script}"
MASTER_ADDR="${MASTER_ADDR:-node0}"
MASTER_PORT="${MASTER_PORT:-29500}"
exec deepspeed --hostfile "$HERE/hostfile" --include "node0:0,1@node1:0,1@node2:0,1@node3:0,1" \
  --master_addr "$MASTER_ADDR" --master_port "$MASTER_PORT" \
  "$TRAIN_SCRIPT" --deepspeed --deepspeed_config "$HERE/ds_config.json" "$@"

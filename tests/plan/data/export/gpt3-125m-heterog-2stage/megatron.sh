#!/usr/bin/env bash
# Megatron-LM launch of the hand: 2 uneven stages, the V100 servers take the embedding and 7 blocks, the 1080Ti and P100 servers the last 5 blocks and the head plan for gpt3-125m on heterog-mixed (written by hetplan export): tp 2 x pp 2 x dp 2
# What the engine cannot express of the plan:
#   - stage 1 gives its replicas uneven batch shares (0.375/0.625): Megatron-LM gives every replica the same micro-batch
#   - the gradients of embedding.* synchronise by parameter_server: Megatron-LM all-reduces every gradient
#   - the ops layers.*.norm* are split by replicate: Megatron-LM splits every layer's ops its own way
#   - bf16: V100-PCIE-16GB (Volta), GTX-1080Ti (Pascal), P100-PCIE-16GB (Pascal) have no BF16 arithmetic; Megatron-LM is written for fp16 mixed precision with dynamic loss scaling (hetplan prices either 16-bit type at the same rate)
# Run it on each of the 4 nodes: NODE_RANK=<0..3> MASTER_ADDR=<node 0's address> bash THIS_SCRIPT
set -euo pipefail
NNODES=4
NODE_RANK="${NODE_RANK:?set NODE_RANK to this node's rank, 0 to NNODES-1}"
MASTER_ADDR="${MASTER_ADDR:?set MASTER_ADDR to node 0's address}"
MASTER_PORT="${MASTER_PORT:-29500}"
TORCHRUN="${TORCHRUN:-torchrun}"  # or: python3 -m torch.distributed.run
case "$NODE_RANK" in
  0) NPROC=2; export CUDA_VISIBLE_DEVICES=0,1 ;;  # node v100/0: 2 x V100-PCIE-16GB
  1) NPROC=2; export CUDA_VISIBLE_DEVICES=0,1 ;;  # node v100/1: 2 x V100-PCIE-16GB
  2) NPROC=2; export CUDA_VISIBLE_DEVICES=0,1 ;;  # node 1080ti/0: 2 x GTX-1080Ti
  3) NPROC=2; export CUDA_VISIBLE_DEVICES=0,1 ;;  # node p100/0: 2 x P100-PCIE-16GB
  *) echo "NODE_RANK: expected 0 to 3, got $NODE_RANK" >&2; exit 2 ;;
esac
# Megatron-LM's checkout, and your data and training settings:
MEGATRON="${MEGATRON:-.}"
DATA_ARGS="${DATA_ARGS:---mock-data --tokenizer-type NullTokenizer --vocab-size 50256}"  # NullTokenizer adds the end-of-document token
TRAIN_ARGS="${TRAIN_ARGS:---train-iters 100 --lr 1.0e-4 --eval-iters 0}"
PARALLEL_ARGS=(
  --tensor-model-parallel-size 2
  --pipeline-model-parallel-size 2
  --decoder-first-pipeline-num-layers 7
)
BATCH_ARGS=(
  --micro-batch-size 4
  --global-batch-size 64
)
MEMORY_ARGS=(
  --recompute-granularity selective
  --use-distributed-optimizer
)
MODEL_ARGS=(
  --num-layers 12
  --hidden-size 768
  --ffn-hidden-size 3072
  --num-attention-heads 12
  --seq-length 2048 --max-position-embeddings 2048
  --fp16
)
export CUDA_DEVICE_MAX_CONNECTIONS=1
exec $TORCHRUN --nnodes "$NNODES" --node_rank "$NODE_RANK" --nproc_per_node "$NPROC" \
  --master_addr "$MASTER_ADDR" --master_port "$MASTER_PORT" \
  "$MEGATRON/pretrain_gpt.py" "${PARALLEL_ARGS[@]}" "${BATCH_ARGS[@]}" "${MEMORY_ARGS[@]}" \
  "${MODEL_ARGS[@]}" $DATA_ARGS $TRAIN_ARGS "$@"

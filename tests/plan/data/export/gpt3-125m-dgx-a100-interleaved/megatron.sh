#!/usr/bin/env bash
# Megatron-LM launch of the strategy:dp=2,tp=2,pp=2,vpp=2,mbs=1,gbs=16,recompute=none,zero=0,schedule=interleaved,sp=0 plan for gpt3-125m on dgx-a100:1 (written by hetplan export): tp 2 x pp 2 x dp 2, 2 model chunks per stage
# It realises the plan as written.
# Run it on the node: bash THIS_SCRIPT
set -euo pipefail
NNODES=1
NODE_RANK="${NODE_RANK:-0}"
MASTER_ADDR="${MASTER_ADDR:-127.0.0.1}"
MASTER_PORT="${MASTER_PORT:-29500}"
TORCHRUN="${TORCHRUN:-torchrun}"  # or: python3 -m torch.distributed.run
case "$NODE_RANK" in
  0) NPROC=8; export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 ;;  # node a100/0: 8 x A100-SXM4-80GB
  *) echo "NODE_RANK: expected 0 to 0, got $NODE_RANK" >&2; exit 2 ;;
esac
# Megatron-LM's checkout, and your data and training settings:
MEGATRON="${MEGATRON:-.}"
DATA_ARGS="${DATA_ARGS:---mock-data --tokenizer-type NullTokenizer --vocab-size 50256}"  # NullTokenizer adds the end-of-document token
TRAIN_ARGS="${TRAIN_ARGS:---train-iters 100 --lr 1.0e-4 --eval-iters 0}"
PARALLEL_ARGS=(
  --tensor-model-parallel-size 2
  --pipeline-model-parallel-size 2
  --num-layers-per-virtual-pipeline-stage 3
)
BATCH_ARGS=(
  --micro-batch-size 1
  --global-batch-size 16
)
MEMORY_ARGS=(
)
MODEL_ARGS=(
  --num-layers 12
  --hidden-size 768
  --ffn-hidden-size 3072
  --num-attention-heads 12
  --seq-length 2048 --max-position-embeddings 2048
  --bf16
)
export CUDA_DEVICE_MAX_CONNECTIONS=1
exec $TORCHRUN --nnodes "$NNODES" --node_rank "$NODE_RANK" --nproc_per_node "$NPROC" \
  --master_addr "$MASTER_ADDR" --master_port "$MASTER_PORT" \
  "$MEGATRON/pretrain_gpt.py" "${PARALLEL_ARGS[@]}" "${BATCH_ARGS[@]}" "${MEMORY_ARGS[@]}" \
  "${MODEL_ARGS[@]}" $DATA_ARGS $TRAIN_ARGS "$@"

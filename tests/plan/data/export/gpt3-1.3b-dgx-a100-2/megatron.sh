#!/usr/bin/env bash
# Megatron-LM launch of the strategy:dp=4,tp=2,pp=2,vpp=1,mbs=2,gbs=512,recompute=selective,zero=1,schedule=1f1b,sp=1 plan for gpt3-1.3b on dgx-a100:2 (written by hetplan export): tp 2 x pp 2 x dp 4
# It realises the plan as written.
# Run it on each of the 2 nodes: NODE_RANK=<0..1> MASTER_ADDR=<node 0's address> bash THIS_SCRIPT
set -euo pipefail
NNODES=2
NODE_RANK="${NODE_RANK:?set NODE_RANK to this node's rank, 0 to NNODES-1}"
MASTER_ADDR="${MASTER_ADDR:?set MASTER_ADDR to node 0's address}"
MASTER_PORT="${MASTER_PORT:-29500}"
TORCHRUN="${TORCHRUN:-torchrun}"  # or: python3 -m torch.distributed.run
case "$NODE_RANK" in
  0) NPROC=8; export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 ;;  # node a100/0: 8 x A100-SXM4-80GB
  1) NPROC=8; export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 ;;  # node a100/1: 8 x A100-SXM4-80GB
  *) echo "NODE_RANK: expected 0 to 1, got $NODE_RANK" >&2; exit 2 ;;
esac
# Megatron-LM's checkout, and your data and training settings:
MEGATRON="${MEGATRON:-.}"
DATA_ARGS="${DATA_ARGS:---mock-data --tokenizer-type NullTokenizer --vocab-size 50256}"  # NullTokenizer adds the end-of-document token
TRAIN_ARGS="${TRAIN_ARGS:---train-iters 100 --lr 1.0e-4 --eval-iters 0}"
PARALLEL_ARGS=(
  --tensor-model-parallel-size 2
  --pipeline-model-parallel-size 2
  --sequence-parallel
)
BATCH_ARGS=(
  --micro-batch-size 2
  --global-batch-size 512
)
MEMORY_ARGS=(
  --recompute-granularity selective
  --use-distributed-optimizer
)
MODEL_ARGS=(
  --num-layers 24
  --hidden-size 2048
  --ffn-hidden-size 8192
  --num-attention-heads 16
  --seq-length 2048 --max-position-embeddings 2048
  --bf16
)
export CUDA_DEVICE_MAX_CONNECTIONS=1
exec $TORCHRUN --nnodes "$NNODES" --node_rank "$NODE_RANK" --nproc_per_node "$NPROC" \
  --master_addr "$MASTER_ADDR" --master_port "$MASTER_PORT" \
  "$MEGATRON/pretrain_gpt.py" "${PARALLEL_ARGS[@]}" "${BATCH_ARGS[@]}" "${MEMORY_ARGS[@]}" \
  "${MODEL_ARGS[@]}" $DATA_ARGS $TRAIN_ARGS "$@"

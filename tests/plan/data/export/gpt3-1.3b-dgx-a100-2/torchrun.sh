#!/usr/bin/env bash
# torchrun launch of hetplan's runtime for the strategy:dp=4,tp=2,pp=2,vpp=1,mbs=2,gbs=512,recompute=selective,zero=1,schedule=1f1b,sp=1 plan for gpt3-1.3b on dgx-a100:2 (written by hetplan export)
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
# hetplan's executable, and where the plan's ranks run (cuda: one GPU per worker).
HETPLAN="${HETPLAN:-hetplan}"
HETPLAN_DEVICE="${HETPLAN_DEVICE:-cuda}"
HERE="$(cd "$(dirname "$0")" && pwd)"
exec $TORCHRUN --nnodes "$NNODES" --node_rank "$NODE_RANK" --nproc_per_node "$NPROC" \
  --master_addr "$MASTER_ADDR" --master_port "$MASTER_PORT" --no_python \
  "$HETPLAN" run --plan "$HERE/plan.json" --model 'gpt3-1.3b' --cluster 'dgx-a100:2' \
  --ranks-by-device --device "$HETPLAN_DEVICE" --precision bf16 "$@"

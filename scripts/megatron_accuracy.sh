#!/usr/bin/env bash
# Simulates the ten rows of the Megatron-LM weak-scaling table (Narayanan et al., SC'21, Table 1;
# ../shared/reference/published-runs.md) on DGX A100 80GB pods and prints simulated against
# published TFLOP/s per GPU, with the mean absolute error. One set of device and network
# parameters serves every row (the defaults of the cost model).
#
# Assumed per row (not in the table): micro-batch size 1, full recomputation, 1F1B schedule,
# interleaved with 2 virtual stages... see ROWS below; sequence parallelism off (2021 paper).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${HETPLAN:-build/hetplan}
# params heads hidden layers tp pp gpus batch published
ROWS=(
  "1.7 24 2304 24 1 1 32 512 137"
  "3.6 32 3072 30 2 1 64 512 138"
  "7.5 32 4096 36 4 1 128 512 142"
  "18.4 48 6144 40 8 1 256 1024 135"
  "39.1 64 8192 48 8 2 512 1536 138"
  "76.1 80 10240 60 8 4 1024 1792 140"
  "145.6 96 12288 80 8 8 1536 2304 148"
  "310.1 128 16384 96 8 16 1920 2160 155"
  "529.6 128 20480 105 8 35 2520 2520 163"
  "1008.0 160 25600 128 8 64 3072 3072 163"
)
printf "%-8s %4s %4s %5s %6s %10s %10s %8s\n" params tp pp gpus batch published simulated error
sum=0; n=0; worst=0
for row in "${ROWS[@]}"; do
  read -r params heads hidden layers tp pp gpus batch pub <<<"$row"
  dp=$((gpus / (tp * pp)))
  nodes=$(((gpus + 7) / 8))
  model="gpt:layers=$layers,hidden=$hidden,heads=$heads,seq=2048,vocab=51200"
  strategy="dp=$dp,tp=$tp,pp=$pp,mbs=${MBS:-1},gbs=$batch,recompute=full"
  sim=$("$bin" simulate --model "$model" --cluster "dgx-a100:$nodes" --strategy "$strategy" --json |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["tflops_per_device"])')
  err=$(python3 -c "print(abs($sim-$pub)/$pub*100)")
  printf "%-8s %4s %4s %5s %6s %10s %10.1f %7.1f%%\n" "$params" "$tp" "$pp" "$gpus" "$batch" "$pub" "$sim" "$err"
  sum=$(python3 -c "print($sum+$err)"); n=$((n + 1))
  worst=$(python3 -c "print(max($worst,$err))")
done
python3 -c "print(f'mean absolute error {$sum/$n:.1f}%, worst {$worst:.1f}% over $n rows')"

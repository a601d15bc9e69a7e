#!/usr/bin/env bash
# Predicted against measured step time of `hetplan run` on this machine: calibrates the CPU
# (hetplan calibrate: op kinds, and all-reduces between two workers), then for each plan runs it
# for real (Gloo worker processes, one thread each; run --measured-out) and simulates it on the
# cpu:N cluster with that profile and this machine's cores against the measurements (simulate
# --measured --host-cores), and prints both with the error and the mean absolute error. The model
# runs in fp32, so it is simulated with dtype=fp32.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${HETPLAN:-build/hetplan}
steps=${STEPS:-12}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" calibrate --out "$work/cpu.json" >/dev/null

MLP="mlp:layers=3,hidden=512,in=256,out=10"
GPT="gpt:layers=2,hidden=128,heads=4,seq=64,vocab=256"
RESNET="resnet:depth=18,width=16,image=32,classes=10"
# An uneven plan: 2 ranks with 4 and 12 of 16 samples.
cat >"$work/uneven.json" <<JSON
{"version": 1, "global_batch": 16, "num_microbatches": 1,
 "stages": [{"first_layer": 0, "num_layers": 4,
             "replicas": [{"devices": [0], "batch_share": 0.25}, {"devices": [1], "batch_share": 0.75}]}]}
JSON
# HAP-style batch programs on 2 ranks: each rank takes its share of every micro-batch's samples;
# the GPT's word embedding is split by vocabulary, its MLP weights (and the MLP's first layer)
# are sharded and gathered whole for each pass.
cat >"$work/batch_gpt.json" <<JSON
{"version": 1, "global_batch": 16, "num_microbatches": 1,
 "stages": [{"first_layer": 0, "num_layers": 4,
             "replicas": [{"devices": [0, 1], "tp_shares": [0.5, 0.5], "batch_share": 1.0}]}],
 "op_overrides": [{"ops": "embedding.word", "split": "tensor"},
                  {"ops": "layers.*.mlp.*", "split": "batch_sharded"},
                  {"ops": "*", "split": "batch"}]}
JSON
cat >"$work/batch_mlp.json" <<JSON
{"version": 1, "global_batch": 64, "num_microbatches": 1,
 "stages": [{"first_layer": 0, "num_layers": 4,
             "replicas": [{"devices": [0, 1], "tp_shares": [0.5, 0.5], "batch_share": 1.0}]}],
 "op_overrides": [{"ops": "layers.0.*", "split": "batch_sharded"}, {"ops": "*", "split": "batch"}]}
JSON
# model ranks plan-args
ROWS=(
  "$MLP 1 --strategy=dp=1,gbs=64"
  "$MLP 2 --strategy=dp=2,gbs=64"
  "$GPT 1 --strategy=dp=1,gbs=8"
  "$GPT 1 --strategy=dp=1,gbs=16,mbs=4"
  "$GPT 2 --strategy=dp=2,gbs=16"
  "$GPT 2 --plan=$work/uneven.json"
  "$RESNET 1 --strategy=dp=1,gbs=16,mbs=16"
  "$RESNET 2 --strategy=dp=2,gbs=16,mbs=8"
  "$RESNET 2 --strategy=dp=2,gbs=16,mbs=8,bn=synced"
  "$GPT 2 --plan=$work/batch_gpt.json"
  "$MLP 2 --plan=$work/batch_mlp.json"
)
json_field() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
printf "%-45s %5s %-36s %12s %12s %8s\n" model ranks plan "measured ms" "predicted ms" error
sum=0; n=0
for row in "${ROWS[@]}"; do
  read -r model ranks plan <<<"$row"
  "$bin" run --model "$model" --nprocs "$ranks" "$plan" --steps "$steps" \
    --measured-out "$work/measured.json" >/dev/null
  sim=$("$bin" simulate --model "$model,dtype=fp32" --cluster "cpu:$ranks" "$plan" \
        --calibration "$work/cpu.json" --host-cores "$(nproc)" --measured "$work/measured.json" --json)
  measured=$(json_field "['measured']['iteration_time_s']" <<<"$sim")
  predicted=$(json_field "['iteration_time_s']" <<<"$sim")
  err=$(json_field "['measured']['error'] * 100" <<<"$sim")
  printf "%-45s %5s %-36s %12.2f %12.2f %+7.1f%%\n" "$model" "$ranks" "${plan##*/}" \
    "$(python3 -c "print(1e3 * $measured)")" "$(python3 -c "print(1e3 * $predicted)")" "$err"
  sum=$(python3 -c "print($sum + abs($err))"); n=$((n + 1))
done
python3 -c "print(f'mean absolute error {$sum / $n:.1f}% over $n plans')"

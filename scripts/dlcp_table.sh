#!/usr/bin/env bash
# DLCP's gradient transport in the simulator: one data-parallel plan per model (uneven data
# parallelism over the cluster's unlike GPUs, from `hetplan plan --algo uneven-dp`, with ZeRO 0:
# chunks carry whole gradients), simulated with each transport setting:
#   scripts/dlcp_table.sh [build/hetplan] [cluster]
# (global batches: GPT-3 1.3B 256, ResNet-50 1024)
# none/ecmp: DDP's buckets in backward order, flows hashed onto one spine each; layer: chunks by
# layer, the next forward pass of a layer starting once its chunks are in; spray: every flow over
# both spines; lossy: layer+magnitude with loss_bound=0.05 (dropped: bytes and squared norm).
# gain: none/ecmp over the row's time.
set -euo pipefail
HETPLAN=${1:-build/hetplan}
CLUSTER=${2:-leaf-spine-mixed}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-11s %-24s %11s %7s %9s %s\n' model transport "iter (s)" gain "sim (s)" dropped
for case in gpt3-1.3b:256 resnet50:1024; do
  m=${case%%:*}
  "$HETPLAN" plan --model "$m" --cluster "$CLUSTER" --global-batch "${case##*:}" --algo uneven-dp \
    --out "$tmp/base.json" >/dev/null
  base=""
  for v in "none ecmp 0" "layer ecmp 0" "none spray 0" "layer spray 0" \
    "layer+magnitude spray 0.05"; do
    read -r prio route bound <<<"$v"
    jq --arg p "$prio" --arg r "$route" --argjson b "$bound" \
      '.zero_stage = 0 | .grad_priority = $p | .multipath = $r | .loss_bound = $b' "$tmp/base.json" >"$tmp/v.json"
    start=$(date +%s.%N)
    "$HETPLAN" simulate --model "$m" --cluster "$CLUSTER" --plan "$tmp/v.json" --json \
      >"$tmp/r.json"
    end=$(date +%s.%N)
    t=$(jq '.iteration_time_s' "$tmp/r.json")
    base=${base:-$t}
    dropped=$(jq -r 'if .gradients and .gradients.loss_bound > 0 then
      "\(.gradients.dropped_fraction * 1000 | round / 10)% bytes, \(.gradients.dropped_norm_fraction * 10000 | round / 100)% norm^2"
      else "" end' "$tmp/r.json")
    label="$prio/$route"
    [ "$bound" != 0 ] && label="$label/$bound"
    printf '%-11s %-24s %11.4f %6.3fx %9.2f %s\n' "$m" "$label" "$t" \
      "$(echo "$base / $t" | bc -l)" "$(echo "$end - $start" | bc -l)" "$dropped"
  done
done

#!/usr/bin/env bash
# DLCP's transport on a real run: hetplan run --emulate (ranks in network namespaces, links
# limited by tc, cross traffic from a namespace of its own on the bridge) with each transport
# setting; the median and p99 of rank 0's gradient synchronisation time per step and of the step
# time, over the steps after the first two:
#   scripts/dlcp_run_table.sh [build/hetplan] [steps] [ranks] [background load]
# Needs root (namespaces, tc, cgroups) and jq. Defaults: 100 steps, 2 ranks, load 0.3.
# The cluster: `ranks` nodes of one CPU device each (together 1.8 cores), 200 Mbps NICs, cross
# traffic into every rank's link `load` of the time (one TCP flow, on and off in exponential
# periods of 50 ms mean on); then the same as a leaf-spine of 2 spines, where each rank has a
# link per spine at 100 Mbps.
# Rows, one path: off: Gloo's all-reduce in DDP's buckets (unmarked packets, the class of the
# cross traffic); layer: DLCP's chunks of 256 KiB in priority order, the first half of each step's
# gradient in the class above the cross traffic, the rest in its class; lossy: layer+magnitude
# with loss_bound=0.05 (chunks the deadline finds unsent are skipped); ps: parameter servers,
# layer order; one-class: layer's chunks, every one in the cross traffic's class (what the
# classes give). Two paths: off (Gloo, on the first path only), layer/ecmp (each flow hashed onto
# one path), layer/spray (every chunk split over both). gain: the table's first row's p99 over the
# row's. Gloo's numbers include what its all-reduce costs beside DLCP's transport on these links
# (compare off with one-class), not only the classes' effect (one-class with layer).
set -euo pipefail
HETPLAN=${1:-build/hetplan}
STEPS=${2:-100}
RANKS=${3:-2}
LOAD=${4:-0.3}
MODEL=${MODEL:-gpt:layers=2,hidden=192,heads=4,seq=64,vocab=2048}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
share=$(echo "scale=3; 1.8 / $RANKS" | bc -l)
cluster() {  # $1: the network entry
  cat <<YAML
version: 1
nodes:
  - {group: cpu, count: $RANKS, device: cpu, devices_per_node: 1, cpu_share: $share,
     intra_node: {bandwidth: 5GB/s}, nic: {bandwidth: 200Mbps, count: 1, latency: 50us}}
network: $1
YAML
}
cluster "{kind: switch, background_load: $LOAD}" >"$tmp/switch.yaml"
cluster "{kind: leaf-spine, spines: 2, nodes_per_leaf: 1, background_load: $LOAD}" >"$tmp/ls.yaml"
gbs=$((8 * RANKS))
header() {
  printf '%-12s %-12s %12s %12s %12s %12s %7s %s\n' paths transport "sync p50 ms" "sync p99 ms" \
    "step p50 ms" "step p99 ms" gain dropped
}
row() {  # $1 paths label, $2 label, $3 cluster file, $4 strategy or plan, rest: more options
  local paths=$1 label=$2 file=$3 strategy=$4
  shift 4
  "$HETPLAN" run --emulate --cluster "$file" --nprocs "$RANKS" --model "$MODEL" --steps "$STEPS" \
    "$strategy" "$@" --json >"$tmp/r.json" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
  read -r s50 s99 t50 t99 dropped < <(jq -r '
    def pct($p): sort | .[((length - 1) * $p | floor)];
    (.sync_times_s[2:]) as $s | (.step_times_s[2:]) as $t |
    [($s | pct(0.5)), ($s | pct(0.99)), ($t | pct(0.5)), ($t | pct(0.99)),
     ([.ranks[].grad_dropped_fraction] | add / length)] | @tsv' "$tmp/r.json")
  base=${base:-$s99}
  printf '%-12s %-12s %12.1f %12.1f %12.1f %12.1f %6.2fx %s\n' "$paths" "$label" \
    "$(echo "$s50 * 1000" | bc -l)" "$(echo "$s99 * 1000" | bc -l)" \
    "$(echo "$t50 * 1000" | bc -l)" "$(echo "$t99 * 1000" | bc -l)" "$(echo "$base / $s99" | bc -l)" \
    "$(if [ "$label" = lossy ]; then printf '%.2f%% of elements' "$(echo "$dropped * 100" | bc -l)"; fi)"
}
cat >"$tmp/ps.json" <<JSON
{"version": 1, "global_batch": $gbs, "grad_sync": [{"ops": "*", "method": "parameter_server"}],
 "grad_priority": "layer",
 "stages": [{"first_layer": 0, "num_layers": 4, "replicas": [
$(for ((r = 0; r < RANKS; r++)); do
    printf '   {"devices": [%d], "batch_share": %.6f}%s\n' "$r" "$(echo "1 / $RANKS" | bc -l)" \
      "$([ $r -lt $((RANKS - 1)) ] && echo ,)"
  done)]}]}
JSON
echo "cross traffic $LOAD of the time, $RANKS ranks, $STEPS steps, $MODEL"
header
base=""
row 1 off "$tmp/switch.yaml" "--strategy=dp=$RANKS,gbs=$gbs"
row 1 one-class "$tmp/switch.yaml" "--strategy=dp=$RANKS,gbs=$gbs,grad_priority=layer" \
  --grad-classes one
row 1 layer "$tmp/switch.yaml" "--strategy=dp=$RANKS,gbs=$gbs,grad_priority=layer"
row 1 lossy "$tmp/switch.yaml" \
  "--strategy=dp=$RANKS,gbs=$gbs,grad_priority=layer+magnitude,loss_bound=0.05"
row 1 ps "$tmp/switch.yaml" "--plan=$tmp/ps.json"
base=""
row 2 off "$tmp/ls.yaml" "--strategy=dp=$RANKS,gbs=$gbs"
base=""
row 2 layer/ecmp "$tmp/ls.yaml" "--strategy=dp=$RANKS,gbs=$gbs,grad_priority=layer"
row 2 layer/spray "$tmp/ls.yaml" "--strategy=dp=$RANKS,gbs=$gbs,grad_priority=layer,multipath=spray"

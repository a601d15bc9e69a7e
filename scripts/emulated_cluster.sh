#!/usr/bin/env bash
# An unlike cluster emulated on this machine (needs root): 2 fast + 2 slow CPU workers (0.6 and
# 0.2 of a core, 1.6 of the machine's 2 cores in all so that the kernel's networking and Gloo's
# threads have room; 1 Gb/s links). Calibrates the CPU, plans each model for that cluster, and runs
# for real (hetplan run --emulate) even data parallelism, the planner's plan and more plans; prints
# measured against predicted step times, the measured speed-up of the planner's plan over even
# data parallelism, and the mean prediction error.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${HETPLAN:-build/hetplan}
steps=${STEPS:-10}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" calibrate --out "$work/cpu.json" >/dev/null
cat >"$work/cluster.yaml" <<YAML
version: 1
nodes:
  - {group: fast, count: 2, device: cpu, devices_per_node: 1, cpu_share: 0.6,
     intra_node: {bandwidth: 5GB/s}, nic: {bandwidth: 1Gbps, count: 1, latency: 50us}}
  - {group: slow, count: 2, device: cpu, devices_per_node: 1, cpu_share: 0.2,
     intra_node: {bandwidth: 5GB/s}, nic: {bandwidth: 1Gbps, count: 1, latency: 50us}}
network: {kind: switch}
YAML
json_field() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
ranks() {  # plan arguments: the devices the plan uses (4 for a strategy)
  case $1 in
    --plan*) python3 -c "import json; p=json.load(open('${1#--plan }'));
groups = [r for s in p['stages'] for r in s['replicas']] if 'stages' in p else p['op_groups']
print(len({d for g in groups for d in g['devices']}))" ;;
    *) echo 4 ;;
  esac
}
# Runs the plan for real, then simulates it against what the run measured: the simulator's JSON.
# A worker's CPU quota is a budget per 100 ms period, so steps measured over less than a few
# periods run on unspent budget, faster than the steady state the simulator predicts: the run
# takes at least STEPS steps and enough more that its measured steps (all but the first two)
# span MIN_TIME seconds (3 by default: 30 periods, as the simulator's mean) by the prediction.
min_time=${MIN_TIME:-3}
measure_and_predict() {  # model, plan arguments
  local predicted n
  predicted=$("$bin" simulate --model "$1,dtype=fp32" --cluster "$work/cluster.yaml" $2 \
    --calibration "$work/cpu.json" --host-cores "$(nproc)" --json | json_field "['iteration_time_s']") || predicted=0
  n=$(python3 -c "import math; p = $predicted
print(max($steps, 2 + min(1000, math.ceil($min_time / p))) if p > 0 else $steps)")
  rm -f "$work/measured.json"  # a failed run must not leave the last plan's figures behind
  "$bin" run --model "$1" --cluster "$work/cluster.yaml" --nprocs "$(ranks "$2")" --emulate $2 \
    --steps "$n" --measured-out "$work/measured.json" >/dev/null 2>&1 || true
  "$bin" simulate --model "$1,dtype=fp32" --cluster "$work/cluster.yaml" $2 \
    --calibration "$work/cpu.json" --host-cores "$(nproc)" --measured "$work/measured.json" --json
}
printf "%-42s %-26s %12s %12s %8s\n" model plan "measured ms" "predicted ms" error
sum=0; n=0
for model in "mlp:layers=4,hidden=512,in=256,out=10" "gpt:layers=4,hidden=128,heads=4,seq=64,vocab=256"; do
  gbs=64; [[ $model == gpt* ]] && gbs=16
  "$bin" plan --model "$model,dtype=fp32" --cluster "$work/cluster.yaml" --global-batch $gbs \
    --calibration "$work/cpu.json" --out "$work/plan.json" >/dev/null
  for plan in "--strategy dp=4,gbs=$gbs" "--plan $work/plan.json" "--strategy dp=2,pp=2,gbs=$gbs,mbs=4" \
              "--strategy tp=2,dp=2,gbs=$gbs"; do
    sim=$(measure_and_predict "$model" "$plan")
    measured=$(json_field "['measured']['iteration_time_s']" <<<"$sim")
    predicted=$(json_field "['iteration_time_s']" <<<"$sim")
    err=$(json_field "['measured']['error'] * 100" <<<"$sim")
    label=${plan/$work\//}
    printf "%-42s %-26s %12.1f %12.1f %+7.1f%%\n" "$model" "$label" \
      "$(python3 -c "print(1e3 * $measured)")" "$(python3 -c "print(1e3 * $predicted)")" "$err"
    [[ $label == "--strategy dp=4,gbs=$gbs" ]] && even=$measured
    [[ $label == "--plan plan.json" ]] && planned=$measured
    sum=$(python3 -c "print($sum + abs($err))"); n=$((n + 1))
  done
  python3 -c "print(f'  {\"$model\"}: measured speed-up of the planner plan over even data parallelism {$even / $planned:.2f}x')"
done
python3 -c "print(f'mean absolute prediction error {$sum / $n:.1f}% over $n plans')"

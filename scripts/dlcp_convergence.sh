#!/usr/bin/env bash
# DLCP's bounded loss against convergence: the same small GPT, data, seed and global batch trained
# for STEPS steps (default 200) in one process, on 2 ranks with DLCP's transport and no loss bound,
# and on 2 ranks with loss_bound=0.05 at the bound's worst case (--grad-drop always: every step
# skips the least important 5% of gradient elements; 64 KiB chunks), on the text of $DATA
# (default docs/op-level-search.md, at byte level):
#   scripts/dlcp_convergence.sh [build/hetplan] [steps] [out dir]
# Prints the largest relative gap of the lossless run's losses from the one-process run's, and the
# gap of the lossy run's mean loss over the last 10 steps from the lossless one's. With an out
# dir, writes there curves.csv (step, one process, loss bound 0, loss bound 0.05) and report.html
# (the lossy run's `hetplan run --report`, which draws the three curves).
set -euo pipefail
HETPLAN=${1:-build/hetplan}
STEPS=${2:-200}
OUT=${3:-}
MODEL=${MODEL:-gpt:layers=2,hidden=128,heads=4,seq=64,vocab=256}
DATA=${DATA:-docs/op-level-search.md}  # English text, tokenised at byte level
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(run --json --model "$MODEL" --steps "$STEPS" --data "$DATA")
"$HETPLAN" "${common[@]}" --strategy dp=1,gbs=16 >"$tmp/one-process.json"
"$HETPLAN" "${common[@]}" --nprocs 2 --grad-chunk 64KiB \
  --strategy dp=2,gbs=16,grad_priority=layer+magnitude >"$tmp/loss-bound-0.json"
report=()
if [ -n "$OUT" ]; then
  mkdir -p "$OUT"
  report=(--report "$OUT/report.html" --compare "$tmp/one-process.json" --compare
    "$tmp/loss-bound-0.json")
fi
"$HETPLAN" "${common[@]}" --nprocs 2 --grad-chunk 64KiB --grad-drop always \
  --strategy dp=2,gbs=16,grad_priority=layer+magnitude,loss_bound=0.05 "${report[@]}" \
  >"$tmp/loss-bound-0.05.json"
jq -n --slurpfile a "$tmp/one-process.json" --slurpfile b "$tmp/loss-bound-0.json" \
  --slurpfile c "$tmp/loss-bound-0.05.json" -r '
  def tail10: .[-10:] | add / length;
  ($a[0].losses) as $one | ($b[0].losses) as $ll | ($c[0].losses) as $ly |
  ([range(0; $one | length)] | map((($ll[.] - $one[.]) | fabs) / $one[.]) | max) as $gap |
  ((($ly | tail10) - ($ll | tail10)) / ($ll | tail10)) as $lossy_gap |
  ([$c[0].ranks[].grad_dropped_fraction] | add / length) as $dropped |
  ([$c[0].ranks[].grad_dropped_norm_fraction] | add / length) as $norm |
  "steps                                             \($one | length)\n" +
  "one process: first loss, mean of the last 10      \($one[0]), \($one | tail10)\n" +
  "loss_bound=0: largest gap from one process        \($gap) (relative)\n" +
  "loss_bound=0.05: mean of the last 10              \($ly | tail10)\n" +
  "loss_bound=0.05 against loss_bound=0              \($lossy_gap * 1000000 | round / 10000)%\n" +
  "loss_bound=0.05 dropped per step                  \($dropped * 10000 | round / 100)% of the elements, \($norm * 10000 | round / 100)% of the squared norm"'
if [ -n "$OUT" ]; then
  jq -n --slurpfile a "$tmp/one-process.json" --slurpfile b "$tmp/loss-bound-0.json" \
    --slurpfile c "$tmp/loss-bound-0.05.json" -r '
    "step,one_process,loss_bound_0,loss_bound_0.05",
    ([range(0; $a[0].losses | length)] | .[] as $i |
      "\($i),\($a[0].losses[$i]),\($b[0].losses[$i]),\($c[0].losses[$i])")' >"$OUT/curves.csv"
fi

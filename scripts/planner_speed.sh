#!/usr/bin/env bash
# Prints how long `hetplan plan --algo A` takes (wall-clock seconds, the whole command) for every
# zoo model on the preset clusters of up to 64 unlike GPUs, and the simulated iteration time of the
# plan it returns ("-": no plan fits):
#   scripts/planner_speed.sh [build/hetplan] [global batch] [algo ...]
# Default algorithms: hap uneven-dp pipeline. The algorithm `pareto` times `hetplan pareto` (Frontier
# Tracking) instead, and prints the iteration time of its fastest point. The last lines: per
# algorithm, the slowest case.
set -euo pipefail
HETPLAN=${1:-build/hetplan}
BATCH=${2:-256}
shift $(($# > 2 ? 2 : $#))
algos=("$@")
((${#algos[@]})) || algos=(hap uneven-dp pipeline)
models=$("$HETPLAN" models | awk 'NR > 1 && $1 != "Families" && NF {print $1}')
clusters=(heterog-mixed tag-mixed hap-mixed a100-v100 h100-a100-l4)
out=/tmp/planner_speed.$$
printf '%-10s %-14s %-14s %9s %14s\n' algo model cluster "time (s)" "iteration (s)"
for a in "${algos[@]}"; do
  for c in "${clusters[@]}"; do
    for m in $models; do
      start=$(date +%s.%N)
      if [[ $a == pareto ]]; then
        cmd=(pareto)
      else
        cmd=(plan --algo "$a")
      fi
      "$HETPLAN" "${cmd[@]}" --model "$m" --cluster "$c" -b "$BATCH" --json >"$out" 2>/dev/null || true
      end=$(date +%s.%N)
      it=$(python3 -c 'import json,sys
try:
  d = json.load(open(sys.argv[1]))
  print("%.4g" % (min(p["iteration_time_s"] for p in d["points"]) if "points" in d
                  else d["iteration_time_s"]))
except Exception: print("-")' "$out")
      printf '%-10s %-14s %-14s %9.2f %14s\n' "$a" "$m" "$c" "$(echo "$end - $start" | bc)" "$it"
    done
  done
done | tee "$out.table"
for a in "${algos[@]}"; do
  awk -v a="$a" '$1 == a && $4 + 0 > worst {worst = $4 + 0; at = $2 " on " $3}
                 END {printf "slowest %s: %.2f s (%s)\n", a, worst, at}' "$out.table"
done
rm -f "$out" "$out.table"

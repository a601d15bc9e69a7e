#!/usr/bin/env bash
# Prints, for every zoo model on the preset clusters of unlike GPUs, what `hetplan plan` gains by
# trying its best 1F1B pipeline under the interleaved schedule (find_plan's refinement): the 1F1B
# plan's simulated iteration time, the interleaved one's, its model chunks per stage and its
# recomputation, where the simulator found one faster ("-": the plan kept its schedule, or is no
# pipeline):
#   scripts/interleaved_gain.sh [build/hetplan] [global batch]
# The last line counts the cases that changed and their mean and largest gain.
set -euo pipefail
HETPLAN=${1:-build/hetplan}
BATCH=${2:-256}
models=$("$HETPLAN" models | awk 'NR > 1 && $1 != "Families" && NF {print $1}')
clusters=(heterog-mixed tag-mixed hap-mixed a100-v100 h100-a100-l4)
out=/tmp/interleaved_gain.$$
printf '%-14s %-14s %12s %16s %7s %10s %7s\n' model cluster "1f1b (s)" "interleaved (s)" chunks recompute gain
for c in "${clusters[@]}"; do
  for m in $models; do
    line=$("$HETPLAN" plan --verbose --model "$m" --cluster "$c" -b "$BATCH" 2>&1 >/dev/null |
      grep -m1 '^hetplan: interleaved:' || true)
    if [[ -z $line ]]; then
      printf '%-14s %-14s %12s %16s %7s %10s %7s\n' "$m" "$c" - - - - -
      continue
    fi
    # "hetplan: interleaved: V model chunks per stage, recompute R: T s (1F1B T0 s)"
    python3 - "$m" "$c" "$line" <<'PY'
import re, sys
m, c, line = sys.argv[1:]
v, r, t, t0 = re.search(
    r"interleaved: (\d+) model chunks per stage, recompute (\w+): ([\d.e+-]+) s \(1F1B ([\d.e+-]+) s\)",
    line).groups()
print("%-14s %-14s %12s %16s %7s %10s %6.1f%%" % (m, c, t0, t, v, r, 100 * (float(t0) / float(t) - 1)))
PY
  done
done | tee "$out"
python3 - "$out" <<'PY'
import sys
gains = [float(l.split()[-1].rstrip('%')) for l in open(sys.argv[1]) if l.split()[-1] != '-']
cases = sum(1 for _ in open(sys.argv[1]))
if gains:
    print("interleaved in %d of %d cases: mean gain %.1f%%, largest %.1f%%" % (len(gains), cases, sum(gains) / len(gains), max(gains)))
else:
    print("interleaved in 0 of %d cases" % cases)
PY
rm -f "$out"

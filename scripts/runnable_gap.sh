#!/usr/bin/env bash
# Prints what `hetplan plan` loses by choosing only plans `hetplan run` executes: for every zoo
# model on the preset clusters of unlike GPUs, the simulated iteration time of the plan `plan`
# chooses and of the one `plan --any-form` chooses (every form the simulator prices), and, where
# the second is faster, why `run --check` refuses it ("-": no plan fits):
#   scripts/runnable_gap.sh [build/hetplan] [global batch] [time limit s]
# MODELS="a b" and CLUSTERS="c d" narrow the sweep.
# The last line counts the cases where a refused plan was faster.
set -euo pipefail
HETPLAN=${1:-build/hetplan}
BATCH=${2:-256}
LIMIT=${3:-10}
models=${MODELS:-$("$HETPLAN" models | awk 'NR > 1 && $1 != "Families" && NF {print $1}')}
read -r -a clusters <<<"${CLUSTERS:-heterog-mixed tag-mixed hap-mixed a100-v100 h100-a100-l4 mixed-nodes}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
time_of() {  # plan's simulated iteration time, or "-"
  "$HETPLAN" plan --json "$@" -b "$BATCH" --time-limit "$LIMIT" 2>/dev/null |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["iteration_time_s"])' 2>/dev/null ||
    echo -
}
printf '%-14s %-14s %12s %12s  %s\n' model cluster "runnable (s)" "any form (s)" "why refused"
for c in "${clusters[@]}"; do
  for m in $models; do
    a=$(time_of -m "$m" -c "$c" -o "$work/runnable.json")
    b=$(time_of -m "$m" -c "$c" --any-form -o "$work/any.json")
    why=""
    if [[ $a != - && $b != - ]] && python3 -c "import sys; sys.exit(0 if $a > $b * 1.0001 else 1)"; then
      why=$("$HETPLAN" run --check --plan "$work/any.json" -m "$m" -c "$c" 2>&1 | sed -n 2p |
        sed 's/^ *//' | cut -c1-120 || true)
    fi
    printf '%-14s %-14s %12s %12s  %s\n' "$m" "$c" "$a" "$b" "$why"
  done
done | tee "$work/table"
python3 - "$work/table" <<'PY'
import sys
rows = [l.split(None, 4) for l in open(sys.argv[1])]
gaps = [100 * (float(r[2]) / float(r[3]) - 1) for r in rows if len(r) > 4 and r[4].strip()]
print("a refused plan was faster in %d of %d cases%s" % (
    len(gaps), len(rows), (": mean %.1f%%, largest %.1f%%" % (sum(gaps) / len(gaps), max(gaps))) if gaps else ""))
PY

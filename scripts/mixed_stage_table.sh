#!/usr/bin/env bash
# Pipeline stages that span device types (Sailor-style) against one device group per stage: the
# pipeline planner alone (--algo pipeline) with and without --one-type-per-stage, and `auto`
# (every planner) with and without, on the mixed presets:
#   scripts/mixed_stage_table.sh [build/hetplan] [global batch]
# "gain" = the one-type-per-stage time / the time with mixed stages allowed (above 1: mixed wins);
# "mixed" says whether the chosen plan has a stage spanning types.
set -euo pipefail
HETPLAN=${1:-build/hetplan}
BATCH=${2:-512}
models=(gpt3-1.3b llama2-7b bert-large resnet50)
clusters=(heterog-mixed tag-mixed hap-mixed a100-v100 h100-a100-l4 data/clusters/mixed-nodes.yaml)
printf '%-12s %-14s %-8s %12s %12s %7s %6s\n' model cluster algo "one type (s)" "mixed (s)" gain mixed
run() {  # model cluster algo [flag]: prints "time spans" or "- -"
  if out=$("$HETPLAN" plan --model "$1" --cluster "$2" --global-batch "$BATCH" --algo "$3" \
    ${4:-} --json 2>/dev/null); then
    python3 -c '
import json, sys
j = json.loads(sys.argv[1])
if "samples_by_device_type" not in j:  # an op-level plan (TAG, HeteroG)
    print(j["iteration_time_s"], "op-level")
    sys.exit()
per = j["samples_by_device_type"]
spans = any(len({t["device_type"] for t in per if t["stage"] == s}) > 1 for s in {t["stage"] for t in per})
print(j["iteration_time_s"], "yes" if spans else "no")' "$out"
  else
    echo "- -"
  fi
}
for m in "${models[@]}"; do
  for c in "${clusters[@]}"; do
    for algo in pipeline auto; do
      read -r one _ < <(run "$m" "$c" "$algo" --one-type-per-stage)
      read -r mixed spans < <(run "$m" "$c" "$algo")
      python3 -c '
import sys
m, c, a, one, mixed, spans = sys.argv[1:]
f = lambda v: "-" if v == "-" else f"{float(v):.4g}"
gain = "-" if "-" in (one, mixed) else f"{float(one) / float(mixed):.2f}x"
c = c.split("/")[-1].removesuffix(".yaml")
print(f"{m:<12} {c:<14} {a:<8} {f(one):>12} {f(mixed):>12} {gain:>7} {spans:>6}")' \
        "$m" "$c" "$algo" "$one" "$mixed" "$spans"
    done
  done
done

#!/usr/bin/env bash
# Prints the planner's gain over the best of the three baselines (even DP, speed-proportional DP,
# best uniform Megatron grid), same simulator, on the mixed cluster presets:
#   scripts/gain_table.sh [build/hetplan] [global batch]
# "gain" = best fitting baseline's iteration time / the plan's; "-" where no baseline fits.
set -euo pipefail
HETPLAN=${1:-build/hetplan}
BATCH=${2:-512}
models=(gpt3-1.3b llama2-7b bert-large resnet50 vit-l16 mixtral-8x7b)
clusters=(heterog-mixed tag-mixed hap-mixed a100-v100 h100-a100-l4)
printf '%-14s %-14s %10s %-16s %12s %-16s %7s %8s\n' model cluster "plan (s)" planner \
  "best base" "baseline" gain "search"
for m in "${models[@]}"; do
  for c in "${clusters[@]}"; do
    if out=$("$HETPLAN" plan --model "$m" --cluster "$c" --global-batch "$BATCH" --json 2>/tmp/gain_err); then
      python3 - "$m" "$c" "$out" <<'PY'
import json, sys
m, c, j = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
fit = [b for b in j["baselines"] if b["fits"]]
t = j["iteration_time_s"]
if fit:
    b = min(fit, key=lambda b: b["iteration_time_s"])
    gain = f'{b["iteration_time_s"] / t:.2f}x'
    base, bname = f'{b["iteration_time_s"]:.4g}', b["name"]
else:
    gain, base, bname = "-", "-", "(none fits)"
print(f'{m:<14} {c:<14} {t:>10.4g} {j["planner"]:<16} {base:>12} {bname:<16} {gain:>7} {j["search_time_s"]:>7.2f}s')
PY
    else
      printf '%-14s %-14s %s\n' "$m" "$c" "$(cut -c1-110 /tmp/gain_err)"
    fi
  done
done

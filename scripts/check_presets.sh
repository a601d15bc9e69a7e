#!/usr/bin/env bash
# Whether `hetplan run` accepts what `hetplan plan` chooses: plans each model on each preset
# cluster with each planner (at its full scale, a time limit per search) and asks `run --check`,
# one line per case and a count at the end.
#   scripts/check_presets.sh [build/hetplan] [global batch] [time limit s] [algos] [models] [clusters] [plan flags]
# algos, models and clusters are comma-separated (defaults: auto; every zoo preset; the GPU
# presets of up to 32 devices). `plan` chooses only plans `run` executes unless given
# --any-form: pass it as the plan flags to see which forms the planners would choose that the
# runtime does not execute yet. Output columns: model, cluster, algo, verdict (runnable / refused /
# no plan), and the first reason.
set -uo pipefail
HETPLAN=${1:-build/hetplan}
BATCH=${2:-64}
LIMIT=${3:-20}
IFS=, read -r -a algos <<<"${4:-auto}"
if [[ -n "${5:-}" ]]; then
  IFS=, read -r -a models <<<"$5"
else
  mapfile -t models < <("$HETPLAN" models | awk 'NR > 1 && NF > 1 && $1 !~ /:$/ {print $1}' |
                          grep -v '^Families')
fi
IFS=, read -r -a clusters <<<"${6:-dgx-a100:1,heterog-mixed,tag-mixed,hap-mixed,a100-v100,h100-a100-l4}"
read -r -a plan_flags <<<"${7:-}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
runnable=0 refused=0 failed=0
printf '%-14s %-14s %-10s %-10s %s\n' model cluster algo verdict reason
for c in "${clusters[@]}"; do
  for m in "${models[@]}"; do
    for a in "${algos[@]}"; do
      if ! "$HETPLAN" plan --model "$m" --cluster "$c" --global-batch "$BATCH" --algo "$a" \
           --time-limit "$LIMIT" "${plan_flags[@]}" -o "$work/p.json" >/dev/null 2>"$work/err"; then
        printf '%-14s %-14s %-10s %-10s %s\n' "$m" "$c" "$a" "no plan" "$(tail -1 "$work/err" | cut -c1-90)"
        failed=$((failed + 1))
        continue
      fi
      if "$HETPLAN" run --check --model "$m" --cluster "$c" --plan "$work/p.json" >"$work/out" 2>&1; then
        printf '%-14s %-14s %-10s %-10s\n' "$m" "$c" "$a" runnable
        runnable=$((runnable + 1))
      else
        printf '%-14s %-14s %-10s %-10s %s\n' "$m" "$c" "$a" refused "$(grep -A1 '^not runnable:' "$work/out" | sed -n 2p | sed 's/^ *//' | cut -c1-110)"
        refused=$((refused + 1))
      fi
    done
  done
done
echo "runnable $runnable, refused $refused, no plan $failed"

#!/usr/bin/env bash
# An elastic run, measured: a job of N workers checkpoints every K steps; after its first
# checkpoint one worker is killed (SIGKILL, a lost device); `hetplan run --elastic` plans for the
# devices left and resumes. Prints where it resumed, the plan it chose, how long from the kill to
# the end, and the largest relative difference of its losses from an uninterrupted run's.
#   scripts/elastic_run.sh [build/hetplan] [model] [strategy] [cluster] [steps] [extra run args]
# e.g. scripts/elastic_run.sh build/hetplan gpt:layers=2,hidden=64,heads=4,seq=32,vocab=256 \
#        dp=3,gbs=12 cpu:3 40 --emulate
set -euo pipefail
HETPLAN=${1:-build/hetplan}
MODEL=${2:-gpt:layers=2,hidden=64,heads=4,seq=32,vocab=256}
STRATEGY=${3:-dp=3,gbs=12}
CLUSTER=${4:-cpu:3}
STEPS=${5:-40}
shift $(($# < 5 ? $# : 5))
EXTRA=("$@")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ranks=$("$HETPLAN" run --check --model "$MODEL" --cluster "$CLUSTER" --strategy "$STRATEGY" |
        sed -n 's/^runnable: \([0-9]*\) ranks.*/\1/p')
job=(--model "$MODEL" --cluster "$CLUSTER" --strategy "$STRATEGY" --nprocs "$ranks")
"$HETPLAN" run --json --steps "$STEPS" "${job[@]}" "${EXTRA[@]}" >"$work/whole.json"
"$HETPLAN" run --json --steps "$STEPS" "${job[@]}" "${EXTRA[@]}" --checkpoint "$work/ck" \
  --checkpoint-every 5 --elastic >"$work/elastic.json" 2>"$work/elastic.err" &
launcher=$!
for _ in $(seq 600); do [[ -f "$work/ck/latest" ]] && break; sleep 0.05; done
victim=""
for p in $(pgrep -P "$launcher"); do
  if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'RANK=1'; then victim=$p; fi
done
[[ -n "$victim" ]] || { echo "no worker of rank 1 found" >&2; exit 1; }
killed=$(date +%s.%N)
kill -9 "$victim"
wait "$launcher"
ended=$(date +%s.%N)
grep -- '--elastic' "$work/elastic.err" || true
python3 - "$work" "$killed" "$ended" <<'PY'
import json, sys, glob
work, killed, ended = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
whole = json.load(open(f"{work}/whole.json"))["losses"]
run = json.load(open(f"{work}/elastic.json"))
first, losses = run["first_step"], run["losses"]
plan = json.load(open(glob.glob(f"{work}/ck/plan-from-step-*.json")[0]))
devices = sorted(d for s in plan["stages"] for r in s["replicas"] for d in r["devices"])
diff = max(abs(a - whole[first + i]) / abs(whole[first + i]) for i, a in enumerate(losses))
print(f"resumed at step {first} on devices {devices} ({len(plan['stages'])} stage(s)); "
      f"{len(losses)} steps after the kill, {ended - killed:.1f} s from the kill to the end; "
      f"largest relative loss difference from the uninterrupted run {diff:.2e}")
PY

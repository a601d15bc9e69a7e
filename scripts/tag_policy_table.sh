#!/usr/bin/env bash
# Prints, for models and clusters held out of `hetplan train-policy`'s cases (the zoo's presets at
# their published sizes, and the testbed clusters in data/clusters; training draws smaller models
# and random clusters), what each op-level planner gains over the best stage-level plan:
#   scripts/tag_policy_table.sh [build/hetplan] [policy file] [simulations] [global batch]
# stage: the best of uneven-dp, pipeline and hap (the plans --algo tag starts from);
# learned: TAG's tree search with the trained prior; uniform: the same search with a uniform prior
# and the same number of simulations (the learned search's count includes the decoder's 16 plans it
# starts from); heterog: the trained decoder alone (the greedy plan and 31 drawn).
# A gain is stage / planner (below 1: that op-level plan is slower). Search times in seconds.
# The last lines: geometric means, and in how many cells the learned prior beats the uniform one.
set -euo pipefail
HETPLAN=${1:-build/hetplan}
POLICY=${2:-data/policy/tag.pt}
SIMS=${3:-200}
BATCH=${4:-256}
models=(vgg16 resnet50 inception-v3 bert-base vit-b16)
clusters=(tag-mixed data/clusters/tag-5g.yaml data/clusters/heterog-slow.yaml data/clusters/hap-mixed.yaml)
out=/tmp/tag_policy_table.$$
printf '%-13s %-13s %10s %9s %6s %9s %6s %9s %6s\n' model cluster "stage (s)" learned time \
  uniform time heterog time
for c in "${clusters[@]}"; do
  for m in "${models[@]}"; do
    common=(plan --model "$m" --cluster "$c" --global-batch "$BATCH" -v)
    "$HETPLAN" "${common[@]}" --algo tag --policy "$POLICY" --simulations "$SIMS" \
      >/dev/null 2>"$out.learned" || true
    "$HETPLAN" "${common[@]}" --algo tag --policy none --simulations "$SIMS" \
      >/dev/null 2>"$out.uniform" || true
    "$HETPLAN" "${common[@]}" --algo heterog --policy "$POLICY" >/dev/null 2>"$out.heterog" || true
    python3 - "$m" "$c" "$out" <<'PY'
import os, re, sys
m, c, out = sys.argv[1:]
def log(k): return open(f"{out}.{k}").read()
def found(text, name):
    x = re.search(rf"hetplan: {name}: .* best ([0-9.e+-]+) s.*\(([0-9.]+) s\)", text)
    return (float(x.group(1)), float(x.group(2))) if x else None
stage = [found(log("learned"), n) for n in ("uneven-dp", "pipeline", "hap")]
stage = [s[0] for s in stage if s]
cname = os.path.splitext(os.path.basename(c))[0]
cells = []
for k, name in (("learned", "tag"), ("uniform", "tag"), ("heterog", "heterog")):
    r = [l for l in log(k).splitlines() if l.startswith(f"hetplan: {name}:") and "candidates" in l]
    f = found(r[-1], name) if r else None
    cells.append(f)
if not stage:
    print(f"{m:<13} {cname:<13} (no stage-level plan: {log('learned').strip().splitlines()[-1][:70]})")
    sys.exit(0)
s = min(stage)
row = f"{m:<13} {cname:<13} {s:>10.4g}"
for f in cells:
    row += f" {s / f[0]:>8.3f}x {f[1]:>6.1f}" if f else f" {'-':>9} {'-':>6}"
print(row)
PY
  done
done | tee "$out.table"
python3 - "$out.table" <<'PY'
import math, re, sys
rows = [l.split() for l in open(sys.argv[1]) if re.search(r"x ", l)]
cols = {"learned": 3, "uniform": 5, "heterog": 7}
for name, i in cols.items():
    g = [float(r[i].rstrip("x")) for r in rows if len(r) > i and r[i] != "-"]
    if g:
        print(f"geometric mean gain, {name}: {math.exp(sum(map(math.log, g)) / len(g)):.3f}x over {len(g)} cells")
g = [max(1.0, float(r[3].rstrip("x"))) for r in rows if len(r) > 3 and r[3] != "-"]
if g:
    print(f"geometric mean gain, --algo tag with the learned prior (the faster of its op-level plan "
          f"and the stage plan): {math.exp(sum(map(math.log, g)) / len(g)):.3f}x")
pairs = [(float(r[3].rstrip("x")), float(r[5].rstrip("x"))) for r in rows
         if len(r) > 5 and r[3] != "-" and r[5] != "-"]
if pairs:
    ratio = math.exp(sum(math.log(a / b) for a, b in pairs) / len(pairs))
    print(f"learned vs uniform prior at {len(pairs)} cells: better in {sum(a > b * 1.0005 for a, b in pairs)}, "
          f"worse in {sum(a < b / 1.0005 for a, b in pairs)}, geometric mean {ratio:.3f}x")
PY
rm -f "$out".*

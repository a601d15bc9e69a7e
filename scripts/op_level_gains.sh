#!/usr/bin/env bash
# Prints what TAG's op-level search (`plan --algo tag`) finds against the stage-level planners,
# on CNNs and BERT over slow links between unlike GPUs:
#   scripts/op_level_gains.sh [build/hetplan] [global batch]
# stage: the best of uneven-dp, pipeline and hap (same simulator); tag: the best op-level plan the tree
# search simulated; gain: stage / tag (below 1: the op-level plan is slower, and --algo tag returns
# the stage-level one); search: tag's own search time. The last line: geometric means.
set -euo pipefail
HETPLAN=${1:-build/hetplan}
BATCH=${2:-256}
models=(vgg16 vgg19 resnet50 resnet101 inception-v3 bert-base bert-large)
clusters=(tag-mixed data/clusters/tag-5g.yaml data/clusters/heterog-slow.yaml)
printf '%-13s %-13s %10s %-11s %10s %7s %7s %8s\n' model cluster "stage (s)" planner "tag (s)" \
  groups gain search
for c in "${clusters[@]}"; do
  for m in "${models[@]}"; do
    "$HETPLAN" plan --model "$m" --cluster "$c" --global-batch "$BATCH" --algo tag -v \
      >/dev/null 2>/tmp/op_level_gains.err || true
    python3 - "$m" "$c" /tmp/op_level_gains.err <<'PY'
import math, os, re, sys
m, c, log = sys.argv[1], sys.argv[2], open(sys.argv[3]).read()
best = {}
for name in ("uneven-dp", "pipeline", "hap"):
    x = re.search(rf"hetplan: {name}: .* best ([0-9.e+-]+) s", log)
    if x: best[name] = float(x.group(1))
t = re.search(r"hetplan: tag: (\d+) groups.*best ([0-9.e+-]+) s", log)
s = re.search(r"hetplan: tag: \d+ candidates estimated.*\(([0-9.]+) s\)", log)
cname = os.path.splitext(os.path.basename(c))[0]
if not best or not t:
    print(f"{m:<13} {cname:<13} (no result: {log.strip().splitlines()[-1][:60] if log.strip() else '?'})")
    sys.exit(0)
planner = min(best, key=best.get)
tag = float(t.group(2))
print(f"{m:<13} {cname:<13} {best[planner]:>10.4g} {planner:<11} {tag:>10.4g} {t.group(1):>7} "
      f"{best[planner] / tag:>6.2f}x {float(s.group(1)) if s else 0:>7.2f}s")
PY
  done
done | tee /tmp/op_level_gains.table
python3 - <<'PY'
import math, re
gains = [float(g) for g in re.findall(r" ([0-9.]+)x ", open("/tmp/op_level_gains.table").read())]
if gains:
    gm = math.exp(sum(map(math.log, gains)) / len(gains))
    best = [max(g, 1.0) for g in gains]
    gb = math.exp(sum(map(math.log, best)) / len(best))
    print(f"geometric mean over {len(gains)} cells: op-level alone {gm:.3f}x, --algo tag (best of both) {gb:.3f}x")
PY

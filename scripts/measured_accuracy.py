#!/usr/bin/env python3
"""Predicted against measured, for every published set of training runs under data/measured/.

Each data/measured/*.csv holds one set: comment lines (#) naming its source and what was assumed,
a line "# held-out" if no constant of the cost model was ever set against it, then rows of
    id, model (hetplan spec), cluster (preset or file), strategy, metric, value
where metric is what the source measured:
    iteration_s, iteration_ms   time of one training iteration
    tokens_per_s, samples_per_s aggregate throughput
    memory_gib                  peak memory of the fullest device (GiB)
    activations_gib             activation memory of the fullest device (GiB)
Each row is simulated once with `hetplan simulate --json` (one set of cost-model constants for every
row: nothing is fitted per row or per set), and the script prints each row's prediction, its error,
and per set the mean absolute error of time-like and of memory metrics, held-out sets apart.

    scripts/measured_accuracy.py [--hetplan build/hetplan] [--set NAME] [--check]

--check: exit non-zero if a row fails to simulate (used by the tests); prints the same table.
"""
import argparse
import csv
import glob
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIME_METRICS = {"iteration_s", "iteration_ms", "tokens_per_s", "samples_per_s"}
MEMORY_METRICS = {"memory_gib", "activations_gib"}


def read_set(path):
    comments, rows = [], []
    with open(path, newline="") as f:
        lines = [l for l in f if l.strip()]
    held_out = any(l.strip() == "# held-out" for l in lines)
    data = [l for l in lines if not l.startswith("#")]
    for row in csv.DictReader(data):
        missing = [k for k in ("id", "model", "cluster", "strategy", "metric", "value") if not row.get(k)]
        if missing:
            sys.exit(f"{path}: row {row.get('id') or '?'}: missing {', '.join(missing)}")
        if row["metric"] not in TIME_METRICS | MEMORY_METRICS:
            sys.exit(f"{path}: row {row['id']}: metric: unknown '{row['metric']}'")
        rows.append(row)
    return held_out, rows


def simulate(hetplan, row, cache):
    key = (row["model"], row["cluster"], row["strategy"])
    if key not in cache:
        cmd = [hetplan, "simulate", "--model", row["model"], "--cluster", row["cluster"],
               "--strategy", row["strategy"], "--json"]
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        cache[key] = json.loads(r.stdout) if r.returncode == 0 else r.stderr.strip()
    return cache[key]


def predicted(result, metric):
    if metric == "iteration_s":
        return result["iteration_time_s"]
    if metric == "iteration_ms":
        return result["iteration_time_s"] * 1e3
    if metric == "tokens_per_s":
        return result["tokens_per_s"]
    if metric == "samples_per_s":
        return result["samples_per_s"]
    if metric == "memory_gib":
        return result["memory"]["max_peak_bytes"] / 2**30
    if metric == "activations_gib":
        return max(d["activations_bytes"] for d in result["devices"]) / 2**30
    raise ValueError(metric)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hetplan", default=os.environ.get("HETPLAN", os.path.join(ROOT, "build", "hetplan")))
    ap.add_argument("--set", help="only this set (file name without .csv)")
    ap.add_argument("--check", action="store_true", help="fail when a row does not simulate")
    a = ap.parse_args()
    files = sorted(glob.glob(os.path.join(ROOT, "data", "measured", "*.csv")))
    if a.set:
        files = [f for f in files if os.path.basename(f)[:-4] == a.set]
        if not files:
            sys.exit(f"--set: no data/measured/{a.set}.csv")
    cache, failures, summary, no_fit = {}, 0, [], {}
    for path in files:
        name = os.path.basename(path)[:-4]
        held_out, rows = read_set(path)
        print(f"\n{name}{' (held out)' if held_out else ''}")
        print(f"{'run':<26} {'metric':<16} {'measured':>12} {'predicted':>12} {'error':>8}")
        errors = {"time": [], "memory": []}
        for row in rows:
            result = simulate(a.hetplan, row, cache)
            measured = float(row["value"])
            if isinstance(result, str):
                # A run the source measured that hetplan says cannot fit is a memory error of the
                # model, not of the data: counted apart. Anything else is a bad row.
                oom = "does not fit" in result
                if oom:
                    no_fit[name] = no_fit.get(name, 0) + 1
                else:
                    failures += 1
                print(f"{row['id']:<26} {row['metric']:<16} {measured:>12.6g} "
                      f"{'no fit' if oom else 'failed':>12}  {result.removeprefix('hetplan: ')}")
                continue
            p = predicted(result, row["metric"])
            # Throughputs are compared as the times they imply, so an error means the same for every
            # metric: +10% is a prediction 10% slower (or 10% more memory) than measured.
            if row["metric"] in ("tokens_per_s", "samples_per_s"):
                err = (measured / p - 1) * 100
            else:
                err = (p / measured - 1) * 100
            fits = "" if result["memory"]["fits"] else "  (does not fit)"
            errors["time" if row["metric"] in TIME_METRICS else "memory"].append(err)
            print(f"{row['id']:<26} {row['metric']:<16} {measured:>12.6g} {p:>12.6g} {err:>+7.1f}%{fits}")
        for kind, errs in errors.items():
            if errs:
                mean_abs = sum(abs(e) for e in errs) / len(errs)
                bias = sum(errs) / len(errs)
                summary.append((name, held_out, kind, len(errs), mean_abs, bias))
    print("\nset                        held out  kind     runs  mean |error|  mean error")
    for name, held_out, kind, n, mean_abs, bias in summary:
        print(f"{name:<26} {'yes' if held_out else 'no':<9} {kind:<8} {n:>4} {mean_abs:>12.1f}% {bias:>+10.1f}%")
    for name, n in no_fit.items():
        print(f"{name:<26} {n} run(s) the source measured do not fit in hetplan's memory model")
    print("(error: predicted time or memory against measured; + is slower or larger than measured)")
    if failures:
        print(f"{failures} row(s) failed to simulate", file=sys.stderr)
        if a.check:
            sys.exit(1)


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# Fuzzes hetplan's input parsers with libFuzzer under AddressSanitizer and
# UndefinedBehaviorSanitizer:
#   scripts/fuzz.sh [runs per parser (default 1000000)] [parser ...]
# parsers: cluster_yaml graph_json plan_json strategy model_spec onnx_model (default: all).
# Installs clang and its libFuzzer runtime (Debian: clang, libclang-rt-14-dev), builds the
# harnesses of tests/fuzz into build-fuzz/, and runs each from its seed corpus (tests/fuzz/corpus/<parser>, copied, so that the
# corpus in the repository does not grow) for the given number of runs, at most 10 s per input.
# A crash, a leak, undefined behaviour or a hang stops that parser's run with a non-zero exit and
# the input that caused it in build-fuzz/; the last lines print runs and time per parser. The
# mutations follow a fixed seed (-seed=1), so a run is the same on every machine: scripts/test.sh
# runs 10,000 per parser.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-1000000}
shift || true
parsers=("$@")
((${#parsers[@]})) || parsers=(cluster_yaml graph_json plan_json strategy model_spec onnx_model)
bash scripts/install-deps.sh clang libclang-rt-14-dev
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_CXX_FLAGS="$flags" -DHETPLAN_FUZZ=ON -DHETPLAN_WITH_RUNTIME=OFF \
  -DHETPLAN_BUILD_TESTS=OFF -DHETPLAN_BUILD_BENCH=OFF -DHETPLAN_WERROR=OFF >/dev/null
targets=()
for p in "${parsers[@]}"; do targets+=("${p}_fuzz"); done
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]}"
summary=()
for p in "${parsers[@]}"; do
  work=build-fuzz/corpus/$p
  rm -rf "$work"
  mkdir -p "$work"
  cp tests/fuzz/corpus/"$p"/* "$work"/
  start=$(date +%s)
  (cd build-fuzz && UBSAN_OPTIONS=print_stacktrace=1 ./"${p}_fuzz" -seed=1 -runs="$RUNS" -timeout=10 \
    -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 "corpus/$p" 2>"$p.log") || {
    tail -40 "build-fuzz/$p.log"
    echo "fuzz.sh: $p failed after $(($(date +%s) - start)) s: see build-fuzz/$p.log" >&2
    exit 1
  }
  done_runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "build-fuzz/$p.log" | grep -o '[0-9]*$')
  summary+=("$p: $done_runs runs, $(($(date +%s) - start)) s, no crash")
done
printf '%s\n' "${summary[@]}"

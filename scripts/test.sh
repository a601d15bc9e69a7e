#!/usr/bin/env bash
# Installs dependencies, builds everything and runs the whole test suite with CTest, then the
# parsers' fuzz harnesses under AddressSanitizer and UndefinedBehaviorSanitizer (10,000 runs each).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
scripts/fuzz.sh 10000

#!/usr/bin/env bash
# Builds hetplan and the runtime tests against a CUDA-enabled libtorch (PyTorch's, found through
# python3), for `hetplan run --device cuda` (NCCL) and `hetplan calibrate --device cuda`:
#   scripts/build_cuda.sh [build dir] [extra CMAKE_PREFIX_PATH entries, ;-separated]
# The other dependencies (fmt, yaml-cpp, nlohmann-json, CLI11, GLPK, METIS, GoogleTest) come from
# the system or from the extra prefixes, e.g. Debian packages unpacked with `dpkg -x` into a
# folder when the machine has no package manager access. Benchmarks are not built. Not yet run on
# a GPU machine (none has been lent to a session so far).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-cuda}
EXTRA=${2:-}
TORCH_CMAKE=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
NVCC=$(command -v nvcc || true)
[ -n "$NVCC" ] || { echo "build_cuda.sh: nvcc not found (CUDA's compiler is needed)" >&2; exit 2; }
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHETPLAN_BUILD_BENCH=OFF \
  -DHETPLAN_WERROR=OFF -DCMAKE_PREFIX_PATH="${EXTRA:+$EXTRA;}$TORCH_CMAKE" \
  -DCUDAToolkit_ROOT="$(dirname "$(dirname "$NVCC")")"
cmake --build "$BUILD" -j "$(nproc)" --target hetplan test_runtime

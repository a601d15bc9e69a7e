#!/usr/bin/env bash
# Installs hetplan's build and test dependencies from Debian's packages (idempotent), and any
# extra packages named as arguments.
set -euo pipefail
# python3-torch: torchrun, which a test launches exported plans with (hetplan links libtorch, not
# the Python package). python3-onnx and python3-torchvision: tests export ONNX files to import.
# libonnx-dev: hetplan reads ONNX models through libonnx (protobuf, checker, shape inference).
# libopenblas0-serial: libtorch's GEMMs go through libblas.so.3, which is otherwise Debian's
# reference BLAS (about twice as slow here); the serial build keeps one thread per worker.
pkgs=(cmake ninja-build g++ nlohmann-json3-dev libyaml-cpp-dev libcli11-dev libfmt-dev
      libgtest-dev libgmock-dev libbenchmark-dev libglpk-dev libmetis-dev chromium libtorch-dev
      libgloo-dev libopenblas0-serial iproute2 python3-torch libonnx-dev libprotobuf-dev
      python3-onnx python3-torchvision)
pkgs+=("$@")  # extra packages a caller needs (scripts/fuzz.sh: clang and its libFuzzer)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

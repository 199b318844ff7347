#!/usr/bin/env bash
# Builds fucina and runs the project's main job (see README).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > build.configure.log 2>&1 \
  || { cat build.configure.log; exit 1; }
cmake --build build -j "$(nproc)" --target fucina-demo
./build/examples/fucina-demo "$@"

#!/usr/bin/env bash
# Builds fucina and runs the project's main job (see README): the char-level
# GPT trainer on /usr/share/common-licenses/GPL-3 for its default budget
# (3 minutes on 2 cores). Extra arguments go to train_gpt (--help lists them).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > build.configure.log 2>&1 \
  || { cat build.configure.log; exit 1; }
cmake --build build -j "$(nproc)" --target train_gpt
./build/examples/train_gpt "$@"

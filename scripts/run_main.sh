#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds fucina and runs the project's main job (see README): the char-level
# GPT trainer on /usr/share/common-licenses/GPL-3 for its default budget
# (3 minutes on 2 cores). Extra arguments go to train_gpt (--help lists them).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build-main -DCMAKE_BUILD_TYPE=Release > build-main.configure.log 2>&1 \
  || { cat build-main.configure.log; exit 1; }
cmake --build build-main -j "$(nproc)" --target train_gpt
./build-main/examples/train_gpt "$@"

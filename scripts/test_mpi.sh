#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds fucina with MPI (FUCINA_WITH_MPI=ON, Open MPI from scripts/deps.sh
# --mpi) into build-mpi/ and runs the data-parallel tests: tests/dist as 2
# ranks under mpirun (collectives, the wrapper, 2 ranks x B against 1 rank
# x 2B, and dist/fault_*: a fault at each point of a step - a crash, a
# failed backward, a stalled rank, a kill in the gradient sync, a failed or
# killed checkpoint write, an error of the program's own, a rank that leaves
# early - which must end the job in time and leave a checkpoint that loads)
# and the trainers as 2 ranks (ctest label "dist"). Only what those tests
# need is built.
#   scripts/test_mpi.sh                          # gcc, warnings as errors
#   FUCINA_SANITIZE=address scripts/test_mpi.sh  # build-mpi-address/, clang, ASan+UBSan
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/deps.sh --mpi
SAN="${FUCINA_SANITIZE:-}"
if [ -z "$SAN" ]; then
  BUILD="${FUCINA_BUILD_DIR:-build-mpi}"
  CC_="${CC:-gcc}"
else
  BUILD="${FUCINA_BUILD_DIR:-build-mpi-$SAN}"
  CC_="${CC:-clang}"
fi
cmake -S . -B "$BUILD" -DCMAKE_C_COMPILER="$CC_" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DFUCINA_WERROR=ON -DFUCINA_SANITIZE="$SAN" -DFUCINA_WITH_MPI=ON \
      -DFUCINA_BUILD_BENCH=OFF > "$BUILD.configure.log" 2>&1 \
  || { cat "$BUILD.configure.log"; exit 1; }
grep -q "fucina: MPI ON" "$BUILD.configure.log" || { cat "$BUILD.configure.log"; exit 1; }
cmake --build "$BUILD" -j "$(nproc)" --target test_dist_collectives test_dist_ddp \
      test_dist_equiv dist_fault_prog train_gpt train_mlp train_cnn
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
ctest --test-dir "$BUILD" --output-on-failure -j "$(nproc)" -L dist

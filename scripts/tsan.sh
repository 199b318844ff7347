#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ThreadSanitizer run of the threaded parts of fucina: the exec layer (the
# thread team, the buffer pool, every kernel), the matmul providers, the ops
# (tests/ops), autograd and the optimizers, and the concurrency contract of include/fucina/tensor.h
# (tests/reliability/test_threads.c). Builds the library and only those
# tests, with clang, into build-tsan/.
#
# OpenMP under TSan: GCC's libgomp is not instrumented, so its barriers are
# invisible to TSan and every parallel region looks racy. This build uses
# clang's libomp instead, with the Archer tool (libarcher.so, in
# libomp-14-dev), which reports the OpenMP synchronization to TSan: races
# between the threads of a team are real findings, and the team really runs
# in parallel (OMP_NUM_THREADS=2). .ci/tsan.supp ignores interceptor calls
# made from inside the runtime itself (see the comment there). Without
# Archer the build falls back to FUCINA_WITH_OPENMP=OFF: the team runs
# serially and only the pthread-level claims (several contexts, shared
# buffers and files) are checked; the script says so.
#
# The OpenBLAS and oneDNN providers stay on: their libraries are not
# instrumented (ignore_noninstrumented_modules=1 keeps TSan from reporting
# their internals), but every access fucina makes around them is checked.
#   scripts/tsan.sh               # build + run
#   FUCINA_BUILD_DIR=dir scripts/tsan.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${FUCINA_BUILD_DIR:-build-tsan}"
ARCHER="$(llvm-config --libdir 2>/dev/null || true)/libarcher.so"
OMP=ON
if [ ! -f "$ARCHER" ]; then
  echo "tsan: libarcher.so not found (libomp-dev); building with FUCINA_WITH_OPENMP=OFF"
  OMP=OFF
fi
cmake -S . -B "$BUILD" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DFUCINA_WERROR=ON -DFUCINA_SANITIZE=thread -DFUCINA_WITH_OPENMP="$OMP" \
      -DFUCINA_BUILD_EXAMPLES=OFF -DFUCINA_BUILD_BENCH=OFF > "$BUILD.configure.log" 2>&1 \
  || { cat "$BUILD.configure.log"; exit 1; }
TARGETS=(test_threads)
for f in tests/exec/test_*.c tests/backend/test_*.c tests/ag/test_*.c tests/ops/test_*.c; do
  TARGETS+=("$(basename "$f" .c)")
done
cmake --build "$BUILD" -j "$(nproc)" --target "${TARGETS[@]}"
TSAN_DEFAULTS="halt_on_error=1 second_deadlock_stack=1 ignore_noninstrumented_modules=1"
export TSAN_OPTIONS="${TSAN_OPTIONS:-$TSAN_DEFAULTS suppressions=$PWD/.ci/tsan.supp}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
if [ "$OMP" = ON ]; then export OMP_TOOL_LIBRARIES="$ARCHER"; fi
ctest --test-dir "$BUILD" --output-on-failure -j "$(nproc)" \
      -R '^(exec|backend|ag|ops)/|^reliability/test_threads$'

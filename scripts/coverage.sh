#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Line coverage of the library by layer: builds build-cov/ with gcc and
# --coverage, runs the test suite there, then prints one line per layer
# (src/core, src/exec, ..., models/llama, models/tokenizer) with the share
# of executable lines the suite ran, as gcov counts them. The figure is a
# report, not a gate: a layer's number going down is a question for review.
#   scripts/coverage.sh            # build, test, report
#   FUCINA_COVERAGE_JSON=f scripts/coverage.sh   # also write the table as JSON
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
BUILD="${FUCINA_BUILD_DIR:-build-cov}"
JOBS="$(nproc)"
# No LTO (its objects carry no per-file counters) and no -Werror: gcov's
# instrumentation is not what the warning flags are tuned for.
cmake -S . -B "$BUILD" -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DFUCINA_LTO=OFF -DFUCINA_BUILD_BENCH=OFF \
      -DCMAKE_C_FLAGS="--coverage" -DCMAKE_EXE_LINKER_FLAGS="--coverage" \
      -DCMAKE_SHARED_LINKER_FLAGS="--coverage" > "$BUILD.configure.log" 2>&1 \
  || { cat "$BUILD.configure.log"; exit 1; }
cmake --build "$BUILD" -j "$JOBS" > "$BUILD.build.log" 2>&1 || { tail -50 "$BUILD.build.log"; exit 1; }
find "$BUILD" -name '*.gcda' -delete
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
# A failing test is the test stage's business; coverage reports what ran.
# The consumer test links an installed copy without the gcov runtime.
ctest --test-dir "$BUILD" -j "$JOBS" -E "install/consumer" > "$BUILD.ctest.log" 2>&1 \
  || echo "coverage: some tests failed (see $BUILD.ctest.log); reporting what ran"
python3 scripts/coverage_report.py "$BUILD" ${FUCINA_COVERAGE_JSON:+--json "$FUCINA_COVERAGE_JSON"}

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds fucina and runs the whole test suite.
#   scripts/test.sh                      # build/ with gcc, warnings as errors
#   FUCINA_SANITIZE=address scripts/test.sh   # build-asan/ with clang, ASan+UBSan
# Installs missing Debian packages first (scripts/deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
SAN="${FUCINA_SANITIZE:-}"
JOBS="$(nproc)"
if [ -z "$SAN" ]; then
  BUILD="${FUCINA_BUILD_DIR:-build}"
  CC_="${CC:-gcc}"
else
  BUILD="${FUCINA_BUILD_DIR:-build-$SAN}"
  CC_="${CC:-clang}"
fi
cmake -S . -B "$BUILD" -DCMAKE_C_COMPILER="$CC_" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DFUCINA_WERROR=ON -DFUCINA_SANITIZE="$SAN" > "$BUILD.configure.log" 2>&1 \
  || { cat "$BUILD.configure.log"; exit 1; }
cmake --build "$BUILD" -j "$JOBS"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS" ${CTEST_ARGS:-}

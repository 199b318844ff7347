#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs the built test suite again at every SIMD level below the widest this
# CPU has, so one machine proves each level (scripts/test.sh has already run
# it at the widest):
#   AVX-512 host: avx2 (FUCINA_ISA=avx2, ONEDNN_MAX_CPU_ISA=AVX2,
#                 OPENBLAS_CORETYPE=Haswell: the whole library as an
#                 AVX2-only host runs it), then portable;
#   AVX2 host:    portable.
# portable also caps oneDNN at SSE4.1 and OpenBLAS at its Nehalem kernels
# (pre-AVX), the closest an x86 host gets to a CPU without its SIMD sets.
# Prints each level's wall time. Needs a configured build (default build/,
# FUCINA_BUILD_DIR to change); fails when any level fails.
#   bash scripts/test_levels.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${FUCINA_BUILD_DIR:-build}"
[ -f "$BUILD/CTestTestfile.cmake" ] || { echo "test_levels: no build at $BUILD (run scripts/test.sh)" >&2; exit 1; }
case "$(bash scripts/cpu_level.sh)" in
  avx512) levels=(avx2 portable) ;;
  avx2) levels=(portable) ;;
  *) echo "test_levels: this CPU has no AVX2; scripts/test.sh already ran the portable level"
     exit 0 ;;
esac
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
for lv in "${levels[@]}"; do
  case "$lv" in
    avx2) caps=(FUCINA_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell) ;;
    portable) caps=(FUCINA_ISA=portable ONEDNN_MAX_CPU_ISA=SSE41 OPENBLAS_CORETYPE=Nehalem) ;;
  esac
  echo "== test suite at level $lv (${caps[*]}) =="
  start=$(date +%s%N)
  env "${caps[@]}" ctest --test-dir "$BUILD" --output-on-failure -j "$(nproc)" ${CTEST_ARGS:-}
  ms=$((($(date +%s%N) - start) / 1000000))
  echo "test_levels: level $lv passed in $((ms / 1000)).$((ms % 1000 / 100)) s"
done

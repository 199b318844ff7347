#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Prints the widest SIMD level of this CPU as fucina names it (fucina/cpu.h):
# avx512 (AVX-512 F/BW/VL/DQ with the avx2 set), avx2 (AVX2, FMA, F16C) or
# portable. Read from /proc/cpuinfo's flags, which list only what the OS
# enables, so no build is needed. Used by scripts/test_levels.sh and
# bench/compare.sh.
set -euo pipefail
flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | sed 's/^[^:]*://' || true) "
has() { for f in "$@"; do [[ "$flags" == *" $f "* ]] || return 1; done; }
if has avx2 fma f16c avx512f avx512bw avx512vl avx512dq; then
  echo avx512
elif has avx2 fma f16c; then
  echo avx2
else
  echo portable
fi

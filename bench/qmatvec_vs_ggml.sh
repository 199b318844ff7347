#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# qmatvec against ggml in the same run (../shared/BENCHMARKS.md's target:
# ">= ggml's best figure for the same type and N, on the same host in the
# same run"). Runs `fucina-bench qmatvec` and bench/ggml/qmatvec.c (ggml's
# CPU mul_mat on the same weights, protocol and JSON shape) in alternating
# pairs, and prints the medians over the rounds with fucina/ggml ratios for
# every weight buffer ggml offers: CPU (default), CPU_REPACK and, where the
# CPU has AMX, AMX.
#
#   bash bench/qmatvec_vs_ggml.sh                      # 3 rounds per level
#   GGML_ROUNDS=1 FUCINA_BENCH_MIN_S=0.5 bash bench/qmatvec_vs_ggml.sh   # quick look
#   GGML_LEVELS=avx2 bash bench/qmatvec_vs_ggml.sh     # one level only
#
# Levels (GGML_LEVELS, default: the host's widest, then avx2 below it):
# at the host's level ggml loads every CPU variant it ships and keeps the
# best this CPU runs (its own scoring), fucina runs as built; at avx2 on an
# AVX-512 host ggml loads only its haswell variant (AVX2+FMA+F16C) and
# fucina runs with FUCINA_ISA=avx2 (oneDNN and OpenBLAS capped as
# bench/compare.sh caps them).
#
# ggml is not built here: npm fetches the prebuilt CPU backends of
# @node-llama-cpp/linux-x64 and the llama.cpp source bundle of node-llama-cpp
# (for ggml's headers; scripts/npm_llamacpp.sh), both at GGML_NPM_VERSION (default 3.22.1: ggml 0.25.1),
# into GGML_DIR (default build-ggml/, ignored by git), once. `npm pack`
# fetches just those two tarballs through the registry client, checked
# against the registry's integrity hashes and with no install scripts run;
# `npm install node-llama-cpp` would also pull its 28 runtime dependencies
# and, as optional ones, its CUDA and Vulkan builds, none of which is needed.
# Without npm, git or a registry to reach, the script says so and exits 0.
#
# Raw JSON lines: bench/out/qmatvec_ggml/<level>.r<round>.<side>.json, with
# side fucina, ggml_CPU, ggml_CPU_REPACK, ggml_AMX. The protocol knobs of
# fucina-bench (FUCINA_BENCH_MIN_S, FUCINA_BENCH_THREADS, ...) apply to both.
# Not part of CI's smoke run: with FUCINA_BENCH_MIN_S=0.5 and
# FUCINA_BENCH_NO_IDLE_WAIT=1 a round took 2.3 minutes at avx512 (four runs)
# and 1.8 at avx2 (three) on a 2-core Sapphire Rapids; the full protocol
# takes several times that, more while neighbours keep it waiting for idle.
set -euo pipefail
cd "$(dirname "$0")/.."
VER="${GGML_NPM_VERSION:-3.22.1}"
DIR="${GGML_DIR:-build-ggml}"
mkdir -p "$DIR" && DIR="$(cd "$DIR" && pwd)"
ROUNDS="${GGML_ROUNDS:-3}"
BIN="${FUCINA_BENCH_BIN:-build/bench/fucina-bench}"
OUT=bench/out/qmatvec_ggml
PY=/usr/bin/python3
TYPES=(q4_0 q8_0 q4_k q6_k f32)

skip() { echo "qmatvec_vs_ggml.sh: $*; skipping the ggml comparison" >&2; exit 0; }

# --- fetch ggml (once) -------------------------------------------------------
LIB="$DIR/v$VER/bins"
INC="$DIR/v$VER/include"
rc=0
bash scripts/npm_llamacpp.sh "$DIR" "$VER" || rc=$?
[ "$rc" = 0 ] || skip "the prebuilt ggml is not available here"

# --- build the harness and fucina-bench --------------------------------------
HARNESS="$DIR/v$VER/ggml-qmatvec"
if [ ! -x "$HARNESS" ] || [ bench/ggml/qmatvec.c -nt "$HARNESS" ] || [ bench/bench.c -nt "$HARNESS" ]; then
  libggml=("$LIB"/libggml.*so)
  "${CC:-cc}" -std=c11 -O2 -Wall -Wextra -Wpedantic -Werror -Ibench -I"$INC" \
    bench/ggml/qmatvec.c bench/bench.c -o "$HARNESS" \
    "$LIB/libggml-base.so" "${libggml[0]}" -Wl,-rpath,"$LIB" -lm
fi
if [ ! -x "$BIN" ] && [ -z "${FUCINA_BENCH_BIN:-}" ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
  cmake --build build -j "$(nproc)" --target fucina-bench > /dev/null
fi

# --- the runs ----------------------------------------------------------------
HOST_LEVEL="$(bash scripts/cpu_level.sh)"
if [ -n "${GGML_LEVELS:-}" ]; then
  read -r -a LEVELS <<< "$GGML_LEVELS"
elif [ "$HOST_LEVEL" = avx512 ]; then
  LEVELS=(avx512 avx2)
else
  LEVELS=("$HOST_LEVEL")
fi
for level in "${LEVELS[@]}"; do
  case "$level" in
    "$HOST_LEVEL") ;;
    avx2) [ "$HOST_LEVEL" = avx512 ] || skip "level avx2 asked on a $HOST_LEVEL CPU" ;;
    *) skip "no ggml variant to pair with fucina's level $level (host: $HOST_LEVEL)" ;;
  esac
done
mkdir -p "$OUT"
rm -f "$OUT"/*.json
run_fucina() {  # level file
  if [ "$1" = avx2 ] && [ "$HOST_LEVEL" = avx512 ]; then
    FUCINA_ISA=avx2 ONEDNN_MAX_CPU_ISA="${ONEDNN_MAX_CPU_ISA:-AVX2}" \
      OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-Haswell}" "$BIN" qmatvec "${TYPES[@]}" > "$2"
  else
    "$BIN" qmatvec "${TYPES[@]}" > "$2"
  fi
}
run_ggml() {  # level buffer file
  local variant=()
  [ "$1" = avx2 ] && [ "$HOST_LEVEL" = avx512 ] && variant=(--variant haswell)
  "$HARNESS" "$LIB" "${variant[@]}" --buffer "$2" "${TYPES[@]}" > "$3"
}
failed=0
for level in "${LEVELS[@]}"; do
  for r in $(seq 1 "$ROUNDS"); do
    echo "== qmatvec vs ggml: level $level, round $r of $ROUNDS ($(cut -d' ' -f1-3 /proc/loadavg))" >&2
    pre="$OUT/$level.r$r"
    # Alternate who goes first, so a neighbour's burst does not always land
    # on the same side.
    if [ $((r % 2)) = 1 ]; then run_fucina "$level" "$pre.fucina.json" || failed=1; fi
    run_ggml "$level" CPU "$pre.ggml_CPU.json" || failed=1
    # The extra buffers this level's ggml offers, as its own JSON lists them.
    extra="$("$PY" -c 'import json,sys; print(" ".join(json.load(open(sys.argv[1]))["env"]["extra_buffers"]))' \
      "$pre.ggml_CPU.json" 2>/dev/null || true)"
    for buf in $extra; do run_ggml "$level" "$buf" "$pre.ggml_$buf.json" || failed=1; done
    if [ $((r % 2)) = 0 ]; then run_fucina "$level" "$pre.fucina.json" || failed=1; fi
  done
done
"$PY" bench/ratios.py --vs-ggml "$OUT"
[ "$failed" = 0 ] || { echo "qmatvec_vs_ggml.sh: a run failed (see above)" >&2; exit 1; }

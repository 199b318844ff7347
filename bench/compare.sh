#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs fucina-bench and the PyTorch peers (../shared/peers, both the default
# and the tuned configuration of ../shared/BENCHMARKS.md) in one go and
# prints a table of ratios against the faster PyTorch configuration.
#
#   bash bench/compare.sh [workload ...]      (default: every workload)
#   FUCINA_BENCH_MIN_S=0.5 PEER_MIN_S=0.5 bash bench/compare.sh tiny_ops   # quick look
#
# COMPARE_PEER_CONFIGS=tuned runs only the tuned PyTorch configuration (CI's
# smoke run, whose figures are not read, saves the default one's time).
# FUCINA_BENCH_BIN runs another build's fucina-bench (default build/bench/fucina-bench,
# built here when missing); PEERS_DIR another peers folder.
# COMPARE_ROUNDS=N (default 1) runs each workload N times in alternation,
# fucina first in odd rounds and the peers first in even ones, so a slow
# minute on a shared host lands on both sides; the table then gives each
# ratio as the median of the N same-round ratios, their range, and in how
# many rounds the target was met.
# Raw JSON lines go to bench/out/<workload>.r<round>.{fucina,peer_default,peer_tuned}.json.
# The workload qmatvec_ggml (opt-in, never in the default list) runs
# bench/qmatvec_vs_ggml.sh at this level: qmatvec beside ggml's CPU backend.
# qlora_step (opt-in too: no PyTorch peer, four child processes, some 3.5
# minutes) prints its same-run rows: QLoRA over q4_k / q8_0 beside LoRA over
# the f32 base and the f32 full fine-tune.
#
# The CPU decides the peers' tuned configuration: PyTorch gets the widest
# ATEN_CPU_CAPABILITY the CPU has (avx512 only where AVX-512 F/BW/VL/DQ are
# present; avx2 with AVX2+FMA; its default otherwise). FUCINA_ISA=avx2 (or
# portable) measures an AVX-512 host as a smaller CPU: fucina's oneDNN and
# OpenBLAS are capped with it (ONEDNN_MAX_CPU_ISA=AVX2, OPENBLAS_CORETYPE=
# Haswell unless already set) and PyTorch runs at the same level, so the
# pairing stays like for like. At the host's own level an OPENBLAS_CORETYPE
# or ONEDNN_MAX_CPU_ISA from the environment is unset (with a message), as
# it would cap one side's libraries. The table's header names the CPU and
# levels.
# Exits non-zero when fucina-bench fails on a workload (a peer failing only
# leaves its column empty). CI runs it with a smoke protocol (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
PEERS="${PEERS_DIR:-../shared/peers}"
PY=/usr/bin/python3
BIN="${FUCINA_BENCH_BIN:-build/bench/fucina-bench}"
OUT=bench/out
mkdir -p "$OUT"
if [ ! -x "$BIN" ] && [ -z "${FUCINA_BENCH_BIN:-}" ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
  cmake --build build -j "$(nproc)" --target fucina-bench > /dev/null
fi
have_torch=1
"$PY" -c "import torch" 2>/dev/null || have_torch=0
if [ "$have_torch" = 0 ]; then
  echo "compare.sh: /usr/bin/python3 cannot import torch (apt-get install python3-torch);" \
       "running fucina only" >&2
fi
WORKLOADS=("$@")
[ ${#WORKLOADS[@]} -eq 0 ] && WORKLOADS=(gemm elementwise reduce norm_softmax tiny_ops mlp_train gpt_train qmatvec conv_train
                                  llama_train)
[ -d "$PEERS" ] || echo "compare.sh: no peers folder at $PEERS (PEERS_DIR); running fucina only" >&2
# The widest level the CPU has, then FUCINA_ISA's cap on it.
HOST_LEVEL="$(bash scripts/cpu_level.sh)"
LEVEL=$HOST_LEVEL
case "${FUCINA_ISA:-}" in
  portable) LEVEL=portable ;;
  avx2) [ "$LEVEL" = avx512 ] && LEVEL=avx2 ;;
esac
# At the host's own level nothing may cap the libraries: an OPENBLAS_CORETYPE
# or ONEDNN_MAX_CPU_ISA inherited from the environment would hold PyTorch's
# matmul (OpenBLAS) or both sides' oneDNN below the CPU (one AVX-512 host
# this ran on exported OPENBLAS_CORETYPE=Haswell, which took torch.mm from
# 411 to 244 GFLOP/s). COMPARE_KEEP_CAPS=1 keeps them.
if [ "$LEVEL" = "$HOST_LEVEL" ] && [ "${COMPARE_KEEP_CAPS:-0}" != 1 ]; then
  for v in OPENBLAS_CORETYPE ONEDNN_MAX_CPU_ISA; do
    if [ -n "${!v:-}" ]; then
      echo "compare.sh: unsetting $v=${!v} from the environment: it caps a library below this host's level (COMPARE_KEEP_CAPS=1 keeps it)" >&2
      unset "$v"
    fi
  done
fi
case "$LEVEL" in
  avx512) ATEN=avx512 ;;
  avx2) ATEN=avx2
        export ONEDNN_MAX_CPU_ISA="${ONEDNN_MAX_CPU_ISA:-AVX2}"
        export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-Haswell}" ;;
  *) ATEN=default
     export ONEDNN_MAX_CPU_ISA="${ONEDNN_MAX_CPU_ISA:-SSE41}" ;;
esac
CPU="$(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | sed 's/^[^:]*: *//' || true)"
printf '{"cpu": "%s", "level": "%s", "peer_tuned_aten_cpu_capability": "%s", "ONEDNN_MAX_CPU_ISA": "%s", "OPENBLAS_CORETYPE": "%s"}\n' \
  "${CPU:-unknown}" "$LEVEL" "$ATEN" "${ONEDNN_MAX_CPU_ISA:-}" "${OPENBLAS_CORETYPE:-}" > "$OUT/host.json"
echo "compare.sh: CPU ${CPU:-unknown}; level $LEVEL; PyTorch tuned with ATEN_CPU_CAPABILITY=$ATEN" >&2
# The tuned peer always runs at the level; the default one too when the
# level is a cap below the host's (else it would pick the host's widest).
aten_env=(ATEN_CPU_CAPABILITY="$ATEN")
default_env=()
[ "$LEVEL" != "$HOST_LEVEL" ] && default_env=(ATEN_CPU_CAPABILITY="$ATEN")
ROUNDS="${COMPARE_ROUNDS:-1}"
case "$ROUNDS" in ''|*[!0-9]*|0) echo "compare.sh: COMPARE_ROUNDS must be a positive integer, not '$ROUNDS'" >&2; exit 2 ;; esac
failed=()
# One side of round $2 of workload $1; the loop below alternates which
# side goes first.
run_fucina() {
  if ! "$BIN" "$1" > "$OUT/$1.r$2.fucina.json"; then
    echo "{}" > "$OUT/$1.r$2.fucina.json"
    [[ " ${failed[*]} " == *" $1 "* ]] || failed+=("$1")
  fi
}
run_peers() {
  local w=$1 r=$2
  [ "$have_torch" = 1 ] && [ -f "$PEERS/$w.py" ] || return 0
  if [ "${COMPARE_PEER_CONFIGS:-both}" = tuned ]; then
    echo "{}" > "$OUT/$w.r$r.peer_default.json"
  else
    env "${default_env[@]}" "$PY" "$PEERS/$w.py" > "$OUT/$w.r$r.peer_default.json" \
      || echo "{}" > "$OUT/$w.r$r.peer_default.json"
  fi
  env OMP_WAIT_POLICY=PASSIVE "${aten_env[@]}" "$PY" "$PEERS/$w.py" \
    > "$OUT/$w.r$r.peer_tuned.json" || echo "{}" > "$OUT/$w.r$r.peer_tuned.json"
}
for w in "${WORKLOADS[@]}"; do
  echo "== $w" >&2
  # Opt-in (not in the default list, so not in CI's smoke run): qmatvec
  # beside ggml at this level, one round unless GGML_ROUNDS says more.
  if [ "$w" = qmatvec_ggml ]; then
    GGML_LEVELS="$LEVEL" GGML_ROUNDS="${GGML_ROUNDS:-1}" FUCINA_BENCH_BIN="$BIN" \
      bash bench/qmatvec_vs_ggml.sh || failed+=("$w")
    continue
  fi
  rm -f "$OUT/$w".*.json  # an earlier run's rounds must not count
  for ((r = 1; r <= ROUNDS; r++)); do
    if [ "$ROUNDS" -gt 1 ]; then echo "   round $r of $ROUNDS" >&2; fi
    if ((r % 2)); then run_fucina "$w" "$r"; run_peers "$w" "$r"
    else run_peers "$w" "$r"; run_fucina "$w" "$r"; fi
  done
done
"$PY" bench/ratios.py "$OUT" "${WORKLOADS[@]}"
# A peer that fails leaves a gap in the table; fucina-bench failing is an error.
if [ ${#failed[@]} -gt 0 ]; then
  echo "compare.sh: fucina-bench failed on: ${failed[*]}" >&2
  exit 1
fi

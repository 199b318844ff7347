#!/usr/bin/env bash
# Runs fucina-bench and the PyTorch peers (../shared/peers, both the default
# and the tuned configuration of ../shared/BENCHMARKS.md) in one go and
# prints a table of ratios against the faster PyTorch configuration.
#
#   bash bench/compare.sh [workload ...]      (default: every workload)
#   FUCINA_BENCH_MIN_S=0.5 PEER_MIN_S=0.5 bash bench/compare.sh tiny_ops   # quick look
#
# FUCINA_BENCH_BIN runs another build's fucina-bench (default build/bench/fucina-bench,
# built here when missing); PEERS_DIR another peers folder.
# Raw JSON lines go to bench/out/<workload>.{fucina,peer_default,peer_tuned}.json.
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
[ ${#WORKLOADS[@]} -eq 0 ] && WORKLOADS=(gemm elementwise reduce norm_softmax tiny_ops mlp_train gpt_train qmatvec)
[ -d "$PEERS" ] || echo "compare.sh: no peers folder at $PEERS (PEERS_DIR); running fucina only" >&2
failed=()
for w in "${WORKLOADS[@]}"; do
  echo "== $w" >&2
  "$BIN" "$w" > "$OUT/$w.fucina.json" || { echo "{}" > "$OUT/$w.fucina.json"; failed+=("$w"); }
  if [ "$have_torch" = 1 ] && [ -f "$PEERS/$w.py" ]; then
    "$PY" "$PEERS/$w.py" > "$OUT/$w.peer_default.json" || echo "{}" > "$OUT/$w.peer_default.json"
    OMP_WAIT_POLICY=PASSIVE ATEN_CPU_CAPABILITY=avx512 "$PY" "$PEERS/$w.py" \
      > "$OUT/$w.peer_tuned.json" || echo "{}" > "$OUT/$w.peer_tuned.json"
  fi
done
"$PY" bench/ratios.py "$OUT" "${WORKLOADS[@]}"
# A peer that fails leaves a gap in the table; fucina-bench failing is an error.
if [ ${#failed[@]} -gt 0 ]; then
  echo "compare.sh: fucina-bench failed on: ${failed[*]}" >&2
  exit 1
fi

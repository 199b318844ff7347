#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Batch-1 greedy decoding, fucina beside llama.cpp on the same files in the
# same run: the llama_train model (llama_convert --new with its config:
# vocab 256, dim 256, 8/2 heads, 4 layers, ff 688, context 128) written as
# q4_k and q8_0 (ffn_down, whose rows of 688 no block divides, in f16),
# then `fucina-bench llama_gen` on both files and llama.cpp's
# tests/llama_cpp/llama_logits (a one-token prompt, 127 greedy steps, f32
# KV cache, no flash attention) ROUNDS times each (default 5; the median).
#
#   bash bench/llama_gen_vs_llamacpp.sh       # build/ must hold fucina-bench, llama_convert
#
# Same threads on both sides (FUCINA_BENCH_THREADS, default 2). The peer is
# the prebuilt llama.cpp of the npm registry (scripts/npm_llamacpp.sh into
# GGML_DIR, default build-ggml/, as scripts/llama_cpp_parity.sh uses it).
# Prints one JSON line (bench/out/llama_gen/result.json) and a small table.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${FUCINA_BENCH_BIN:-build/bench/fucina-bench}"
CONVERT="${FUCINA_LLAMA_CONVERT:-build/examples/llama_convert}"
VER="${GGML_NPM_VERSION:-3.22.1}"
DIR="${GGML_DIR:-build-ggml}"
ROUNDS="${ROUNDS:-5}"
THREADS="${FUCINA_BENCH_THREADS:-2}"
for x in "$BIN" "$CONVERT"; do
  [ -x "$x" ] || { echo "llama_gen_vs_llamacpp.sh: no $x (cmake --build build)" >&2; exit 1; }
done
bash scripts/npm_llamacpp.sh "$DIR" "$VER" || { echo "llama_gen_vs_llamacpp.sh: no llama.cpp here" >&2; exit 1; }
DIR="$(cd "$DIR" && pwd)"
LIB="$DIR/v$VER/bins"
HARNESS="$DIR/v$VER/llama_logits"
if [ ! -x "$HARNESS" ] || [ tests/llama_cpp/llama_logits.c -nt "$HARNESS" ]; then
  libllama=("$LIB"/libllama.*so)
  libggml=("$LIB"/libggml.*so)
  "${CC:-cc}" -std=c11 -O2 -Wall -Wextra -Werror -I"$DIR/v$VER/llama" -I"$DIR/v$VER/include" \
    tests/llama_cpp/llama_logits.c -o "$HARNESS" "${libllama[0]}" "$LIB/libggml-base.so" \
    "${libggml[0]}" -Wl,-rpath,"$LIB"
fi
OUT=bench/out/llama_gen
mkdir -p "$OUT"
"$CONVERT" --new 256,256,8,2,4,688,128,1 "$OUT/f32.gguf" f32
for dt in q4_k q8_0; do "$CONVERT" "$OUT/f32.gguf" "$OUT/$dt.gguf" "$dt" f16; done
FUCINA_BENCH_THREADS="$THREADS" "$BIN" llama_gen "$OUT/q4_k.gguf" "$OUT/q8_0.gguf" > "$OUT/fucina.json"
for dt in q4_k q8_0; do
  : > "$OUT/llama_cpp_$dt.txt"
  for _ in $(seq "$ROUNDS"); do
    LLAMA_LOGITS_THREADS="$THREADS" "$HARNESS" "$LIB" "$OUT/$dt.gguf" 127 1 2>&1 > /dev/null |
      sed -n 's/.*(\([0-9.]*\) tokens\/s).*/\1/p' >> "$OUT/llama_cpp_$dt.txt"
  done
done
/usr/bin/python3 - "$OUT" "$THREADS" <<'PY'
import json, os, statistics, sys
out, threads = sys.argv[1], int(sys.argv[2])
fc = json.loads(open(os.path.join(out, "fucina.json")).read().strip().splitlines()[-1])
res = {"workload": "llama_gen_vs_llamacpp", "threads": threads, "env": fc.get("env"), "results": {}}
print("| weights | fucina tokens/s | llama.cpp tokens/s | fucina / llama.cpp |")
print("|---|---|---|---|")
for dt in ("q4_k", "q8_0"):
    f = fc["results"][dt + ".gguf"]["tokens_per_s"]["median"]
    runs = [float(x) for x in open(os.path.join(out, "llama_cpp_%s.txt" % dt)).read().split()]
    lc = statistics.median(runs) if runs else None
    res["results"][dt] = {"fucina_tokens_per_s": f, "llama_cpp_tokens_per_s": lc,
                          "llama_cpp_runs": runs}
    print("| %s | %.0f | %s | %s |" % (dt, f, "%.0f" % lc if lc else "n/a",
                                       "%.2fx" % (f / lc) if lc else "n/a"))
open(os.path.join(out, "result.json"), "w").write(json.dumps(res) + "\n")
print(json.dumps(res))
PY

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the libFuzzer targets (clang only) and runs each for a bounded time.
#   fuzz/run.sh            # 60 seconds per target
#   fuzz/run.sh 300        # 300 seconds per target
#   fuzz/run.sh 300 gguf   # only the named targets
#   fuzz/run.sh --seeds    # rewrite fuzz/corpus/checkpoint with gen_checkpoint_seeds
# Targets: fuzz_safetensors and fuzz_gguf (the byte-level readers, built
# from their sources), fuzz_checkpoint (fc_checkpoint_load) and fuzz_api
# (random programs of public API calls, misuse included), fuzz_llama (the
# Llama model loader of models/, fc_llama_from_gguf, with a forward),
# fuzz_llama_hf (fc_llama_load_hf: fuzzed config.json and shard index over
# the fixtures' weights) and
# fuzz_tokenizer (GGUF tokenizers read from fuzzed files, and fuzzed text
# through the fixture tokenizers, which must round-trip), the last five
# linked against the whole library built with clang into $FUZZ_WORK/lib
# (default build-fuzz/ in this checkout): the first run configures and
# builds it, later runs rebuild what changed; a build directory configured
# from another checkout is discarded first, since cmake refuses to reuse it.
# Seeds: fuzz/corpus/<target>/ (read only; crash inputs that were fixed stay
# there as regression seeds, replayed on every run); new inputs go to
# $FUZZ_WORK/corpus-<target>/, crashes to $FUZZ_WORK/crash-*. Exits non-zero
# when a target finds a crash, leak or sanitizer report. FUZZ_PARALLEL
# targets fuzz at once (default: the core count). Needs clang, cmake
# and libclang-rt-14-dev (scripts/deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
WORK="${FUZZ_WORK:-$PWD/build-fuzz}"
CC_="${CC:-clang}"
JOBS="${FUZZ_JOBS:-2}"
mkdir -p "$WORK"
FLAGS=(-std=c11 -D_DEFAULT_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined
       -fno-sanitize-recover=all -Iinclude -Isrc)

# The whole library, instrumented for the fuzzer, as a static archive.
build_lib() {
  echo "== building the library in $WORK/lib"
  local cache="$WORK/lib/CMakeCache.txt"
  if [ -f "$cache" ] && ! grep -qx "CMAKE_HOME_DIRECTORY:INTERNAL=$PWD" "$cache"; then
    echo "   (it was configured from another checkout: starting afresh)"
    rm -rf "$WORK/lib"
  fi
  cmake -S . -B "$WORK/lib" -DCMAKE_C_COMPILER="$CC_" -DCMAKE_BUILD_TYPE=Debug \
    "-DCMAKE_C_FLAGS=-g -O1 -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all" \
    -DFUCINA_WITH_OPENBLAS=OFF -DFUCINA_WITH_ONEDNN=OFF -DFUCINA_WITH_OPENMP=OFF \
    -DFUCINA_BUILD_TESTS=OFF -DFUCINA_BUILD_EXAMPLES=OFF -DFUCINA_BUILD_BENCH=OFF \
    -DFUCINA_LTO=OFF > "$WORK/lib-configure.log"
  cmake --build "$WORK/lib" -j"$JOBS" --target fucina_static > "$WORK/lib-build.log"
}

if [ "${1:-}" = "--seeds" ]; then
  build_lib
  "$CC_" -std=c11 -D_DEFAULT_SOURCE -g -O1 -fsanitize=fuzzer-no-link,address,undefined \
    -Iinclude fuzz/gen_checkpoint_seeds.c "$WORK/lib/libfucina.a" -lm -lpthread \
    -o "$WORK/gen_checkpoint_seeds"
  rm -f fuzz/corpus/checkpoint/*.ckpt
  mkdir -p fuzz/corpus/checkpoint
  "$WORK/gen_checkpoint_seeds" fuzz/corpus/checkpoint
  ls -l fuzz/corpus/checkpoint
  exit 0
fi

SECS="${1:-60}"
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(safetensors gguf checkpoint api llama llama_hf tokenizer)

# The byte-level readers need only the core layer; tensor_io.c and
# checkpoint.c are the exec-level API on top and are left out.
SRCS=(src/core/*.c src/core/quant/*.c)
for f in src/io/*.c; do
  case "$f" in src/io/tensor_io.c|src/io/checkpoint.c) ;; *) SRCS+=("$f") ;; esac
done
for target in "${TARGETS[@]}"; do
  bin="$WORK/fuzz_$target"
  echo "== building $bin"
  if [ "$target" = checkpoint ] || [ "$target" = api ]; then
    build_lib
    "$CC_" "${FLAGS[@]}" "fuzz/fuzz_$target.c" "$WORK/lib/libfucina.a" -lm -lpthread -o "$bin"
  elif [ "$target" = llama ] || [ "$target" = llama_hf ] || [ "$target" = tokenizer ]; then
    build_lib
    # models/llama reads config.json with models/json (hf.c)
    "$CC_" "${FLAGS[@]}" -Imodels/include -Imodels "fuzz/fuzz_$target.c" \
      "models/${target%_hf}"/*.c models/json/*.c "$WORK/lib/libfucina.a" -lm -lpthread -o "$bin"
  else
    "$CC_" "${FLAGS[@]}" "fuzz/fuzz_$target.c" "${SRCS[@]}" -lm -o "$bin"
  fi
done

# Each fuzzer is one process on one core: FUZZ_PARALLEL of them (default:
# the core count) run at once, each into its own log, shown when it ends.
fuzz_one() {
  local target="$1"
  mkdir -p "$WORK/corpus-$target"
  "$WORK/fuzz_$target" "$WORK/corpus-$target" "fuzz/corpus/$target" -max_total_time="$SECS" \
    -max_len="$(case "$target" in api) echo 512 ;; tokenizer) echo 8192 ;; *) echo 65536 ;; esac)" \
    -rss_limit_mb=2048 -artifact_prefix="$WORK/crash-$target-" -print_final_stats=1
}
PAR="${FUZZ_PARALLEL:-$(nproc)}"
status=0
pids=() names=()
finish() { # waits for the first running fuzzer and shows its log
  local pid="${pids[0]}" target="${names[0]}"
  pids=("${pids[@]:1}") names=("${names[@]:1}")
  local rc=0
  wait "$pid" || rc=$?
  echo "== fuzzed $target for ${SECS}s"
  cat "$WORK/fuzz-$target.log"
  if [ "$rc" -ne 0 ]; then
    echo "fuzz/run.sh: $target FAILED (artifacts: $WORK/crash-$target-*)" >&2
    status=1
  fi
}
for target in "${TARGETS[@]}"; do
  [ ${#pids[@]} -lt "$PAR" ] || finish
  fuzz_one "$target" > "$WORK/fuzz-$target.log" 2>&1 &
  pids+=($!) names+=("$target")
done
while [ ${#pids[@]} -gt 0 ]; do finish; done
exit $status

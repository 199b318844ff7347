#!/usr/bin/env bash
# Builds the libFuzzer targets (clang only) and runs each for a bounded time.
#   fuzz/run.sh            # 60 seconds per target
#   fuzz/run.sh 300        # 300 seconds per target
# Targets: fuzz_safetensors, fuzz_gguf. Seeds: fuzz/corpus/<reader>/ (read
# only); new inputs go to $FUZZ_WORK/corpus-<reader>/, crashes to
# $FUZZ_WORK/crash-*. Exits non-zero when a target finds a crash, leak or
# sanitizer report. Needs clang and libclang-rt-14-dev (scripts/deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-60}"
WORK="${FUZZ_WORK:-/tmp/fucina-fuzz}"
CC_="${CC:-clang}"
mkdir -p "$WORK"
# The byte-level readers need only the core layer; tensor_io.c and
# checkpoint.c are the exec-level API on top and are left out.
SRCS=(src/core/*.c src/core/quant/*.c)
for f in src/io/*.c; do
  case "$f" in src/io/tensor_io.c|src/io/checkpoint.c) ;; *) SRCS+=("$f") ;; esac
done
FLAGS=(-std=c11 -D_DEFAULT_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined
       -fno-sanitize-recover=all -Iinclude -Isrc)
status=0
for target in safetensors gguf; do
  bin="$WORK/fuzz_$target"
  echo "== building $bin"
  "$CC_" "${FLAGS[@]}" "fuzz/fuzz_$target.c" "${SRCS[@]}" -lm -o "$bin"
  mkdir -p "$WORK/corpus-$target"
  echo "== fuzzing $target for ${SECS}s"
  if ! "$bin" "$WORK/corpus-$target" "fuzz/corpus/$target" -max_total_time="$SECS" \
       -max_len=65536 -rss_limit_mb=2048 -artifact_prefix="$WORK/crash-$target-" \
       -print_final_stats=1; then
    echo "fuzz/run.sh: $target FAILED (artifacts: $WORK/crash-$target-*)" >&2
    status=1
  fi
done
exit $status

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Long bounded fuzzing of the file readers (not part of CI; CI runs
# fuzz/run.sh for 30 seconds a target). Runs fuzz/run.sh with a longer
# budget, then reports per target the executions, the coverage reached and
# the corpus size, and copies every crashing input into the regression
# corpus fuzz/corpus/<target>/, which fuzz/run.sh replays on every CI run
# (libFuzzer executes all seed inputs before it mutates).
#   scripts/fuzz_long.sh            # 300 seconds per target
#   scripts/fuzz_long.sh 1200       # 20 minutes per target
# New inputs accumulate in $FUZZ_WORK (default /tmp/fucina-fuzz-long), so a
# second run continues from the first one's corpus. Exits non-zero when a
# target crashed (after copying the inputs).
set -uo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-300}"
export FUZZ_WORK="${FUZZ_WORK:-/tmp/fucina-fuzz-long}"
mkdir -p "$FUZZ_WORK"
LOG="$FUZZ_WORK/fuzz_long.log"
bash fuzz/run.sh "$SECS" > "$LOG" 2>&1
status=$?
echo "== fuzz_long: ${SECS}s per target (log: $LOG)"
for target in safetensors gguf; do
  # the target's part of the log: from its "fuzzing" banner to the next banner
  part="$(awk -v t="$target" '/^== fuzzing /{on = ($3 == t)} on' "$LOG")"
  execs="$(printf '%s\n' "$part" | sed -n 's/^stat::number_of_executed_units: *//p' | tail -1)"
  last="$(printf '%s\n' "$part" | grep -E '^#[0-9]+' | tail -1)"
  cov="$(printf '%s\n' "$last" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')"
  ft="$(printf '%s\n' "$last" | sed -n 's/.*ft: \([0-9]*\).*/\1/p')"
  corp="$(printf '%s\n' "$last" | sed -n 's/.*corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p')"
  echo "$target: executions ${execs:-?}, coverage ${cov:-?} edges, ${ft:-?} features," \
       "corpus ${corp:-?}"
  for crash in "$FUZZ_WORK"/crash-"$target"-*; do
    [ -f "$crash" ] || continue
    dest="fuzz/corpus/$target/regress-$(sha1sum "$crash" | cut -c1-16)"
    cp "$crash" "$dest"
    echo "$target: crashing input $crash copied to $dest (commit it with the fix)"
  done
done
exit $status

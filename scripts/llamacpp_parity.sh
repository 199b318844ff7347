#!/usr/bin/env bash
# Parity with llama.cpp: the prebuilt llama.cpp of the npm registry
# (scripts/npm_llamacpp.sh) reads fucina's fixtures and must agree.
#
#   bash scripts/llamacpp_parity.sh            # fetches once into build-ggml/
#
# Tokenizers: every case of tests/data/tokenizer/expected.txt (the ids that
# sentencepiece and GPT-2's reference BPE give, which tests/models/
# test_tokenizer.c holds fucina to) is tokenized by llama.cpp from the same
# GGUF vocabulary (spm.gguf, bpe.gguf), without special tokens, and must
# give the same ids. Prints a summary; exit status 1 on any difference, 0
# when llama.cpp cannot be had here (said on stderr: the check is skipped,
# not passed).
set -euo pipefail
cd "$(dirname "$0")/.."
VER="${GGML_NPM_VERSION:-3.22.1}"
DIR="${GGML_DIR:-build-ggml}"
rc=0
bash scripts/npm_llamacpp.sh "$DIR" "$VER" || rc=$?
if [ "$rc" = 3 ]; then
  echo "llamacpp_parity.sh: llama.cpp is not available here; parity NOT checked" >&2
  exit 0
fi
[ "$rc" = 0 ] || exit "$rc"
V="$(cd "$DIR" && pwd)/v$VER"
HARNESS="$V/llamacpp-harness"
if [ ! -x "$HARNESS" ] || [ scripts/llamacpp/harness.c -nt "$HARNESS" ]; then
  "${CC:-cc}" -std=c11 -O2 -Wall -Wextra -I"$V/llama" -I"$V/include" scripts/llamacpp/harness.c \
    -o "$HARNESS" "$V"/bins/libllama.*so "$V"/bins/libggml.*so "$V/bins/libggml-base.so" \
    -Wl,-rpath,"$V/bins"
fi
export LLAMACPP_BACKENDS="$V/bins"

fail=0
for kind in spm bpe; do
  exp="$(mktemp)" got="$(mktemp)"
  awk -F'\t' -v k="$kind" '$1 == k { print $3 }' tests/data/tokenizer/expected.txt > "$exp"
  awk -F'\t' -v k="$kind" '$1 == k { print ($2 == "" ? "-" : $2), 0 }' tests/data/tokenizer/expected.txt \
    | "$HARNESS" tokenize "tests/data/tokenizer/$kind.gguf" > "$got"
  n="$(wc -l < "$exp")"
  same="$(paste -d'\n' "$exp" "$got" | awk 'NR % 2 { a = $0; next } a == $0 { s++ } END { print s + 0 }')"
  echo "llamacpp_parity: tokenizer $kind: $same of $n cases give the same ids in llama.cpp $(sed -n 's/.*"tag": "\(.*\)".*/\1/p' "$V/llama.cpp.info.json")"
  if [ "$same" != "$n" ]; then
    paste "$exp" "$got" | awk -F'\t' '$1 != $2 { print "  expected: " $1 "\n  llama.cpp: " $2 }' | head -20
    fail=1
  fi
  rm -f "$exp" "$got"
done
exit "$fail"

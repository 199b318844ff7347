#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Parity with llama.cpp: the tokenizer fixtures (tests/data/tokenizer)
# tokenized by llama.cpp against the reference ids, and the Llama fixtures
# (tests/data/llama) through llama.cpp: its logits for the fixture prompt
# against PyTorch's and fucina's, and its greedy tokens against PyTorch's.
#
#   bash scripts/llama_cpp_parity.sh            # build/ must hold generate
#   LLAMA_CPP_STRICT=1 bash scripts/llama_cpp_parity.sh   # fail when the peer cannot be had
# .ci/run runs it after the suite (the peer is fetched from the npm registry).
#
# The peer is the prebuilt llama.cpp the npm registry ships:
# @node-llama-cpp/linux-x64 (libllama, libggml and its CPU variants) and the
# llama.cpp release bundled in node-llama-cpp (for llama.h and ggml's
# headers), both at GGML_NPM_VERSION (default 3.22.1, llama.cpp's tag
# v0.5.0 in its llama.cpp.info.json), fetched by scripts/npm_llamacpp.sh
# into GGML_DIR (default build-ggml/, ignored by git), which
# bench/qmatvec_vs_ggml.sh shares. Nothing of llama.cpp is built: only
# tests/llama_cpp/llama_tokenize.c and llama_logits.c, against those
# headers. Without npm, git or the registry, the script says so and exits 0
# (1 with LLAMA_CPP_STRICT=1).
#
# Tolerances (max |a - b| over every logit of the prompt; the comparison
# is scripts/llama_cpp_compare.py):
#   f32   llama.cpp vs PyTorch and vs fucina: 1e-4.
#   q4_k  llama.cpp quantizes the activations to q8_K, as fucina does: vs
#         PyTorch on the dequantized weights 3% of the largest |logit|; vs
#         PyTorch with that rounding emulated (gen_llama_fixture.q8_act,
#         needs python3-torch) and vs fucina: 1e-4.
#   q8_0  llama.cpp quantizes the activations to q8_0 with its scale
#         rounded to f16; fucina keeps that scale in f32. vs PyTorch 3%;
#         vs PyTorch emulating llama.cpp's rounding 1e-4; vs fucina 3% (the
#         two roundings, each ~1.5% from exact on this small, sensitive
#         model; fucina matches PyTorch emulating its own rounding to 1e-4
#         in tests/models/test_llama.c).
# Greedy tokens must equal PyTorch's while each step's lead over the
# runner-up (the .margins files) is beyond the type's 3% tolerance.
# Then two models fucina makes itself (llama_convert --new: fc_llama_new,
# fc_llama_save with its own keys), f32 and q4_k: llama.cpp must load
# them, agree with fucina's logits within 1e-4 and give the same 8 greedy
# tokens. Last, a model examples/train_llama trained (a few steps on
# GPL-3, byte-level tokenizer) and exported as f32 and q4_k with its
# tokenizer's keys: llama.cpp's tokenizer must give fucina's ids for a
# sample text on that file, and llama.cpp must load both files, agree with
# fucina's logits for those ids within 1e-4 and give the same 8 greedy
# tokens; the q4_k file is checked so at every SIMD level of the CPU
# (FUCINA_ISA=avx2, portable below the widest; trained_q4_k_<level>), as
# each level must give the same bits. Then that q4_k export fine-tuned with QLoRA for a few steps
# (examples/finetune_llama on Apache-2.0) and merged back to q4_k: the
# same checks on the merged file. Prints one line per model and a closing
# "N passed, N failed".
#   QLORA_MERGED=FILE [QLORA_TEXT=...] [GREEDY_N=N] bash scripts/llama_cpp_parity.sh
# checks that one merged file instead (scripts/qlora_workflow.sh does) and
# prints llama.cpp's greedy continuation of the text.
set -euo pipefail
cd "$(dirname "$0")/.."
VER="${GGML_NPM_VERSION:-3.22.1}"
DIR="${GGML_DIR:-build-ggml}"
GEN="${FUCINA_GENERATE:-build/examples/generate}" # and llama_convert beside it
PY=/usr/bin/python3

skip() {
  echo "llama_cpp_parity.sh: $*; skipping the llama.cpp parity" >&2
  [ "${LLAMA_CPP_STRICT:-0}" = 1 ] && exit 1
  exit 0
}

[ "$(uname -m)" = x86_64 ] || skip "the npm package holds x86-64 libraries only"
[ -x "$GEN" ] || skip "no $GEN (cmake --build build --target generate)"
rc=0
per_level=() # the trained q4_k export at the lower SIMD levels (below)
bash scripts/npm_llamacpp.sh "$DIR" "$VER" || rc=$?
[ "$rc" = 0 ] || skip "the prebuilt llama.cpp is not available here"
DIR="$(cd "$DIR" && pwd)"
LIB="$DIR/v$VER/bins"
INC="$DIR/v$VER/include"  # ggml's headers
LINC="$DIR/v$VER/llama"   # llama.h

# Tokenizers first: llama.cpp must tokenize every case of
# tests/data/tokenizer/expected.txt (sentencepiece's ids and GPT-2's
# reference BPE's, which tests/models/test_tokenizer.c holds fucina to)
# from the same GGUF vocabularies to the same ids.
TOKENIZE="$DIR/v$VER/llama_tokenize"
if [ ! -x "$TOKENIZE" ] || [ tests/llama_cpp/llama_tokenize.c -nt "$TOKENIZE" ]; then
  libllama=("$LIB"/libllama.*so)
  libggml=("$LIB"/libggml.*so)
  "${CC:-cc}" -std=c11 -O2 -Wall -Wextra -Werror -I"$LINC" -I"$INC" tests/llama_cpp/llama_tokenize.c \
    -o "$TOKENIZE" "${libllama[0]}" "$LIB/libggml-base.so" "${libggml[0]}" -Wl,-rpath,"$LIB"
fi
HARNESS="$DIR/v$VER/llama_logits"
if [ ! -x "$HARNESS" ] || [ tests/llama_cpp/llama_logits.c -nt "$HARNESS" ]; then
  libllama=("$LIB"/libllama.*so)
  libggml=("$LIB"/libggml.*so)
  "${CC:-cc}" -std=c11 -O2 -Wall -Wextra -Werror -I"$LINC" -I"$INC" tests/llama_cpp/llama_logits.c \
    -o "$HARNESS" "${libllama[0]}" "$LIB/libggml-base.so" "${libggml[0]}" -Wl,-rpath,"$LIB"
fi

OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
tok_fail=0
# fucina's ids for text on a file fucina wrote (into fc_ids), which
# llama.cpp's tokenizer must give too
ids_of() { # what model text
  local what="$1" model="$2" text="$3" lc_ids
  fc_ids="$("$GEN" "$model" --text "$text" --print-ids 2> /dev/null || true)"
  lc_ids="$(printf '%s 1\n' "$(printf '%s' "$text" | od -An -tx1 | tr -d ' \n')" |
            "$TOKENIZE" "$LIB" "$model" 2> /dev/null | tr ' ' ',' || true)"
  if [ -n "$fc_ids" ] && [ "$fc_ids" = "$lc_ids" ]; then
    echo "tokenizer of $what: llama.cpp gives fucina's $(echo "$fc_ids" | tr ',' '\n' | wc -l) ids"
  else
    printf 'tokenizer of %s: fucina  %s\n    llama.cpp %s\n' "$what" "$fc_ids" "$lc_ids"
    tok_fail=1
  fi
}
# llama.cpp's logits and greedy tokens (GREEDY_N, default 8) for the ids
# on a file fucina wrote, and fucina's, as NAME.* for llama_cpp_compare.py
made_by_fucina() { # name model ids_csv
  local name="$1" model="$2" csv="$3" ids
  IFS=, read -r -a ids <<< "$csv"
  "$HARNESS" "$LIB" "$model" "${GREEDY_N:-8}" "${ids[@]}" > "$OUT/$name.llama_cpp.txt" \
    2> "$OUT/$name.log" || { cat "$OUT/$name.log" >&2; return 0; }
  "$GEN" "$model" --prompt "$csv" --n "${GREEDY_N:-8}" --threads 1 \
    --logits "$OUT/$name.fucina.bin" > "$OUT/$name.fucina.txt" 2> /dev/null
}
# QLORA_MERGED=FILE (scripts/qlora_workflow.sh): that merged file only, its
# tokenizer, logits and greedy tokens, as "merged"; llama.cpp's greedy
# continuation of QLORA_TEXT is printed decoded (byte-level vocabulary).
if [ -n "${QLORA_MERGED:-}" ]; then
  ids_of "$QLORA_MERGED" "$QLORA_MERGED" "${QLORA_TEXT:-The }"
  if [ -n "$fc_ids" ]; then made_by_fucina merged "$QLORA_MERGED" "$fc_ids"; fi
  if [ -f "$OUT/merged.llama_cpp.txt" ]; then
    printf 'llama.cpp generates from %s: %s' "$QLORA_MERGED" "${QLORA_TEXT:-The }"
    awk '$1 == "greedy" { for (i = 2; i <= NF; i++) print $i }' "$OUT/merged.llama_cpp.txt" |
      "$PY" -c 'import sys; sys.stdout.buffer.write(bytes(int(t) for t in sys.stdin.read().split() if int(t) < 256))'
    echo
  fi
  "$PY" scripts/llama_cpp_compare.py "$OUT" merged && [ "$tok_fail" = 0 ]
  exit
fi
for kind in spm bpe; do
  exp="$(mktemp)" got="$(mktemp)"
  awk -F'\t' -v k="$kind" '$1 == k { print $3 }' tests/data/tokenizer/expected.txt > "$exp"
  awk -F'\t' -v k="$kind" '$1 == k { print ($2 == "" ? "-" : $2), 0 }' tests/data/tokenizer/expected.txt \
    | "$TOKENIZE" "$LIB" "tests/data/tokenizer/$kind.gguf" > "$got"
  n="$(wc -l < "$exp")"
  same="$(paste -d'\n' "$exp" "$got" | awk 'NR % 2 { a = $0; next } a == $0 { s++ } END { print s + 0 }')"
  echo "tokenizer $kind: $same of $n cases give the same ids in llama.cpp"
  if [ "$same" != "$n" ]; then
    paste "$exp" "$got" | awk -F'\t' '$1 != $2 { print "  expected:  " $1 "\n  llama.cpp: " $2 }' | head -20
    tok_fail=1
  fi
  rm -f "$exp" "$got"
done

PROMPT=(1 17 42 5 63 17 8 90 33 2 71 17) # gen_llama_fixture.py's first prompt
for name in tiny_f32 tiny_q8_0 small_q4_k; do
  model="tests/data/llama/$name.gguf"
  vocab="$("$PY" -c 'import sys; print({"tiny": 96, "small": 64}[sys.argv[1].split("_")[0]])' "$name")"
  ids=()
  for t in "${PROMPT[@]}"; do ids+=($((t % vocab))); done
  "$HARNESS" "$LIB" "$model" 8 "${ids[@]}" > "$OUT/$name.llama_cpp.txt" 2> "$OUT/$name.log" ||
    { cat "$OUT/$name.log" >&2; echo "$name: llama.cpp failed" > "$OUT/$name.result"; continue; }
  csv="$(IFS=,; echo "${ids[*]}")"
  "$GEN" "$model" --prompt "$csv" --n 8 --threads 1 --logits "$OUT/$name.fucina.bin" \
    > "$OUT/$name.fucina.txt" 2> /dev/null
done
# Models fucina made (fc_llama_new, written by fc_llama_save): llama.cpp
# must load them and agree with fucina.
CONVERT="${FUCINA_LLAMA_CONVERT:-$(dirname "$GEN")/llama_convert}"
if [ -x "$CONVERT" ]; then
  for spec in "f32 64,64,4,2,2,96,32,7" "q4_k 64,256,4,2,1,256,32,8"; do
    read -r dt cfg <<< "$spec"
    model="$OUT/new_$dt.gguf"
    "$CONVERT" --new "$cfg" "$model" "$dt"
    "$HARNESS" "$LIB" "$model" 8 1 2 3 4 5 > "$OUT/new_$dt.llama_cpp.txt" 2> "$OUT/new_$dt.log" ||
      { cat "$OUT/new_$dt.log" >&2; continue; }
    "$GEN" "$model" --prompt 1,2,3,4,5 --n 8 --threads 1 --logits "$OUT/new_$dt.fucina.bin" \
      > "$OUT/new_$dt.fucina.txt" 2> /dev/null
  done
else
  echo "llama_cpp_parity.sh: no $CONVERT: the models fucina makes are not checked" >&2
fi
# A model train_llama trained and exported (dim 256, so q4_k's blocks of
# 256 divide every weight's rows): its tokenizer, then its logits.
TRAIN="${FUCINA_TRAIN_LLAMA:-$(dirname "$GEN")/train_llama}"
if [ -x "$TRAIN" ]; then
  "$TRAIN" --out "$OUT/trained" --dim 256 --layers 1 --heads 4 --kv-heads 2 --ff 256 --block 64 \
    --batch 4 --steps 20 --warmup 5 --lr 3e-3 --eval-every 20 --sample-every 0 --sample-len 0 \
    --minutes 0 --threads 2 --export-dtype f32,q4_k > "$OUT/trained.log" 2>&1 ||
    { cat "$OUT/trained.log" >&2; echo "train_llama failed" >&2; }
  text='The GNU General Public License, v3 (h\xc3\xa9llo w\xc3\xb6rld)'
  text="$(printf "$text")"
  ids_of "the train_llama export" "$OUT/trained/model-f32.gguf" "$text"
  for dt in f32 q4_k; do
    model="$OUT/trained/model-$dt.gguf"
    if [ -n "$fc_ids" ] && [ -f "$model" ]; then made_by_fucina "trained_$dt" "$model" "$fc_ids"; fi
  done
  # The q4_k export again at every lower SIMD level of this CPU
  # (FUCINA_ISA): llama.cpp must agree with each as with the widest.
  case "$(bash scripts/cpu_level.sh)" in
    avx512) lower=(avx2 portable) ;;
    avx2) lower=(portable) ;;
    *) lower=() ;;
  esac
  if [ -f "$OUT/trained_q4_k.llama_cpp.txt" ]; then
    for lv in "${lower[@]}"; do
      cp "$OUT/trained_q4_k.llama_cpp.txt" "$OUT/trained_q4_k_$lv.llama_cpp.txt"
      FUCINA_ISA="$lv" "$GEN" "$OUT/trained/model-q4_k.gguf" --prompt "$fc_ids" --n "${GREEDY_N:-8}" \
        --threads 1 --logits "$OUT/trained_q4_k_$lv.fucina.bin" > "$OUT/trained_q4_k_$lv.fucina.txt" \
        2> /dev/null
      per_level+=("trained_q4_k_$lv")
    done
  fi
  # QLoRA on that q4_k export (examples/finetune_llama, a few steps on
  # Apache-2.0), merged and re-quantized to q4_k: llama.cpp must load the
  # merged file and agree with fucina as above.
  FINETUNE="${FUCINA_FINETUNE_LLAMA:-$(dirname "$GEN")/finetune_llama}"
  if [ -x "$FINETUNE" ] && [ -f "$OUT/trained/model-q4_k.gguf" ]; then
    "$FINETUNE" --base "$OUT/trained/model-q4_k.gguf" /usr/share/common-licenses/Apache-2.0 \
      --out "$OUT/finetuned" --block 64 --batch 4 --steps 10 --warmup 2 --lr 3e-3 --rank 4 \
      --eval-every 10 --sample-len 0 --minutes 0 --threads 2 \
      --merge-out "$OUT/finetuned-q4_k.gguf" --merge-type q4_k > "$OUT/finetuned.log" 2>&1 ||
      { cat "$OUT/finetuned.log" >&2; echo "finetune_llama failed" >&2; }
    if [ -n "$fc_ids" ] && [ -f "$OUT/finetuned-q4_k.gguf" ]; then
      made_by_fucina finetuned_q4_k "$OUT/finetuned-q4_k.gguf" "$fc_ids"
    fi
  else
    echo "llama_cpp_parity.sh: no $FINETUNE: the QLoRA merge is not checked" >&2
  fi
else
  echo "llama_cpp_parity.sh: no $TRAIN: the train_llama export is not checked" >&2
fi
cmp_fail=0
"$PY" scripts/llama_cpp_compare.py "$OUT" || cmp_fail=1
if [ ${#per_level[@]} -gt 0 ]; then
  "$PY" scripts/llama_cpp_compare.py "$OUT" "${per_level[@]}" || cmp_fail=1
fi
[ "$cmp_fail" = 0 ] && [ "$tok_fail" = 0 ]

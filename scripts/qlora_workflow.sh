#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The whole QLoRA workflow, offline, on two texts every Debian machine has:
#   1. train a small Llama from scratch on GPL-3 (examples/train_llama,
#      byte-level tokenizer);
#   2. export it quantized as q4_k (train_llama --export-dtype q4_k: dim
#      256 and ff 512, so q4_k's blocks of 256 divide every weight's rows);
#   3. fine-tune it with QLoRA on Apache-2.0 (examples/finetune_llama: the
#      q4_k weights stay quantized and frozen, only the adapter trains);
#   4. print the held-out loss on the new text before and after, and the
#      base file's SHA-256 before and after (it must not change);
#   5. merge the adapter into a q4_k GGUF, load it in llama.cpp (the npm
#      registry's prebuilt build, scripts/npm_llamacpp.sh) and generate:
#      llama.cpp's logits must agree with fucina's on the merged file
#      within 1e-4 and its greedy tokens must be fucina's
#      (scripts/llama_cpp_parity.sh with QLORA_MERGED).
#
#   bash scripts/qlora_workflow.sh [--quick] [OUT_DIR]   (default qlora_workflow_out)
#
# FUCINA_BUILD (default build) holds examples/train_llama, finetune_llama
# and generate (cmake --build build --target train_llama finetune_llama
# generate). The default sizes take a couple of minutes on 2 cores;
# --quick (one layer, fewer steps) some 20 s. Without llama.cpp (no npm,
# no registry, not x86-64) step 5 says so and generates with fucina only.
# Exit status 1 when a step fails, the base changed, or the held-out loss
# did not fall.
set -euo pipefail
cd "$(dirname "$0")/.."
QUICK=0
if [ "${1:-}" = --quick ]; then QUICK=1; shift; fi
OUT="${1:-qlora_workflow_out}"
BUILD="${FUCINA_BUILD:-build}/examples"
THREADS="${THREADS:-$(nproc)}"
for b in train_llama finetune_llama generate; do
  [ -x "$BUILD/$b" ] || { echo "qlora_workflow.sh: no $BUILD/$b (cmake --build build --target $b)" >&2; exit 1; }
done
PRETRAIN=/usr/share/common-licenses/GPL-3
NEWTEXT=/usr/share/common-licenses/Apache-2.0
if [ "$QUICK" = 1 ]; then
  model=(--dim 256 --layers 1 --heads 4 --kv-heads 2 --ff 256 --block 64)
  pre_steps=60 ft_steps=40
else
  model=(--dim 256 --layers 2 --heads 4 --kv-heads 2 --ff 512 --block 64)
  pre_steps=400 ft_steps=150
fi
rm -rf "$OUT" && mkdir -p "$OUT"

echo "== 1-2. train a Llama from scratch on $PRETRAIN, export q4_k"
"$BUILD/train_llama" "$PRETRAIN" --out "$OUT/base" "${model[@]}" --batch 8 --steps "$pre_steps" \
  --warmup 20 --lr 3e-3 --eval-every 100 --sample-every 0 --sample-len 60 --minutes 0 \
  --threads "$THREADS" --export-dtype q4_k > "$OUT/train_llama.log"
grep -E "^(val loss|done|exported)" "$OUT/train_llama.log"
BASE="$OUT/base/model-q4_k.gguf"
sha_before="$(sha256sum "$BASE" | cut -d' ' -f1)"
echo "base $BASE: sha256 $sha_before"

echo "== 3. QLoRA fine-tuning on $NEWTEXT (base weights stay q4_k and frozen)"
"$BUILD/finetune_llama" --base "$BASE" "$NEWTEXT" --out "$OUT/finetune" --block 64 --batch 8 \
  --rank 8 --alpha 16 --dropout 0.05 --targets q,k,v,o,gate,up,down --steps "$ft_steps" \
  --warmup 10 --lr 3e-3 --eval-every 25 --sample-every 0 --sample-len 60 --minutes 0 \
  --threads "$THREADS" --adapter-out "$OUT/adapter/adapter_model.safetensors" \
  --merge-out "$OUT/merged-q4_k.gguf" --merge-type q4_k --expect-drop 0 \
  > "$OUT/finetune_llama.log"
grep -E "^(base|adapter:|done|wrote|merged|held-out|base unchanged)" "$OUT/finetune_llama.log"

echo "== 4. the base file"
sha_after="$(sha256sum "$BASE" | cut -d' ' -f1)"
echo "base $BASE: sha256 $sha_after after fine-tuning"
if [ "$sha_after" != "$sha_before" ]; then
  echo "qlora_workflow.sh: the base file changed" >&2
  exit 1
fi
echo "base unchanged (sha256 identical)"

echo "== 5. the merged file in fucina and in llama.cpp"
printf 'fucina generates from %s: ' "$OUT/merged-q4_k.gguf"
"$BUILD/generate" "$OUT/merged-q4_k.gguf" --text "The " --n 40 --threads "$THREADS" 2> /dev/null
rc=0
FUCINA_GENERATE="$BUILD/generate" QLORA_MERGED="$OUT/merged-q4_k.gguf" QLORA_TEXT="The " \
  GREEDY_N=40 bash scripts/llama_cpp_parity.sh || rc=$?
[ "$rc" = 0 ] || { echo "qlora_workflow.sh: llama.cpp parity on the merged file failed" >&2; exit 1; }
echo "qlora_workflow.sh: done; files in $OUT (adapter/ is a PEFT adapter folder)"

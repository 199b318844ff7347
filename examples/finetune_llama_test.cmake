# SPDX-License-Identifier: MIT
# Checks of examples/finetune_llama (QLoRA over a frozen quantized base), run as
#   cmake -DMODE=workflow|resume -DTRAINER=<train_llama> -DFINETUNE=<finetune_llama>
#         [-DGENERATE=<generate>] -DDIR=<scratch dir> [-DEMULATOR="<command line>"]
#         -P finetune_llama_test.cmake
# Both start as scripts/qlora_workflow.sh does, small: a tiny Llama trained
# from scratch on GPL-3 (byte-level tokenizer) and exported as q8_0, the
# base; then fine-tuned on another licence (Apache-2.0).
# workflow: the held-out loss on the new text must fall (--expect-drop), the
#   base file must be byte-identical afterwards (its SHA-256 here, besides
#   the fine-tuner's own check), the adapter and its adapter_config.json
#   must be written, the merged q8_0 GGUF's held-out loss must be the
#   adapted model's within 0.01 (--expect-merged), and examples/generate
#   must load the merged file and generate text from it.
# resume: 30 steps in one go (with dropout, so the context RNG matters)
#   must end with the same losses, to the last printed digit, as 15 steps
#   (--stop-after, same schedule) and a resumed run to step 30.
separate_arguments(emu UNIX_COMMAND "${EMULATOR}")
set(licences /usr/share/common-licenses)
foreach(f GPL-3 Apache-2.0)
  if(NOT EXISTS ${licences}/${f})
    message(STATUS "no ${licences}/${f}: skipped")
    return()
  endif()
endforeach()

function(run what out)
  execute_process(COMMAND ${emu} ${ARGN} OUTPUT_VARIABLE o ERROR_VARIABLE e RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${o}\n${e}")
  endif()
  set(${out} "${o}" PARENT_SCOPE)
endfunction()

# the base: 60 steps of a dim-32 model, exported as q8_0 (blocks of 32
# divide every weight's rows)
file(REMOVE_RECURSE ${DIR})
run("train_llama" log ${TRAINER} ${licences}/GPL-3 --out ${DIR}/base --dim 32 --layers 1
    --heads 2 --kv-heads 1 --ff 64 --block 16 --batch 8 --steps 60 --warmup 5 --lr 1e-2
    --eval-every 60 --sample-every 0 --sample-len 0 --minutes 0 --threads 1
    --export-dtype q8_0)
set(base ${DIR}/base/model-q8_0.gguf)
file(SHA256 ${base} sha_before)
set(ft ${FINETUNE} --base ${base} ${licences}/Apache-2.0 --block 16 --batch 8 --rank 8
    --alpha 16 --warmup 5 --lr 3e-2 --minutes 0 --threads 1 --sample-len 0)

function(final_line log out)
  string(REGEX MATCH "final: [^\n]*" line "${log}")
  set(${out} "${line}" PARENT_SCOPE)
endfunction()

if(MODE STREQUAL "workflow")
  # (the held-out loss goes from 2.97 to 2.88 here; the merged file's is
  # the adapter's within 1e-4)
  run("finetune_llama" log ${ft} --out ${DIR}/ft --steps 60 --eval-every 30 --dropout 0
      --merge-out ${DIR}/merged-q8_0.gguf --merge-type q8_0 --expect-drop 0.05
      --expect-merged 0.01)
  string(REGEX MATCH "held-out loss[^\n]*" held "${log}")
  string(REGEX MATCH "merged [^\n]*" merged "${log}")
  message(STATUS "${held}")
  message(STATUS "${merged}")
  if(NOT log MATCHES "base unchanged: ")
    message(FATAL_ERROR "finetune_llama did not check the base:\n${log}")
  endif()
  file(SHA256 ${base} sha_after)
  if(NOT sha_after STREQUAL sha_before)
    message(FATAL_ERROR "the base file changed: ${sha_before} -> ${sha_after}")
  endif()
  file(READ ${DIR}/ft/adapter_config.json config)
  if(NOT EXISTS ${DIR}/ft/adapter_model.safetensors OR NOT config MATCHES "\"LORA\"")
    message(FATAL_ERROR "no adapter, or no PEFT adapter_config.json:\n${config}")
  endif()
  run("generate on the merged file" got ${GENERATE} ${DIR}/merged-q8_0.gguf --text "the "
      --n 12 --threads 1)
  string(REGEX REPLACE "\n$" "" got "${got}")
  string(LENGTH "${got}" len)
  message(STATUS "generate on the merged file: [${got}]")
  if(NOT got MATCHES "^the " OR len LESS 8)
    message(FATAL_ERROR "generate on the merged file printed [${got}]")
  endif()
elseif(MODE STREQUAL "resume")
  set(r --steps 30 --eval-every 15 --dropout 0.1)
  run("finetune_llama" straight ${ft} ${r} --out ${DIR}/straight)
  run("finetune_llama" first ${ft} ${r} --out ${DIR}/split --stop-after 15)
  run("finetune_llama --resume" resumed ${ft} ${r} --out ${DIR}/split --resume)
  final_line("${straight}" straight)
  final_line("${first}" first)
  final_line("${resumed}" resumed)
  message(STATUS "straight: ${straight}")
  message(STATUS "first:    ${first}")
  message(STATUS "resumed:  ${resumed}")
  if(NOT straight MATCHES "^final: step 30 " OR NOT first MATCHES "^final: step 15 ")
    message(FATAL_ERROR "the runs did not stop where asked")
  endif()
  if(NOT straight STREQUAL resumed)
    message(FATAL_ERROR "the resumed run differs from the straight one")
  endif()
  file(SHA256 ${DIR}/straight/adapter_model.safetensors a)
  file(SHA256 ${DIR}/split/adapter_model.safetensors b)
  if(NOT a STREQUAL b)
    message(FATAL_ERROR "the resumed run's adapter differs from the straight one's")
  endif()
else()
  message(FATAL_ERROR "MODE must be workflow or resume")
endif()

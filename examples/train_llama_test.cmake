# SPDX-License-Identifier: MIT
# Checks of examples/train_llama, run as
#   cmake -DMODE=resume|export -DTRAINER=<train_llama> [-DGENERATE=<generate>]
#         -DDIR=<scratch dir> [-DEMULATOR="<command line>"] -P train_llama_test.cmake
# resume: 30 steps in one go must end with the same losses, to the last
#   printed digit, as 15 steps (--stop-after, same schedule) followed by a
#   resumed run to step 30 (as resume_test.cmake does for train_gpt), with
#   one metrics.csv row per step and a rising elapsed_s; a resume with
#   another --lr is refused (exit 2); resuming the finished run with
#   another --export-dtype takes no step, adds no row and writes the export.
# export: a short run exports f32 and q8_0 GGUF files with the tokenizer's
#   keys; generate --text on the f32 file must print exactly the text the
#   trainer sampled greedily from the same prompt in memory (sample.txt),
#   and must load and generate from the q8_0 file.
include(${CMAKE_CURRENT_LIST_DIR}/csv_check.cmake)
separate_arguments(emu UNIX_COMMAND "${EMULATOR}")
set(small --dim 32 --layers 1 --heads 2 --kv-heads 1 --ff 64 --block 16 --batch 8 --warmup 5
    --minutes 0 --threads 1)

# run_trainer(<final line var> args...): exit 0 wanted (WANT to change it);
# the whole output in <var>_out
function(run_trainer out)
  if(NOT DEFINED WANT)
    set(WANT 0)
  endif()
  execute_process(COMMAND ${emu} ${TRAINER} ${small} ${ARGN} OUTPUT_VARIABLE o ERROR_VARIABLE e
                  RESULT_VARIABLE rc)
  set(${out}_out "${o}${e}" PARENT_SCOPE)
  if(NOT rc EQUAL WANT)
    message(FATAL_ERROR "train_llama ${ARGN}: exit ${rc}, want ${WANT}:\n${o}\n${e}")
  endif()
  string(REGEX MATCH "final: [^\n]*" line "${o}")
  set(${out} "${line}" PARENT_SCOPE)
endfunction()

if(MODE STREQUAL "resume")
  file(REMOVE_RECURSE ${DIR}/straight ${DIR}/split)
  set(r --steps 30 --eval-every 15 --sample-every 0 --sample-len 0 --export-dtype f32)
  run_trainer(straight ${r} --out ${DIR}/straight)
  run_trainer(first ${r} --out ${DIR}/split --stop-after 15)
  set(WANT 2)
  run_trainer(refused ${r} --out ${DIR}/split --resume --lr 2e-3)
  unset(WANT)
  if(NOT refused_out MATCHES "cannot resume [^\n]* with another schedule.*--lr 0\\.001 .*--lr 0\\.002 ")
    message(FATAL_ERROR "a resume with another --lr was not refused by name:\n${refused_out}")
  endif()
  run_trainer(resumed ${r} --out ${DIR}/split --resume)
  message(STATUS "straight: ${straight}")
  message(STATUS "first:    ${first}")
  message(STATUS "resumed:  ${resumed}")
  if(NOT straight MATCHES "^final: step 30 " OR NOT first MATCHES "^final: step 15 ")
    message(FATAL_ERROR "the runs did not stop where asked")
  endif()
  if(NOT straight STREQUAL resumed)
    message(FATAL_ERROR "the resumed run differs from the straight one")
  endif()
  csv_check(${DIR}/split/metrics.csv)
  file(READ ${DIR}/split/metrics.csv before)
  run_trainer(again --steps 30 --eval-every 15 --sample-every 0 --sample-len 0
              --export-dtype q8_0 --out ${DIR}/split --resume)
  file(READ ${DIR}/split/metrics.csv after)
  if(NOT again_out MATCHES "already complete \\(step 30 of 30\\): no step is taken" OR
     again_out MATCHES "nan|final:" OR NOT before STREQUAL after OR
     NOT EXISTS ${DIR}/split/model-q8_0.gguf)
    message(FATAL_ERROR "exporting the finished run again:\n${again_out}")
  endif()
elseif(MODE STREQUAL "export")
  file(REMOVE_RECURSE ${DIR})
  set(prompt "the ")
  run_trainer(fin --out ${DIR} --steps 250 --lr 1e-2 --eval-every 60 --sample-every 0
              --sample-len 11 --temperature 0 --sample-prompt ${prompt} --export-dtype f32,q8_0)
  file(READ ${DIR}/sample.txt want)
  foreach(dt f32 q8_0)
    execute_process(COMMAND ${emu} ${GENERATE} ${DIR}/model-${dt}.gguf --text ${prompt} --n 11
                            --threads 1
                    OUTPUT_VARIABLE got ERROR_VARIABLE e RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0 OR NOT e MATCHES "vocab 258")
      message(FATAL_ERROR "generate on the ${dt} export failed (${rc}):\n${got}\n${e}")
    endif()
    # generate ends its text with a newline
    string(REGEX REPLACE "\n$" "" got "${got}")
    message(STATUS "${dt}: [${got}]")
    if(dt STREQUAL "f32" AND NOT got STREQUAL want)
      message(FATAL_ERROR "generate on the f32 export printed [${got}], the trainer [${want}]")
    endif()
    string(LENGTH "${got}" len)
    if(NOT got MATCHES "^the " OR len LESS 6)
      message(FATAL_ERROR "generate on the ${dt} export printed [${got}]")
    endif()
  endforeach()
else()
  message(FATAL_ERROR "MODE must be resume or export")
endif()

# SPDX-License-Identifier: MIT
# train_gpt as 2 ranks (mpirun): 30 steps in one go must end with the same
# losses, to the last printed digit, as 15 steps (--stop-after) resumed by 2
# ranks to step 30; 1 rank with twice the batch resumed from that 2-rank
# checkpoint (another world size) and 1 rank with twice the batch from the
# start must end within rounding of it (the same data, another summation
# order). Run as: cmake -DTRAINER=<train_gpt> -DMPIRUN=<mpirun and options>
# -DDIR=<scratch dir> -P mpi_resume_test.cmake
set(common --d-model 32 --layers 1 --heads 2 --block 16 --steps 30 --warmup 5
    --eval-every 15 --sample-every 0 --sample-len 0 --minutes 0 --threads 1)
file(REMOVE_RECURSE ${DIR}/straight ${DIR}/split ${DIR}/other ${DIR}/one)

function(run_trainer out ranks)
  if(ranks EQUAL 2)
    set(cmd ${MPIRUN} ${TRAINER} --batch 4)
  else()
    set(cmd ${TRAINER} --batch 8)
  endif()
  execute_process(COMMAND ${cmd} ${common} ${ARGN} OUTPUT_VARIABLE o ERROR_VARIABLE e
                  RESULT_VARIABLE rc TIMEOUT 60)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "train_gpt (${ranks} ranks) ${ARGN} failed (${rc}):\n${o}\n${e}")
  endif()
  string(REGEX MATCH "final: [^\n]*" line "${o}")
  set(${out} "${line}" PARENT_SCOPE)
endfunction()

# the train_loss of a "final:" line
function(loss_of line out)
  string(REGEX MATCH "train_loss ([0-9.e+-]+)" m "${line}")
  set(${out} "${CMAKE_MATCH_1}" PARENT_SCOPE)
endfunction()

run_trainer(straight 2 --out ${DIR}/straight)
run_trainer(first 2 --out ${DIR}/split --stop-after 15)
file(COPY ${DIR}/split/ckpt.safetensors DESTINATION ${DIR}/other)
run_trainer(resumed 2 --out ${DIR}/split --resume)
run_trainer(other 1 --out ${DIR}/other --resume)
run_trainer(one 1 --out ${DIR}/one)
message(STATUS "2 ranks straight:        ${straight}")
message(STATUS "2 ranks to 15:           ${first}")
message(STATUS "2 ranks resumed:         ${resumed}")
message(STATUS "1 rank x 2B resumed:     ${other}")
message(STATUS "1 rank x 2B straight:    ${one}")
if(NOT straight MATCHES "^final: step 30 " OR NOT first MATCHES "^final: step 15 "
   OR NOT other MATCHES "^final: step 30 ")
  message(FATAL_ERROR "the runs did not stop where asked")
endif()
if(NOT straight STREQUAL resumed)
  message(FATAL_ERROR "the resumed 2-rank run differs from the straight one")
endif()
loss_of("${straight}" a)
foreach(line "${other}" "${one}")
  loss_of("${line}" b)
  # |a - b| <= 1e-4 * a, in the integer arithmetic cmake has: scaled by 1e8
  string(REPLACE "." "" ai "${a}")
  string(REPLACE "." "" bi "${b}")
  math(EXPR d "${ai} - ${bi}")
  if(d LESS 0)
    math(EXPR d "0 - ${d}")
  endif()
  math(EXPR lim "${ai} / 10000")
  if(d GREATER lim)
    message(FATAL_ERROR "1 rank with twice the batch ends at ${b}, 2 ranks at ${a}")
  endif()
endforeach()

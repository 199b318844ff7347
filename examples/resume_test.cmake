# SPDX-License-Identifier: MIT
# Checks that --resume continues a train_gpt run exactly: 30 steps in one go
# must end with the same losses, to the last printed digit, as 15 steps
# (--stop-after, same schedule) followed by a resumed run to step 30; the
# split run's metrics.csv must have one row per step and a rising
# elapsed_s (csv_check.cmake); a resume with another --steps is refused
# (exit 2) naming the schedules; resuming the finished run says it is
# complete, exits 0 and changes nothing.
# Run as: cmake -DTRAINER=<train_gpt> -DDIR=<scratch dir> -P resume_test.cmake
# In a cross build, -DEMULATOR="<command line>" (qemu-user say) runs TRAINER.
include(${CMAKE_CURRENT_LIST_DIR}/csv_check.cmake)
separate_arguments(emu UNIX_COMMAND "${EMULATOR}")
set(common --d-model 32 --layers 1 --heads 2 --block 16 --batch 8 --warmup 5
    --eval-every 15 --sample-every 0 --sample-len 0 --minutes 0 --threads 1)
file(REMOVE_RECURSE ${DIR}/straight ${DIR}/split)

# run_trainer(<final line var> <want exit> args...): the output in <var>_out
function(run_trainer out want)
  execute_process(COMMAND ${emu} ${TRAINER} ${common} ${ARGN} OUTPUT_VARIABLE o ERROR_VARIABLE e
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL want)
    message(FATAL_ERROR "train_gpt ${ARGN}: exit ${rc}, want ${want}:\n${o}\n${e}")
  endif()
  string(REGEX MATCH "final: [^\n]*" line "${o}")
  set(${out} "${line}" PARENT_SCOPE)
  set(${out}_out "${o}${e}" PARENT_SCOPE)
endfunction()

run_trainer(straight 0 --steps 30 --out ${DIR}/straight)
run_trainer(first 0 --steps 30 --out ${DIR}/split --stop-after 15)
run_trainer(longer 2 --steps 60 --out ${DIR}/split --resume)
if(NOT longer_out MATCHES "cannot resume [^\n]* with another schedule.*--steps 30 .*--steps 60 ")
  message(FATAL_ERROR "a resume with another --steps was not refused by name:\n${longer_out}")
endif()
run_trainer(resumed 0 --steps 30 --out ${DIR}/split --resume)
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
file(STRINGS ${DIR}/straight/metrics.csv rows_straight)
file(STRINGS ${DIR}/split/metrics.csv rows_split)
list(LENGTH rows_straight n_straight)
list(LENGTH rows_split n_split)
if(NOT n_straight EQUAL n_split)
  message(FATAL_ERROR "metrics.csv: ${n_split} lines split, ${n_straight} straight")
endif()
# the run is complete: a resume takes no step, prints no loss, adds no row
file(READ ${DIR}/split/metrics.csv before)
run_trainer(again 0 --steps 30 --out ${DIR}/split --resume)
file(READ ${DIR}/split/metrics.csv after)
if(NOT again_out MATCHES "already complete \\(step 30 of 30\\)" OR again_out MATCHES "nan|final:"
   OR NOT before STREQUAL after)
  message(FATAL_ERROR "resuming the finished run:\n${again_out}")
endif()

# SPDX-License-Identifier: MIT
# Checks that --resume continues a train_cnn run exactly (with batch norm,
# whose running statistics travel in the checkpoint too): 24 steps in one go
# must end with the same loss, to the last printed digit, as 13 steps
# (--stop-after, same schedule; mid-epoch, so the epoch's order is rebuilt)
# followed by a resumed run to step 24; the split run's metrics.csv must
# have one row per step and a rising elapsed_s (csv_check.cmake); a resume
# with another --steps is refused (exit 2); resuming the finished run says
# it is complete, exits 0, prints no loss and changes nothing.
# Run as: cmake -DTRAINER=<train_cnn> -DDIR=<scratch dir> -P cnn_resume_test.cmake
# In a cross build, -DEMULATOR="<command line>" (qemu-user say) runs TRAINER.
# Without the data set (the trainer's exit 77) it prints a line ctest reads
# as a skip (SKIP_REGULAR_EXPRESSION).
# -DSMALL=ON (under an emulator, whose floating point is software) runs 4
# steps of 8 images, stopping at 2, and evaluates on 16 test images.
include(${CMAKE_CURRENT_LIST_DIR}/csv_check.cmake)
separate_arguments(emu UNIX_COMMAND "${EMULATOR}")
set(steps 24)
set(stop 13)
set(batch 32)
set(images 320)
set(tests 200)
if(SMALL)
  set(steps 4)
  set(stop 2)
  set(batch 8)
  set(images 24)
  set(tests 16)
endif()
set(common --batch-norm --batch ${batch} --train-limit ${images} --eval-every 100
    --test-limit ${tests} --minutes 0 --threads 1)
file(REMOVE_RECURSE ${DIR}/straight ${DIR}/split)

# run_trainer(<final line var> args...): exit 0 wanted (WANT to change it);
# the whole output in <var>_out
function(run_trainer out)
  if(NOT DEFINED WANT)
    set(WANT 0)
  endif()
  execute_process(COMMAND ${emu} ${TRAINER} ${common} ${ARGN} OUTPUT_VARIABLE o ERROR_VARIABLE e
                  RESULT_VARIABLE rc)
  set(${out}_out "${o}${e}" PARENT_SCOPE)
  if(rc EQUAL 77)
    message(STATUS "train_cnn_resume: no Fashion-MNIST, skipped")
    set(${out} "skipped" PARENT_SCOPE)
    return()
  endif()
  if(NOT rc EQUAL WANT)
    message(FATAL_ERROR "train_cnn ${ARGN}: exit ${rc}, want ${WANT}:\n${o}\n${e}")
  endif()
  string(REGEX MATCH "final: [^\n]*" line "${o}")
  set(${out} "${line}" PARENT_SCOPE)
endfunction()

run_trainer(straight --steps ${steps} --out ${DIR}/straight)
if(straight STREQUAL "skipped")
  return()
endif()
run_trainer(first --steps ${steps} --out ${DIR}/split --stop-after ${stop})
math(EXPR longer "${steps} * 2")
set(WANT 2)
run_trainer(refused --steps ${longer} --out ${DIR}/split --resume)
unset(WANT)
if(NOT refused_out MATCHES "cannot resume [^\n]* with another schedule")
  message(FATAL_ERROR "a resume with another --steps was not refused by name:\n${refused_out}")
endif()
run_trainer(resumed --steps ${steps} --out ${DIR}/split --resume)
message(STATUS "straight: ${straight}")
message(STATUS "first:    ${first}")
message(STATUS "resumed:  ${resumed}")
if(NOT straight MATCHES "^final: step ${steps} " OR NOT first MATCHES "^final: step ${stop} ")
  message(FATAL_ERROR "the runs did not stop where asked")
endif()
if(NOT straight STREQUAL resumed)
  message(FATAL_ERROR "the resumed run differs from the straight one")
endif()
csv_check(${DIR}/split/metrics.csv)
# the run is complete: a resume takes no step, prints no loss, adds no row
file(READ ${DIR}/split/metrics.csv before)
run_trainer(again --steps ${steps} --out ${DIR}/split --resume)
file(READ ${DIR}/split/metrics.csv after)
if(NOT again_out MATCHES "already complete \\(step ${steps} of ${steps}\\)" OR
   again_out MATCHES "nan|final:|0\\.00 ms" OR NOT before STREQUAL after)
  message(FATAL_ERROR "resuming the finished run:\n${again_out}")
endif()

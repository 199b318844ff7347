# Checks that --resume continues a train_cnn run exactly (with batch norm,
# whose running statistics travel in the checkpoint too): 24 steps in one go
# must end with the same loss, to the last printed digit, as 13 steps
# (--stop-after, same schedule; mid-epoch, so the epoch's order is rebuilt)
# followed by a resumed run to step 24.
# Run as: cmake -DTRAINER=<train_cnn> -DDIR=<scratch dir> -P cnn_resume_test.cmake
# In a cross build, -DEMULATOR="<command line>" (qemu-user say) runs TRAINER.
# Without the data set (the trainer's exit 77) it prints a line ctest reads
# as a skip (SKIP_REGULAR_EXPRESSION).
# -DSMALL=ON (under an emulator, whose floating point is software) runs 4
# steps of 8 images, stopping at 2, and evaluates on 16 test images.
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
set(common --batch-norm --batch ${batch} --train-limit ${images} --steps ${steps}
    --eval-every 100 --test-limit ${tests} --minutes 0 --threads 1)
file(REMOVE_RECURSE ${DIR}/straight ${DIR}/split)

function(run_trainer out)
  execute_process(COMMAND ${emu} ${TRAINER} ${common} ${ARGN} OUTPUT_VARIABLE o ERROR_VARIABLE e
                  RESULT_VARIABLE rc)
  if(rc EQUAL 77)
    message(STATUS "train_cnn_resume: no Fashion-MNIST, skipped")
    set(${out} "skipped" PARENT_SCOPE)
    return()
  endif()
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "train_cnn ${ARGN} failed (${rc}):\n${o}\n${e}")
  endif()
  string(REGEX MATCH "final: [^\n]*" line "${o}")
  set(${out} "${line}" PARENT_SCOPE)
endfunction()

run_trainer(straight --out ${DIR}/straight)
if(straight STREQUAL "skipped")
  return()
endif()
run_trainer(first --out ${DIR}/split --stop-after ${stop})
run_trainer(resumed --out ${DIR}/split --resume)
message(STATUS "straight: ${straight}")
message(STATUS "first:    ${first}")
message(STATUS "resumed:  ${resumed}")
if(NOT straight MATCHES "^final: step ${steps} " OR NOT first MATCHES "^final: step ${stop} ")
  message(FATAL_ERROR "the runs did not stop where asked")
endif()
if(NOT straight STREQUAL resumed)
  message(FATAL_ERROR "the resumed run differs from the straight one")
endif()

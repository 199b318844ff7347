# SPDX-License-Identifier: MIT
# Checks that --checkpoint (gradient checkpointing of every block) trains
# exactly as the plain run: 30 steps of a two-block model must end with the
# same losses, to the last printed digit, at one thread and at two.
# Run as: cmake -DTRAINER=<train_gpt> -DDIR=<scratch dir> -P grad_checkpoint_test.cmake
# In a cross build, -DEMULATOR="<command line>" (qemu-user say) runs TRAINER.
separate_arguments(emu UNIX_COMMAND "${EMULATOR}")
set(common --d-model 32 --layers 2 --heads 2 --block 16 --batch 8 --steps 30 --warmup 5
    --eval-every 15 --sample-every 0 --sample-len 0 --minutes 0)
file(REMOVE_RECURSE ${DIR})

function(run_trainer out)
  execute_process(COMMAND ${emu} ${TRAINER} ${common} ${ARGN} OUTPUT_VARIABLE o ERROR_VARIABLE e
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "train_gpt ${ARGN} failed (${rc}):\n${o}\n${e}")
  endif()
  string(REGEX MATCH "final: [^\n]*" line "${o}")
  set(${out} "${line}" PARENT_SCOPE)
endfunction()

foreach(threads 1 2)
  run_trainer(plain --out ${DIR}/plain${threads} --threads ${threads})
  run_trainer(ckpt --out ${DIR}/ckpt${threads} --threads ${threads} --checkpoint)
  message(STATUS "threads ${threads} plain:      ${plain}")
  message(STATUS "threads ${threads} checkpoint: ${ckpt}")
  if(NOT plain MATCHES "^final: step 30 ")
    message(FATAL_ERROR "the plain run did not reach step 30")
  endif()
  if(NOT plain STREQUAL ckpt)
    message(FATAL_ERROR "the checkpointed run differs from the plain one at ${threads} threads")
  endif()
endforeach()

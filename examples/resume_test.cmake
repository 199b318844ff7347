# Checks that --resume continues a train_gpt run exactly: 30 steps in one
# go must end with the same losses, to the last printed digit, as 15 steps
# (--stop-after, same schedule) followed by a resumed run to step 30.
# Run as: cmake -DTRAINER=<train_gpt> -DDIR=<scratch dir> -P resume_test.cmake
# In a cross build, -DEMULATOR="<command line>" (qemu-user say) runs TRAINER.
separate_arguments(emu UNIX_COMMAND "${EMULATOR}")
set(common --d-model 32 --layers 1 --heads 2 --block 16 --batch 8 --steps 30 --warmup 5
    --eval-every 15 --sample-every 0 --sample-len 0 --minutes 0 --threads 1)
file(REMOVE_RECURSE ${DIR}/straight ${DIR}/split)

function(run_trainer out)
  execute_process(COMMAND ${emu} ${TRAINER} ${common} ${ARGN} OUTPUT_VARIABLE o ERROR_VARIABLE e
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "train_gpt ${ARGN} failed (${rc}):\n${o}\n${e}")
  endif()
  string(REGEX MATCH "final: [^\n]*" line "${o}")
  set(${out} "${line}" PARENT_SCOPE)
endfunction()

run_trainer(straight --out ${DIR}/straight)
run_trainer(first --out ${DIR}/split --stop-after 15)
run_trainer(resumed --out ${DIR}/split --resume)
message(STATUS "straight: ${straight}")
message(STATUS "first:    ${first}")
message(STATUS "resumed:  ${resumed}")
if(NOT straight MATCHES "^final: step 30 " OR NOT first MATCHES "^final: step 15 ")
  message(FATAL_ERROR "the runs did not stop where asked")
endif()
if(NOT straight STREQUAL resumed)
  message(FATAL_ERROR "the resumed run differs from the straight one")
endif()

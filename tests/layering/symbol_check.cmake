# SPDX-License-Identifier: MIT
# The symbol check's self-test: builds a two-layer toy (exec calls ops) and
# expects cmake/check_layers.sh to reject it, then the same objects with the
# call allowed and expects it to pass. Run by ctest (layering/upward_call_fails).
set(dir ${WORK}/layering_selftest)
file(REMOVE_RECURSE ${dir})
file(MAKE_DIRECTORY ${dir}/fucina_exec.dir ${dir}/fucina_ops.dir)
foreach(pair "exec;planted_exec" "ops;planted_ops")
  list(GET pair 0 layer)
  list(GET pair 1 name)
  execute_process(COMMAND ${CC} -c ${SRC}/${name}.c -o ${dir}/fucina_${layer}.dir/${name}.o
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cannot compile ${name}.c")
  endif()
endforeach()
set(exec_o ${dir}/fucina_exec.dir/planted_exec.o)
set(ops_o ${dir}/fucina_ops.dir/planted_ops.o)
execute_process(COMMAND bash ${CHECK} ${NM} +exec=core,exec ${exec_o} +ops=core,exec,ops ${ops_o}
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "planted_exec.o \\(exec\\) uses planted_op, defined in the ops layer")
  message(FATAL_ERROR "the planted upward call was not refused (rc ${rc}): ${err}")
endif()
execute_process(COMMAND bash ${CHECK} ${NM} +exec=core,exec,ops ${exec_o} +ops=core,exec,ops ${ops_o}
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "an allowed call was refused: ${err}")
endif()
message(STATUS "refused as expected: ${err}")

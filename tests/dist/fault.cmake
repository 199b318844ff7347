# Runs fault_prog (see its comment) as 2 ranks in MODE and checks that the
# job fails, fast, for the expected reason; never hangs (TIMEOUT, and
# ctest's own). -DMPIRUN=<mpirun and its options> -DPROG=... -DMODE=exit|stall
if(MODE STREQUAL "stall")
  set(ENV{FUCINA_DIST_TIMEOUT_S} 2) # the deadline under test
  set(expect "FC_ERR_COMM: fc_ddp_sync: rank 0 of 2 waited 2 s")
  set(limit 20)
else()
  set(ENV{FUCINA_DIST_TIMEOUT_S} 120) # only mpirun can end rank 0 in time
  set(expect "rank 1 exit at step 3")
  set(limit 20)
endif()
string(TIMESTAMP t0 "%s")
execute_process(COMMAND ${MPIRUN} ${PROG} ${MODE} TIMEOUT 45
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(TIMESTAMP t1 "%s")
math(EXPR took "${t1} - ${t0}")
set(all "${out}${err}")
message(STATUS "mpirun ${MODE}: exit ${rc} after ${took} s\n${all}")
if(rc EQUAL 0 OR NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "the job did not fail (or did not end): ${rc}")
endif()
if(all MATCHES "rank 0 finished")
  message(FATAL_ERROR "rank 0 got through its steps without rank 1")
endif()
if(NOT all MATCHES "${expect}")
  message(FATAL_ERROR "expected \"${expect}\" in the output")
endif()
if(took GREATER ${limit})
  message(FATAL_ERROR "the job took ${took} s to fail (limit ${limit} s)")
endif()

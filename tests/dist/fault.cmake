# SPDX-License-Identifier: MIT
# Runs fault_prog (see its comment) as 2 ranks in MODE and checks that the
# job ends the way it must, in the time it must, and leaves a checkpoint
# that loads (fault_prog check). The time is measured here, in ms, around
# mpirun:
#   - faults that end the job at once (a crash, a failed backward, a failed
#     or killed checkpoint write, a kill inside fc_ddp_sync, an error of the
#     program's own) run with a 30 s deadline and must end in under 15 s:
#     no rank waits for the deadline;
#   - faults only the deadline can see (a stalled rank, a rank that leaves
#     while the other stalls) run with a 3 s deadline and must end within
#     8 s after it, and not before it.
# -DMPIRUN=<mpirun and its options> -DPROG=... -DMODE=... -DDIR=<scratch dir>
set(steps 3)  # every fault strikes at step 3: the checkpoint holds 3 steps
set(tmp_left 0)
set(rc_want "")  # "": any failure
set(deadline 30)
set(min_ms 0)
set(max_ms 15000)
set(me 1)
if(MODE STREQUAL "ok")
  set(steps 6)
  set(rc_want 0)
  set(expect "rank 0 finished")
elseif(MODE STREQUAL "exit")
  set(expect "rank 1: exit at step 3")
  set(rc_want 3) # mpirun passes on the first failed rank's status
elseif(MODE STREQUAL "backward")
  set(rc_want 13) # FC_ERR_NON_FINITE, the hook's
  set(expect "fc_dist_free: rank 1 of 2 ends the job \\(MPI_Abort, exit code 13\\) instead of "
             "finalizing: its context holds an error \\(FC_ERR_NON_FINITE: [^\n]*\\). "
             "fc_ddp_free came in the middle of a step")
elseif(MODE STREQUAL "stall")
  set(deadline 3)
  set(rc_want 24) # FC_ERR_COMM
  set(expect "fc_dist_free: rank 0 of 2 ends the job \\(MPI_Abort, exit code 24\\) instead of "
             "finalizing: its context holds an error \\(FC_ERR_COMM: fc_ddp_sync: rank 0 of 2 "
             "waited 3 s")
elseif(MODE STREQUAL "sync_kill")
  set(rc_want 142) # 128 + SIGALRM
  set(expect "rank 1: sync_kill at step 3.*signal 14")
elseif(MODE STREQUAL "ckpt")
  set(me 0)
  set(rc_want 14) # FC_ERR_IO
  set(expect "fc_dist_free: rank 0 of 2 ends the job \\(MPI_Abort, exit code 14\\) instead of "
             "finalizing: its context holds an error \\(FC_ERR_IO: fc_checkpoint_save: ")
elseif(MODE STREQUAL "ckpt_kill")
  set(me 0)
  set(tmp_left 1) # the killed write's temporary file, never renamed
  set(rc_want 153) # 128 + SIGXFSZ
  set(expect "rank 0: ckpt_kill at step 3.*signal 25")
elseif(MODE STREQUAL "user")
  set(rc_want 14)
  set(expect "fc_dist_free: rank 1 of 2 ends the job \\(MPI_Abort, exit code 14\\) instead of "
             "finalizing: fc_dist_fail was called \\(FC_ERR_IO\\)")
elseif(MODE STREQUAL "leave")
  set(deadline 3)
  set(rc_want 24)
  set(expect "fc_dist_free: rank 1 of 2 ends the job \\(MPI_Abort, exit code 24\\) instead of "
             "finalizing: its context holds an error \\(FC_ERR_COMM: fc_dist_free \\(waiting "
             "for every rank to call it\\): rank 1 of 2 waited 3 s")
else()
  message(FATAL_ERROR "unknown MODE ${MODE}")
endif()
if(deadline LESS 10)
  math(EXPR min_ms "${deadline} * 1000")
  math(EXPR max_ms "${deadline} * 1000 + 8000")
endif()
string(JOIN "" expect ${expect})
set(ENV{FUCINA_DIST_TIMEOUT_S} ${deadline})
file(REMOVE_RECURSE ${DIR})
file(MAKE_DIRECTORY ${DIR})

function(now_ms out)
  string(TIMESTAMP s "%s")
  string(TIMESTAMP us "%f")
  string(REGEX REPLACE "^0+([0-9])" "\\1" us "${us}")
  math(EXPR ms "${s} * 1000 + ${us} / 1000")
  set(${out} ${ms} PARENT_SCOPE)
endfunction()

now_ms(t0)
execute_process(COMMAND ${MPIRUN} ${PROG} ${MODE} ${DIR} TIMEOUT 45
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
now_ms(t1)
math(EXPR took "${t1} - ${t0}")
set(all "${out}${err}")
message(STATUS "fault ${MODE}: deadline ${deadline} s; mpirun exit ${rc} after ${took} ms "
               "(allowed ${min_ms}..${max_ms} ms)\n${all}")
if(NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "the job did not end: ${rc}")
endif()
if(rc_want STREQUAL "" AND rc EQUAL 0)
  message(FATAL_ERROR "the job did not fail")
elseif(NOT rc_want STREQUAL "" AND NOT rc EQUAL rc_want)
  message(FATAL_ERROR "mpirun exited with ${rc}, not ${rc_want}")
endif()
if(NOT MODE STREQUAL "ok" AND all MATCHES "rank [01] finished")
  message(FATAL_ERROR "a rank got through its steps in spite of the fault")
endif()
if(MODE STREQUAL "ok" AND NOT all MATCHES "rank 1 finished")
  message(FATAL_ERROR "rank 1 did not finish")
endif()
if(NOT all MATCHES "${expect}")
  message(FATAL_ERROR "expected \"${expect}\" in the output")
endif()
if(took LESS min_ms OR took GREATER max_ms)
  message(FATAL_ERROR "the job took ${took} ms to end (allowed ${min_ms}..${max_ms} ms)")
endif()

execute_process(COMMAND ${PROG} check ${DIR} ${steps} TIMEOUT 30
                RESULT_VARIABLE crc OUTPUT_VARIABLE cout ERROR_VARIABLE cerr)
message(STATUS "check: ${crc}\n${cout}${cerr}")
if(NOT crc EQUAL 0)
  message(FATAL_ERROR "the checkpoint is not the one of step ${steps}")
endif()
if(NOT cout MATCHES "temporary files left: ${tmp_left}\n")
  message(FATAL_ERROR "expected ${tmp_left} temporary files left")
endif()

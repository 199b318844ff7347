# SPDX-License-Identifier: MIT
# Checks that a trainer stopped by Ctrl-C says so and exits 130 (128 +
# SIGINT) after writing its checkpoint, so a script can tell it from a
# finished run (exit 0). The trainer runs in the background with a long
# --steps (given in ARGS); once its first progress line is out (its handler
# is installed long before) it gets SIGINT.
# Run as: cmake -DTRAINER=<trainer> -DDIR=<scratch dir> "-DARGS=<options>"
#               [-DCKPT=ON] [-DEMULATOR="<command line>"] -P sigint_test.cmake
# CKPT=ON: <DIR>/ckpt.safetensors must exist afterwards. A trainer that
# exits 77 (no data set) prints a line ctest reads as a skip.
separate_arguments(emu UNIX_COMMAND "${EMULATOR}")
separate_arguments(args UNIX_COMMAND "${ARGS}")
file(REMOVE_RECURSE ${DIR})
file(MAKE_DIRECTORY ${DIR})
# the shell's background job: wait for a progress line (at most a minute),
# then SIGINT it by its pid and report its exit status
set(script [=[
log="$1"; shift
"$@" > "$log" 2>&1 &
pid=$!
i=0
while ! grep -q '^step ' "$log"; do
  kill -0 $pid 2>/dev/null || break
  i=$((i + 1))
  if [ $i -gt 600 ]; then kill -9 $pid; echo "no progress line in a minute"; exit 99; fi
  sleep 0.1
done
kill -INT $pid 2>/dev/null
wait $pid
echo "exit $?"
]=])
execute_process(COMMAND sh -c "${script}" sh ${DIR}/log.txt ${emu} ${TRAINER} --out ${DIR} ${args}
                OUTPUT_VARIABLE o RESULT_VARIABLE rc)
file(READ ${DIR}/log.txt log)
if(o MATCHES "exit 77")
  message(STATUS "sigint_test: no data set, skipped")
  return()
endif()
message(STATUS "${o}")
if(NOT o MATCHES "^exit 130" OR NOT log MATCHES "stopped by Ctrl-C at step [0-9]+")
  message(FATAL_ERROR "Ctrl-C: want exit 130 and a line saying so, got ${o}:\n${log}")
endif()
if(CKPT AND NOT EXISTS ${DIR}/ckpt.safetensors)
  message(FATAL_ERROR "Ctrl-C: no checkpoint in ${DIR}:\n${log}")
endif()

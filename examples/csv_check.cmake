# SPDX-License-Identifier: MIT
# csv_check(<metrics.csv>): the checks every trainer's metrics.csv must pass
# however often its run stopped and resumed: one row per step (the first
# column), steps rising, and elapsed_s (the last column) never falling.
# Included by the trainers' resume tests.
function(csv_check path)
  file(STRINGS ${path} lines)
  list(POP_FRONT lines header)
  set(prev_step -1)
  set(prev_elapsed -1)
  foreach(line IN LISTS lines)
    string(REGEX MATCH "^[0-9]+" step "${line}")
    string(REGEX MATCH "[^,]*$" elapsed "${line}")
    if(step STREQUAL "" OR NOT step GREATER prev_step)
      message(FATAL_ERROR "${path}: row [${line}] follows step ${prev_step}: the steps must "
                          "rise, one row each")
    endif()
    if(elapsed LESS prev_elapsed)
      message(FATAL_ERROR "${path}: elapsed_s falls to ${elapsed} at step ${step} (from "
                          "${prev_elapsed})")
    endif()
    set(prev_step ${step})
    set(prev_elapsed ${elapsed})
  endforeach()
endfunction()

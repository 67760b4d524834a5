# Runs a command twice and checks that the second run, which has the same bytes to write, leaves
# FILE alone (its mtime, set to 2000-01-01 in between, stays) and says so; then that a FILE
# whose bytes differ is rewritten.
#   cmake -DFILE=<output> -DEXPECTED_OUTPUT=<regex> -P rerun_keeps_file.cmake <command> <args>...
include(${CMAKE_CURRENT_LIST_DIR}/script_command.cmake)
splitkv_command_after_script(command)

function(run_once label)
  splitkv_run_expecting_exit("${label}" 0 all unused ${command})
  set(output "${all}" PARENT_SCOPE)
endfunction()

function(backdate)
  # cmake -E touch can only set the current time.
  execute_process(COMMAND touch -d @946684800 "${FILE}" RESULT_VARIABLE code)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "touch -d @946684800 ${FILE} failed")
  endif()
endfunction()

file(REMOVE "${FILE}")
run_once("first run")
backdate()
run_once("same bytes")
file(TIMESTAMP "${FILE}" year "%Y" UTC)
if(NOT year STREQUAL "2000")
  message(FATAL_ERROR "${FILE} was rewritten with the bytes it already held (mtime year ${year})")
endif()
if(NOT output MATCHES "${EXPECTED_OUTPUT}")
  message(FATAL_ERROR "output does not match: ${EXPECTED_OUTPUT}")
endif()

file(APPEND "${FILE}" "edited by hand\n")
backdate()
run_once("other bytes")
file(TIMESTAMP "${FILE}" year "%Y" UTC)
if(year STREQUAL "2000")
  message(FATAL_ERROR "${FILE} held other bytes but was not rewritten")
endif()

# Runs a command and checks its exit code and that its output matches a regex (and, when
# UNEXPECTED_OUTPUT is given, that it does not match that one; UNEXPECTED_STDOUT, the same for
# stdout alone; FORBID_CONTROL_CHARACTERS, that no control character but newline and tab is
# in the output).
#   cmake -DEXPECTED_EXIT=<code> -DEXPECTED_OUTPUT=<regex> [-DUNEXPECTED_OUTPUT=<regex>]
#         [-DUNEXPECTED_STDOUT=<regex>] [-DFORBID_CONTROL_CHARACTERS=ON] -P expect_exit.cmake <command> <args>...
include(${CMAKE_CURRENT_LIST_DIR}/script_command.cmake)
splitkv_command_after_script(command)
splitkv_run_expecting_exit("command" "${EXPECTED_EXIT}" all out ${command})
if(NOT all MATCHES "${EXPECTED_OUTPUT}")
  message(FATAL_ERROR "output does not match: ${EXPECTED_OUTPUT}")
endif()
if(DEFINED UNEXPECTED_OUTPUT AND all MATCHES "${UNEXPECTED_OUTPUT}")
  message(FATAL_ERROR "output matches what it must not: ${UNEXPECTED_OUTPUT}")
endif()
if(DEFINED UNEXPECTED_STDOUT AND out MATCHES "${UNEXPECTED_STDOUT}")
  message(FATAL_ERROR "stdout matches what it must not: ${UNEXPECTED_STDOUT}")
endif()
if(FORBID_CONTROL_CHARACTERS)
  foreach(byte RANGE 1 31)
    if(NOT byte EQUAL 9 AND NOT byte EQUAL 10)
      list(APPEND control_bytes ${byte})
    endif()
  endforeach()
  foreach(byte IN LISTS control_bytes ITEMS 127)
    string(ASCII ${byte} character)
    string(FIND "${all}" "${character}" position)
    if(NOT position EQUAL -1)
      message(FATAL_ERROR "output holds the raw control character ${byte} at offset ${position}")
    endif()
  endforeach()
endif()

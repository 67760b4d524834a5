# Runs one case of the bad-input catalogue (bad_inputs/<case>/case.txt) and checks the three
# promises of tuner/GRID_SCHEMA.md and tuner/CSV_SCHEMA.md for bad input:
#   1. the exit code (2 for every bad input; documented repairs state theirs),
#   2. a message that names the file, the line or field, and the reason (`message:` lines,
#      literal fragments that must all appear in stdout+stderr),
#   3. nothing written or changed: every file under the case's scratch folder (its inputs,
#      the --out CSV, the sidecar, and anything new) has the same bytes afterwards.
#
#   cmake -DSPLITKV=<splitkv binary> -DCASE_DIR=<bad_inputs/case> -DWORK_DIR=<scratch>
#         -P run_bad_input.cmake
#
# case.txt, one directive per line ('#' starts a comment):
#   args: <command line>   the splitkv arguments, UNIX shell quoting; run in the scratch copy
#   exit: <code>           expected exit code
#   message: <fragment>    (repeatable) must appear in the output
#   fifo: <name>           create a named pipe <name> in the scratch copy before the run
#   requires: cuda-build   registered only when the tuner is built with CUDA (CMakeLists.txt)
cmake_minimum_required(VERSION 3.25)

foreach(variable SPLITKV CASE_DIR WORK_DIR)
  if(NOT DEFINED ${variable})
    message(FATAL_ERROR "run_bad_input.cmake: -D${variable}=... is required")
  endif()
endforeach()
string(REGEX REPLACE "/+$" "" CASE_DIR "${CASE_DIR}")
get_filename_component(case_name "${CASE_DIR}" NAME)
if(case_name STREQUAL "")
  message(FATAL_ERROR "run_bad_input.cmake: cannot name the case of ${CASE_DIR}")
endif()

file(STRINGS "${CASE_DIR}/case.txt" lines ENCODING UTF-8)
set(args "")
set(expected_exit "")
set(messages "")
set(fifos "")
foreach(line IN LISTS lines)
  if(line MATCHES "^[ \t]*(#|$)")
    continue()
  elseif(line MATCHES "^args:[ \t]*(.*)$")
    set(args "${CMAKE_MATCH_1}")
  elseif(line MATCHES "^exit:[ \t]*([0-9]+)[ \t]*$")
    set(expected_exit "${CMAKE_MATCH_1}")
  elseif(line MATCHES "^message:[ \t]*(.*)$")
    list(APPEND messages "${CMAKE_MATCH_1}")
  elseif(line MATCHES "^fifo:[ \t]*(.*)$")
    list(APPEND fifos "${CMAKE_MATCH_1}")
  elseif(line MATCHES "^requires:")
    # read by CMakeLists.txt at configure time
  else()
    message(FATAL_ERROR "${CASE_DIR}/case.txt: cannot read line: ${line}")
  endif()
endforeach()
if(expected_exit STREQUAL "" OR messages STREQUAL "")
  message(FATAL_ERROR "${CASE_DIR}/case.txt: needs exit: and at least one message:")
endif()

# A fresh scratch copy of the case: the run may only read it.
set(scratch "${WORK_DIR}/${case_name}")
file(REMOVE_RECURSE "${scratch}")
file(MAKE_DIRECTORY "${scratch}")
file(GLOB case_files LIST_DIRECTORIES true "${CASE_DIR}/*")
foreach(entry IN LISTS case_files)
  get_filename_component(entry_name "${entry}" NAME)
  if(NOT entry_name STREQUAL "case.txt")
    file(COPY "${entry}" DESTINATION "${scratch}")
  endif()
endforeach()
foreach(fifo IN LISTS fifos)
  execute_process(COMMAND mkfifo "${scratch}/${fifo}" RESULT_VARIABLE fifo_result)
  if(NOT fifo_result EQUAL 0)
    message(FATAL_ERROR "mkfifo ${scratch}/${fifo} failed")
  endif()
endforeach()

# Every path under the scratch folder with its kind and, for files, its sha256.
function(snapshot out_var)
  file(GLOB_RECURSE entries LIST_DIRECTORIES true RELATIVE "${scratch}" "${scratch}/*")
  list(SORT entries)
  set(result "")
  foreach(entry IN LISTS entries)
    set(path "${scratch}/${entry}")
    if(IS_DIRECTORY "${path}")
      list(APPEND result "${entry}/")
    elseif(entry IN_LIST fifos)
      # Hashing a fifo would block; a fifo the run replaced with a file is hashed like any file.
      execute_process(COMMAND test -p "${path}" RESULT_VARIABLE not_a_fifo)
      if(not_a_fifo EQUAL 0)
        list(APPEND result "${entry} (fifo)")
      else()
        file(SHA256 "${path}" digest)
        list(APPEND result "${entry} ${digest}")
      endif()
    else()
      file(SHA256 "${path}" digest)
      list(APPEND result "${entry} ${digest}")
    endif()
  endforeach()
  set(${out_var} "${result}" PARENT_SCOPE)
endfunction()

snapshot(before)
separate_arguments(argv UNIX_COMMAND "${args}")
execute_process(COMMAND "${SPLITKV}" ${argv}
  WORKING_DIRECTORY "${scratch}"
  RESULT_VARIABLE code
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err
  TIMEOUT 30)
snapshot(after)
set(all "${out}${err}")
message("case:    ${case_name}\ncommand: splitkv ${args}\nexit:    ${code}\noutput:\n${all}")

set(failures "")
if(NOT code STREQUAL expected_exit)
  string(APPEND failures "\n  exit code ${code}, expected ${expected_exit}")
endif()
foreach(fragment IN LISTS messages)
  string(FIND "${all}" "${fragment}" position)
  if(position EQUAL -1)
    string(APPEND failures "\n  message lacks: ${fragment}")
  endif()
endforeach()
# A message from the tool, not from the runtime: no crash, abort or sanitizer report.
foreach(crash_sign "terminate called" "Aborted" "AddressSanitizer" "LeakSanitizer" "runtime error:" "Segmentation")
  string(FIND "${all}" "${crash_sign}" position)
  if(NOT position EQUAL -1)
    string(APPEND failures "\n  output shows a crash: ${crash_sign}")
  endif()
endforeach()
if(NOT expected_exit STREQUAL "0" AND NOT all MATCHES "^splitkv")
  string(APPEND failures "\n  the error does not start with the tool's name")
endif()
if(NOT before STREQUAL after)
  string(REPLACE ";" "\n    " before_text "${before}")
  string(REPLACE ";" "\n    " after_text "${after}")
  string(APPEND failures "\n  files changed:\n  before:\n    ${before_text}\n  after:\n    ${after_text}")
endif()
if(failures)
  message(FATAL_ERROR "${case_name} failed:${failures}")
endif()
file(REMOVE_RECURSE "${scratch}")

# The reports regenerated from the committed CSVs (heuristics/REPORTS.md, "CI"), and their bad
# inputs: exit 2, a message naming what is missing, nothing written. Included from
# cli/CMakeLists.txt (the checks run the splitkv binary); label cpu.
find_program(SPLITKV_PYTHON3 NAMES python3)
if(NOT SPLITKV_PYTHON3)
  message(STATUS "splitkv: python3 not found; the report tests are not registered")
  return()
endif()
function(splitkv_report_test name mode)
  add_test(NAME report.${name}
    COMMAND ${SPLITKV_PYTHON3} ${PROJECT_SOURCE_DIR}/heuristics/tests/check_report.py ${mode}
            --splitkv $<TARGET_FILE:splitkv> --scratch ${CMAKE_CURRENT_BINARY_DIR}/report_scratch/${name}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  # The regeneration runs the validation's cross-validation (about 3 minutes on two cores, longer
  # beside the other tests under ctest -j): 600 s leaves room for a slower CI machine.
  set_tests_properties(report.${name} PROPERTIES LABELS cpu TIMEOUT 600)
endfunction()
splitkv_report_test(regenerates_from_committed_csvs regenerate)
splitkv_report_test(bad_inputs bad-inputs)

# The mistakes a new user makes on the command line, and what the tool must then do: exit 2
# with a message that names the problem and the help to read, never replace a device or fifo,
# never echo a control character raw. Included from cli/CMakeLists.txt after cli_tests.cmake
# (splitkv_cli_test); label cpu.
set(SPLITKV_MISUSE_FIXTURES ${PROJECT_SOURCE_DIR}/heuristics/tests/fixtures)
set(SPLITKV_MISUSE_SCRATCH ${CMAKE_CURRENT_BINARY_DIR}/cli_misuse_scratch)
set(same ${SPLITKV_MISUSE_SCRATCH}/same)
file(MAKE_DIRECTORY ${SPLITKV_MISUSE_SCRATCH}/write_fails ${same})
set(tiny_csv ${SPLITKV_MISUSE_FIXTURES}/tiny_h200.csv)

# splitkv_cli_check(<name> <exit> <regex> [NO_STDOUT <regex>] [NO_CONTROL_CHARACTERS]
#                   COMMAND <command>...):
# splitkv_cli_test for any command (not only splitkv), with expect_exit.cmake's further checks.
function(splitkv_cli_check name expected_exit expected_output)
  cmake_parse_arguments(PARSE_ARGV 3 check "NO_CONTROL_CHARACTERS" "NO_STDOUT" "COMMAND")
  set(extra)
  if(DEFINED check_NO_STDOUT)
    list(APPEND extra "-DUNEXPECTED_STDOUT=${check_NO_STDOUT}")
  endif()
  if(check_NO_CONTROL_CHARACTERS)
    list(APPEND extra -DFORBID_CONTROL_CHARACTERS=ON)
  endif()
  add_test(NAME cli.${name}
    COMMAND ${CMAKE_COMMAND} -DEXPECTED_EXIT=${expected_exit} "-DEXPECTED_OUTPUT=${expected_output}" ${extra}
            -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/expect_exit.cmake ${check_COMMAND}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(cli.${name} PROPERTIES LABELS cpu)
endfunction()

# A word that is no subcommand is named as such, with the list of those there are.
splitkv_cli_test(unknown_subcommand 2
  "splitkv: unknown subcommand \"frobnicate\"; the subcommands are sweep, devices, fit, evaluate, merge, compare, \
evaluate-ragged"
  frobnicate)
splitkv_cli_test(unknown_top_level_option 2 "splitkv: unknown option \"--bogus\"; the subcommands are sweep" --bogus)

# A missing option or argument points at the help of the subcommand that needs it.
splitkv_cli_test(fit_missing_csv_names_fit_help 2 "results is required \\(see splitkv fit --help\\)" fit)
splitkv_cli_test(sweep_missing_grid_names_sweep_help 2 "--grid is required \\(see splitkv sweep --help\\)"
  sweep --out ${SPLITKV_MISUSE_SCRATCH}/never.csv)
splitkv_cli_test(evaluate_missing_out_names_evaluate_help 2 "--out is required \\(see splitkv evaluate --help\\)"
  evaluate ${tiny_csv})

# CLI11 reads "-5" as a number; without a validator a count <= 0 meant "not given" and was ignored.
foreach(command fit evaluate compare evaluate-ragged)
  splitkv_cli_test(${command}_num_sms_negative 2
    "--num-sms: must be a whole number >= 1, not -5 \\(see splitkv ${command} --help\\)"
    ${command} ${tiny_csv} --out ${SPLITKV_MISUSE_SCRATCH}/never_${command}.csv --num-sms -5)
endforeach()
splitkv_cli_test(fit_num_sms_zero 2 "--num-sms: must be a whole number >= 1, not 0"
  fit ${tiny_csv} --out ${SPLITKV_MISUSE_SCRATCH}/never.hpp --num-sms 0)

# A failed write names the --out path the user gave, not the temporary file beside it. A file size
# limit of 0 (with SIGXFSZ ignored, so that write() fails instead of the signal killing) makes it fail.
splitkv_cli_check(fit_write_error_names_out 1
  "splitkv fit: [^ ]*/write_fails/h\\.hpp: write failed: .*\\(temporary file [^ ]*/write_fails/h\\.hpp\\.tmp\\.[0-9]+"
  COMMAND sh -c "trap '' XFSZ && ulimit -f 0 && exec \"$@\"" sh $<TARGET_FILE:splitkv>
          fit ${tiny_csv} --out ${SPLITKV_MISUSE_SCRATCH}/write_fails/h.hpp --gpu-name tiny)

# Control characters from the user's files (a grid's name, a CSV's gpu column) and arguments are
# printed escaped.
splitkv_cli_check(grid_name_control_characters_escaped 0 "\\(\"tiny\\\\x1b\\[31mred\\\\x07\""
  NO_CONTROL_CHARACTERS
  COMMAND $<TARGET_FILE:splitkv> sweep --grid cli/tests/fixtures/control_characters_name.json --dry-run)
splitkv_cli_check(csv_gpu_control_characters_escaped 2 "column gpu: \"NVIDIA H200\\\\x1b\\[2J\" differs"
  NO_CONTROL_CHARACTERS
  COMMAND $<TARGET_FILE:splitkv> fit cli/tests/fixtures/control_characters_gpu.csv
          --out ${SPLITKV_MISUSE_SCRATCH}/never.hpp)

# Cross-validation (minutes on a full grid) reports its folds on stderr; stdout keeps the results.
splitkv_cli_check(evaluate_cross_validation_progress 0
  "splitkv evaluate: cross-validation, leave one context_len out: fold [0-9]+/[0-9]+ done, [0-9]+s elapsed"
  NO_STDOUT "cross-validation, leave one"
  COMMAND $<TARGET_FILE:splitkv> evaluate ${tiny_csv} --out ${SPLITKV_MISUSE_SCRATCH}/progress.csv)

# A rerun with the same bytes to write leaves the outputs alone (the generated header's mtime
# decides what the build recompiles) and says so; other bytes are written as usual.
add_test(NAME cli.fit_same_header_left_alone
  COMMAND ${CMAKE_COMMAND} -DFILE=${same}/num_splits_tiny.hpp
          "-DEXPECTED_OUTPUT=num_splits_tiny\\.hpp \\([0-9]+ bytes, sha256 [0-9a-f]+\\): unchanged"
          -P ${CMAKE_CURRENT_LIST_DIR}/rerun_keeps_file.cmake
          $<TARGET_FILE:splitkv> fit ${tiny_csv} --out ${same}/num_splits_tiny.hpp --gpu-name tiny
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
add_test(NAME cli.evaluate_same_report_left_alone
  COMMAND ${CMAKE_COMMAND} -DFILE=${same}/regret.md
          "-DEXPECTED_OUTPUT=unchanged [^ ]*/same/regret\\.md \\(it already held these bytes"
          -P ${CMAKE_CURRENT_LIST_DIR}/rerun_keeps_file.cmake
          $<TARGET_FILE:splitkv> evaluate ${tiny_csv} --no-cross-validation --out ${same}/regret.csv
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.fit_same_header_left_alone cli.evaluate_same_report_left_alone PROPERTIES LABELS cpu)

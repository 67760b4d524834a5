# End-to-end checks of `splitkv fit` and `splitkv evaluate`: exit codes and the messages
# users see for bad inputs. Included from cli/tests/cli_tests.cmake (after splitkv_cli_test
# is defined); label cpu.
set(SPLITKV_FIT_FIXTURES ${PROJECT_SOURCE_DIR}/heuristics/tests/fixtures)
set(SPLITKV_FIT_SCRATCH ${CMAKE_CURRENT_BINARY_DIR}/cli_fit_scratch)
file(MAKE_DIRECTORY ${SPLITKV_FIT_SCRATCH} ${SPLITKV_FIT_SCRATCH}/evaluate)

splitkv_cli_test(fit_help 0 "--check.*--report.*--gpu-name.*--kv-dtype" fit --help)
splitkv_cli_test(fit_writes_header_and_report 0
  "header +.*num_splits_tiny\\.hpp.*report +.*regret\\.csv.*in_sample.*ours"
  fit ${SPLITKV_FIT_FIXTURES}/tiny_h200.csv --out ${SPLITKV_FIT_SCRATCH}/num_splits_tiny.hpp
      --report ${SPLITKV_FIT_SCRATCH}/report --gpu-name tiny)
set_tests_properties(cli.fit_writes_header_and_report PROPERTIES FIXTURES_SETUP fit_tiny_header)
# --report cross-validates by default; --no-cross-validation (scripts/report.sh) leaves the refits out.
splitkv_cli_test(fit_report_cross_validates 0 "in_sample .*cv_leave_one_context_len_out"
  fit ${SPLITKV_FIT_FIXTURES}/tiny_h200.csv --out ${SPLITKV_FIT_SCRATCH}/num_splits_tiny_cv.hpp
      --report ${SPLITKV_FIT_SCRATCH}/report_cv --gpu-name tiny)
add_test(NAME cli.fit_report_without_cross_validation
  COMMAND ${CMAKE_COMMAND} -DEXPECTED_EXIT=0 "-DEXPECTED_OUTPUT=in_sample"
          "-DUNEXPECTED_OUTPUT=cv_leave_one"
          -P ${PROJECT_SOURCE_DIR}/cli/tests/expect_exit.cmake
          $<TARGET_FILE:splitkv> fit ${SPLITKV_FIT_FIXTURES}/tiny_h200.csv
          --out ${SPLITKV_FIT_SCRATCH}/num_splits_tiny_nocv.hpp --report ${SPLITKV_FIT_SCRATCH}/report_nocv
          --gpu-name tiny --no-cross-validation
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.fit_report_without_cross_validation PROPERTIES LABELS cpu)
splitkv_cli_test(fit_check_up_to_date 0 "num_splits_tiny\\.hpp is up to date"
  fit ${SPLITKV_FIT_FIXTURES}/tiny_h200.csv --out ${SPLITKV_FIT_SCRATCH}/num_splits_tiny.hpp --gpu-name tiny --check)
set_tests_properties(cli.fit_check_up_to_date PROPERTIES FIXTURES_REQUIRED fit_tiny_header)
splitkv_cli_test(fit_check_stale 1
  "stale_header\\.hpp differs from what .*tiny_h200\\.csv produces, first at line 1:.*Regenerate it with: splitkv fit"
  fit ${SPLITKV_FIT_FIXTURES}/tiny_h200.csv --out ${SPLITKV_FIT_FIXTURES}/stale_header.hpp --check)
splitkv_cli_test(fit_check_missing 2 "no_such_header\\.hpp: no such file; run without --check"
  fit ${SPLITKV_FIT_FIXTURES}/tiny_h200.csv --out ${SPLITKV_FIT_SCRATCH}/no_such_header.hpp --check)
splitkv_cli_test(fit_bad_gpu_name 2 "--gpu-name \"H200\": must be lower case"
  fit ${SPLITKV_FIT_FIXTURES}/tiny_h200.csv --out ${SPLITKV_FIT_SCRATCH}/x.hpp --gpu-name H200 --check)
# Several training CSVs of one GPU: fitted together, named in the provenance, checked the same way;
# a shape measured in two of them is refused.
splitkv_cli_test(fit_two_csvs 0 "input +.*tiny_h200\\.csv \\+ .*tiny_h200_more\\.csv \\([0-9]+ rows"
  fit ${SPLITKV_FIT_FIXTURES}/tiny_h200.csv ${SPLITKV_FIT_FIXTURES}/tiny_h200_more.csv
      --out ${SPLITKV_FIT_SCRATCH}/num_splits_tiny2.hpp --gpu-name tiny2)
set_tests_properties(cli.fit_two_csvs PROPERTIES FIXTURES_SETUP fit_tiny2_header)
splitkv_cli_test(fit_two_csvs_check 0 "num_splits_tiny2\\.hpp is up to date with .*tiny_h200\\.csv \\+ .*tiny_h200_more\\.csv"
  fit ${SPLITKV_FIT_FIXTURES}/tiny_h200.csv ${SPLITKV_FIT_FIXTURES}/tiny_h200_more.csv
      --out ${SPLITKV_FIT_SCRATCH}/num_splits_tiny2.hpp --gpu-name tiny2 --check)
set_tests_properties(cli.fit_two_csvs_check PROPERTIES FIXTURES_REQUIRED fit_tiny2_header)
splitkv_cli_test(fit_two_csvs_check_one_missing 2 "kInputSha256: fitted on a CSV with sha256"
  fit ${SPLITKV_FIT_FIXTURES}/tiny_h200.csv --out ${SPLITKV_FIT_SCRATCH}/num_splits_tiny2.hpp --gpu-name tiny2 --check)
set_tests_properties(cli.fit_two_csvs_check_one_missing PROPERTIES FIXTURES_REQUIRED fit_tiny2_header)
splitkv_cli_test(fit_same_shape_in_two_csvs 2 "tiny_h200\\.csv:2: shape .* is also measured in .*tiny_h200\\.csv; a shape belongs to one file"
  fit ${SPLITKV_FIT_FIXTURES}/tiny_h200.csv ${SPLITKV_FIT_FIXTURES}/tiny_h200.csv --out ${SPLITKV_FIT_SCRATCH}/bad.hpp)
splitkv_cli_test(evaluate_two_csvs 0 "in_sample \\(16 shapes\\)"
  evaluate ${SPLITKV_FIT_FIXTURES}/tiny_h200.csv ${SPLITKV_FIT_FIXTURES}/tiny_h200_more.csv --no-cross-validation
      --out ${SPLITKV_FIT_SCRATCH}/evaluate/two.csv)

# The KV cache class of the rows a table is fitted on (--kv-dtype): the only one by default; a CSV
# holding both, or a class with no rows, is exit 2 naming the file, the classes and the flag.
splitkv_cli_test(fit_fp8_writes_header 0
  "kv cache +fp8_e4m3.*header +.*num_splits_fp8_h200\\.hpp.*namespace splitkv::generated::fp8_h200:"
  fit ${SPLITKV_FIT_FIXTURES}/tiny_fp8_h200.csv --out ${SPLITKV_FIT_SCRATCH}/num_splits_fp8_h200.hpp)
set_tests_properties(cli.fit_fp8_writes_header PROPERTIES FIXTURES_SETUP fit_fp8_header)
splitkv_cli_test(fit_fp8_check_up_to_date 0 "num_splits_fp8_h200\\.hpp is up to date with .*tiny_fp8_h200\\.csv"
  fit ${SPLITKV_FIT_FIXTURES}/tiny_fp8_h200.csv --kv-dtype fp8_e4m3 --out ${SPLITKV_FIT_SCRATCH}/num_splits_fp8_h200.hpp
      --check)
set_tests_properties(cli.fit_fp8_check_up_to_date PROPERTIES FIXTURES_REQUIRED fit_fp8_header)
splitkv_cli_test(fit_both_kv_dtypes_without_flag 2
  "tiny_mixed_kv_h200\\.csv: ok rows of kernel splitkv for two KV cache classes, 16bit \\(bf16/fp16, 40 rows\\) and fp8_e4m3 \\(40 rows\\); a table is fitted for one: pass --kv-dtype 16bit or --kv-dtype fp8_e4m3"
  fit ${SPLITKV_FIT_FIXTURES}/tiny_mixed_kv_h200.csv --out ${SPLITKV_FIT_SCRATCH}/bad.hpp)
splitkv_cli_test(fit_kv_dtype_without_rows 2
  "tiny_h200\\.csv: no ok rows of kernel splitkv with KV cache class fp8_e4m3 \\(--kv-dtype fp8_e4m3\\); its ok rows are 16bit"
  fit ${SPLITKV_FIT_FIXTURES}/tiny_h200.csv --kv-dtype fp8_e4m3 --out ${SPLITKV_FIT_SCRATCH}/bad.hpp)
splitkv_cli_test(fit_kv_dtype_unknown 2 "--kv-dtype: fp8 not in \\{16bit,fp8_e4m3\\}"
  fit ${SPLITKV_FIT_FIXTURES}/tiny_fp8_h200.csv --kv-dtype fp8 --out ${SPLITKV_FIT_SCRATCH}/bad.hpp)
# One CSV with both classes: each table is checked against its own class; the sha256 alone cannot tell.
splitkv_cli_test(fit_mixed_fp8 0 "header +.*num_splits_mixed_fp8\\.hpp"
  fit ${SPLITKV_FIT_FIXTURES}/tiny_mixed_kv_h200.csv --kv-dtype fp8_e4m3
      --out ${SPLITKV_FIT_SCRATCH}/num_splits_mixed_fp8.hpp --gpu-name mixed)
set_tests_properties(cli.fit_mixed_fp8 PROPERTIES FIXTURES_SETUP fit_mixed_fp8_header)
splitkv_cli_test(fit_check_other_kv_dtype 2
  "num_splits_mixed_fp8\\.hpp: kKvDtype: a table for the fp8_e4m3 KV cache, not 16bit .*check it with --kv-dtype fp8_e4m3"
  fit ${SPLITKV_FIT_FIXTURES}/tiny_mixed_kv_h200.csv --kv-dtype 16bit
      --out ${SPLITKV_FIT_SCRATCH}/num_splits_mixed_fp8.hpp --gpu-name mixed --check)
set_tests_properties(cli.fit_check_other_kv_dtype PROPERTIES FIXTURES_REQUIRED fit_mixed_fp8_header)
splitkv_cli_test(fit_check_mixed_fp8 0 "num_splits_mixed_fp8\\.hpp is up to date"
  fit ${SPLITKV_FIT_FIXTURES}/tiny_mixed_kv_h200.csv --kv-dtype fp8_e4m3
      --out ${SPLITKV_FIT_SCRATCH}/num_splits_mixed_fp8.hpp --gpu-name mixed --check)
set_tests_properties(cli.fit_check_mixed_fp8 PROPERTIES FIXTURES_REQUIRED fit_mixed_fp8_header)

# Bad CSVs: exit 2, and the message names the file, the line and the reason.
splitkv_cli_test(fit_missing_file 2 "nope\\.csv: cannot open: no such file"
  fit ${SPLITKV_FIT_FIXTURES}/nope.csv --out ${SPLITKV_FIT_SCRATCH}/bad.hpp)
splitkv_cli_test(fit_empty_file 2 "empty\\.csv: is empty"
  fit ${SPLITKV_FIT_FIXTURES}/empty.csv --out ${SPLITKV_FIT_SCRATCH}/bad.hpp)
splitkv_cli_test(fit_missing_column 2 "missing_column\\.csv:1:1: header lacks column \"cv\""
  fit ${SPLITKV_FIT_FIXTURES}/missing_column.csv --out ${SPLITKV_FIT_SCRATCH}/bad.hpp)
splitkv_cli_test(fit_nan_time 2 "nan_time\\.csv:4:[0-9]+: column time_us_median: \"nan\" is not a finite number"
  fit ${SPLITKV_FIT_FIXTURES}/nan_time.csv --out ${SPLITKV_FIT_SCRATCH}/bad.hpp)
splitkv_cli_test(fit_negative_time 2 "negative_time\\.csv:4: time_us_median -3\\.5 is not a positive finite time"
  fit ${SPLITKV_FIT_FIXTURES}/negative_time.csv --out ${SPLITKV_FIT_SCRATCH}/bad.hpp)
splitkv_cli_test(fit_mixed_gpus 2 "mixed_gpus\\.csv:4:1: column gpu: \"NVIDIA A100-SXM4-80GB\" differs from \"NVIDIA H200\" \\(line 2\\)"
  fit ${SPLITKV_FIT_FIXTURES}/mixed_gpus.csv --out ${SPLITKV_FIT_SCRATCH}/bad.hpp)
splitkv_cli_test(fit_duplicate_rows 2 "duplicate_rows\\.csv:5:1: duplicate row for .* \\(final already at line 3\\)"
  fit ${SPLITKV_FIT_FIXTURES}/duplicate_rows.csv --out ${SPLITKV_FIT_SCRATCH}/bad.hpp)

splitkv_cli_test(evaluate_writes_report 0 "(wrote|unchanged) +.*regret\\.csv.*(wrote|unchanged) +.*regret_points\\.csv.*validation"
  evaluate ${SPLITKV_FIT_FIXTURES}/tiny_h200.csv --validation ${SPLITKV_FIT_FIXTURES}/tiny_h200.csv
      --out ${SPLITKV_FIT_SCRATCH}/evaluate/regret.csv)
# --table: evaluate a given table as `ours` (nothing fitted); the committed header and the
# compiled-in table of the same GPU give the same picks as the fit on the CSV they came from.
if(EXISTS ${PROJECT_SOURCE_DIR}/results/h200/full.csv AND
   EXISTS ${PROJECT_SOURCE_DIR}/heuristics/generated/num_splits_h200.hpp)
  splitkv_cli_test(evaluate_table_header 0 "(wrote|unchanged) +.*table_header\\.csv.*in_sample.*ours +2839 +1\\.0035"
    evaluate results/h200/full.csv --table heuristics/generated/num_splits_h200.hpp
        --out ${SPLITKV_FIT_SCRATCH}/evaluate/table_header.csv)
  splitkv_cli_test(evaluate_table_gpu_name 0 "in_sample.*ours +2839 +1\\.0035"
    evaluate results/h200/full.csv --table "NVIDIA H200" --out ${SPLITKV_FIT_SCRATCH}/evaluate/table_gpu.csv)
endif()
splitkv_cli_test(evaluate_table_other_gpu 2 "--table .*stale_header\\.hpp: made for \"NVIDIA H200\" \\(132 SMs\\), but .*tiny_h200\\.csv was measured on \"NVIDIA H200\" \\(100 SMs\\); pass --allow-other-gpu"
  evaluate ${SPLITKV_FIT_FIXTURES}/tiny_h200.csv --num-sms 100 --table ${SPLITKV_FIT_FIXTURES}/stale_header.hpp
      --out ${SPLITKV_FIT_SCRATCH}/evaluate/other.csv)
splitkv_cli_test(evaluate_table_allow_other_gpu 0 "in_sample"
  evaluate ${SPLITKV_FIT_FIXTURES}/tiny_h200.csv --num-sms 100 --table ${SPLITKV_FIT_FIXTURES}/stale_header.hpp
      --allow-other-gpu --out ${SPLITKV_FIT_SCRATCH}/evaluate/other.csv)
splitkv_cli_test(evaluate_help_table 0 "--kv-dtype.*--table.*--reuse-table.*--allow-other-gpu" evaluate --help)
# The 16-bit table reused on fp8 rows, beside the fp8 table, in sample and on validation.
if(EXISTS ${PROJECT_SOURCE_DIR}/heuristics/generated/num_splits_h200.hpp)
  splitkv_cli_test(evaluate_reused_16bit_table 0
    "in_sample \\(8 shapes\\).*  ours +8 .*  reused_16bit_table +8 .*validation \\(8 shapes\\).*  ours +8 .*  reused_16bit_table +8 "
    evaluate ${SPLITKV_FIT_FIXTURES}/tiny_fp8_h200.csv --kv-dtype fp8_e4m3 --validation ${SPLITKV_FIT_FIXTURES}/tiny_mixed_kv_h200.csv
        --reuse-table heuristics/generated/num_splits_h200.hpp --out ${SPLITKV_FIT_SCRATCH}/evaluate/reused.csv)
  splitkv_cli_test(evaluate_reuse_table_on_16bit_rows 2
    "--reuse-table heuristics/generated/num_splits_h200\\.hpp: scores a 16-bit table on the rows of another KV cache, but the rows of .*tiny_h200\\.csv evaluated are 16bit already"
    evaluate ${SPLITKV_FIT_FIXTURES}/tiny_h200.csv --reuse-table heuristics/generated/num_splits_h200.hpp
        --out ${SPLITKV_FIT_SCRATCH}/evaluate/reused_bad.csv)
endif()
splitkv_cli_test(evaluate_reuse_table_of_fp8 2
  "--reuse-table .*num_splits_fp8_h200\\.hpp: made for the fp8_e4m3 KV cache, not a 16-bit one"
  evaluate ${SPLITKV_FIT_FIXTURES}/tiny_fp8_h200.csv --reuse-table ${SPLITKV_FIT_SCRATCH}/num_splits_fp8_h200.hpp
      --out ${SPLITKV_FIT_SCRATCH}/evaluate/reused_bad.csv)
set_tests_properties(cli.evaluate_reuse_table_of_fp8 PROPERTIES FIXTURES_REQUIRED fit_fp8_header)
splitkv_cli_test(evaluate_table_of_other_kv_dtype 2
  "--table .*num_splits_fp8_h200\\.hpp: made for the fp8_e4m3 KV cache, but the rows of .*tiny_h200\\.csv evaluated are 16bit"
  evaluate ${SPLITKV_FIT_FIXTURES}/tiny_h200.csv --table ${SPLITKV_FIT_SCRATCH}/num_splits_fp8_h200.hpp
      --out ${SPLITKV_FIT_SCRATCH}/evaluate/reused_bad.csv)
set_tests_properties(cli.evaluate_table_of_other_kv_dtype PROPERTIES FIXTURES_REQUIRED fit_fp8_header)
# A GPU name stands for its compiled-in tables of both caches: as --table it is the one for the rows'
# cache (the 16-bit one would be refused on fp8 rows), as --reuse-table the 16-bit one (an fp8 one
# would be refused there); a short name is one table.
if(EXISTS ${PROJECT_SOURCE_DIR}/heuristics/generated/num_splits_h200.hpp AND
   EXISTS ${PROJECT_SOURCE_DIR}/heuristics/generated/num_splits_fp8_h200.hpp)
  splitkv_cli_test(evaluate_table_gpu_name_on_fp8_rows 0 "in_sample \\(8 shapes\\).*  ours +8 .*  reused_16bit_table +8 "
    evaluate ${SPLITKV_FIT_FIXTURES}/tiny_fp8_h200.csv --table "NVIDIA H200" --reuse-table "NVIDIA H200"
        --out ${SPLITKV_FIT_SCRATCH}/evaluate/fp8_gpu_name.csv)
  splitkv_cli_test(evaluate_table_short_name_of_other_kv_dtype 2
    "--table compiled-in table h200: made for the 16bit KV cache, but the rows of .*tiny_fp8_h200\\.csv evaluated are fp8_e4m3"
    evaluate ${SPLITKV_FIT_FIXTURES}/tiny_fp8_h200.csv --table h200 --out ${SPLITKV_FIT_SCRATCH}/evaluate/fp8_short.csv)
endif()
splitkv_cli_test(evaluate_both_kv_dtypes_without_flag 2 "tiny_mixed_kv_h200\\.csv: ok rows of kernel splitkv for two KV cache classes.*pass --kv-dtype"
  evaluate ${SPLITKV_FIT_FIXTURES}/tiny_mixed_kv_h200.csv --out ${SPLITKV_FIT_SCRATCH}/evaluate/mixed.csv)
splitkv_cli_test(evaluate_validation_without_the_class 2 "tiny_h200\\.csv: no ok rows of kernel splitkv with KV cache class fp8_e4m3"
  evaluate ${SPLITKV_FIT_FIXTURES}/tiny_fp8_h200.csv --validation ${SPLITKV_FIT_FIXTURES}/tiny_h200.csv
      --out ${SPLITKV_FIT_SCRATCH}/evaluate/mixed.csv)
splitkv_cli_test(evaluate_out_required 2 "--out is required" evaluate ${SPLITKV_FIT_FIXTURES}/tiny_h200.csv)
splitkv_cli_test(evaluate_out_in_missing_folder 2 "folder .*missing_folder does not exist"
  evaluate ${SPLITKV_FIT_FIXTURES}/tiny_h200.csv --out ${SPLITKV_FIT_SCRATCH}/missing_folder/regret.csv)
splitkv_cli_test(fit_out_in_missing_folder 2 "folder .*missing_folder does not exist"
  fit ${SPLITKV_FIT_FIXTURES}/tiny_h200.csv --out ${SPLITKV_FIT_SCRATCH}/missing_folder/h.hpp)

# CI's guard on the committed table: the header must be exactly what the committed CSV gives.
if(EXISTS ${PROJECT_SOURCE_DIR}/results/h200/full.csv AND
   EXISTS ${PROJECT_SOURCE_DIR}/heuristics/generated/num_splits_h200.hpp)
  splitkv_cli_test(fit_check_committed_h200 0 "num_splits_h200\\.hpp is up to date with results/h200/full\\.csv"
    fit results/h200/full.csv --out heuristics/generated/num_splits_h200.hpp --check)
endif()
# The same for each other committed table: a peer's (heuristics/FIT.md, "Peer kernels"), the rows of
# kernel K in results/<gpu>/K.csv fitted into heuristics/generated/num_splits_K_<gpu>.hpp, and the fp8
# cache's, results/<gpu>/fp8.csv into num_splits_fp8_<gpu>.hpp. The header's kKernel and kKvDtype
# say which rows it was fitted on, so they give the flags. Registered only where both files exist,
# which configure says (both folders are globbed, so a new pair reconfigures).
file(GLOB SPLITKV_COMMITTED_RESULTS CONFIGURE_DEPENDS RELATIVE ${PROJECT_SOURCE_DIR}
     ${PROJECT_SOURCE_DIR}/results/*/*.csv)
set(SPLITKV_OTHER_TABLES)
foreach(results IN LISTS SPLITKV_COMMITTED_RESULTS)
  get_filename_component(table ${results} NAME_WE)
  get_filename_component(gpu ${results} DIRECTORY)
  get_filename_component(gpu ${gpu} NAME)
  set(header heuristics/generated/num_splits_${table}_${gpu}.hpp)
  if(EXISTS ${PROJECT_SOURCE_DIR}/${header})
    set(rows_flags)
    file(STRINGS ${PROJECT_SOURCE_DIR}/${header} constant_lines
         REGEX "^inline constexpr char k(Kernel|KvDtype)\\[\\] = \"[a-z0-9_]+\";")
    foreach(line IN LISTS constant_lines)
      if(line MATCHES "^inline constexpr char kKernel\\[\\] = \"([a-z0-9_]+)\"")
        list(APPEND rows_flags --kernel ${CMAKE_MATCH_1})
      elseif(line MATCHES "^inline constexpr char kKvDtype\\[\\] = \"([a-z0-9_]+)\"")
        list(APPEND rows_flags --kv-dtype ${CMAKE_MATCH_1})
      endif()
    endforeach()
    string(REPLACE "." "\\." results_pattern ${results})
    splitkv_cli_test(fit_check_committed_${table}_${gpu} 0
      "num_splits_${table}_${gpu}\\.hpp is up to date with ${results_pattern}"
      fit ${results} ${rows_flags} --out ${header} --check)
    list(APPEND SPLITKV_OTHER_TABLES ${header})
  endif()
endforeach()
if(SPLITKV_OTHER_TABLES)
  message(STATUS "splitkv: fit --check tests for the committed tables of peers and caches: ${SPLITKV_OTHER_TABLES}")
else()
  message(STATUS "splitkv: no committed table of a peer or cache (results/<gpu>/<name>.csv beside "
                 "heuristics/generated/num_splits_<name>_<gpu>.hpp); no fit --check test for one")
endif()

# CLI end-to-end tests: exit codes and the one-line messages users see. Label cpu.
enable_testing()  # this folder is configured before the top level enables testing

set(SPLITKV_CLI_FIXTURES ${CMAKE_CURRENT_LIST_DIR}/fixtures)
set(SPLITKV_CLI_SCRATCH ${CMAKE_CURRENT_BINARY_DIR}/cli_test_scratch)
file(MAKE_DIRECTORY ${SPLITKV_CLI_SCRATCH})

function(splitkv_cli_test name expected_exit expected_output)
  add_test(NAME cli.${name}
    COMMAND ${CMAKE_COMMAND} -DEXPECTED_EXIT=${expected_exit}
            "-DEXPECTED_OUTPUT=${expected_output}"
            -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/expect_exit.cmake
            $<TARGET_FILE:splitkv> ${ARGN}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(cli.${name} PROPERTIES LABELS cpu)
endfunction()

splitkv_cli_test(help 0 "--resume.*--dry-run.*--shard" sweep --help)
splitkv_cli_test(dry_run_quick 0 "planned in .* shapes.*first +contiguous bf16 b1 h32/8 d128 L1024"
  sweep --grid sweeps/quick.json --dry-run)
splitkv_cli_test(dry_run_shard 0 "shard +1/3: "
  sweep --grid sweeps/full.json --dry-run --shard 1/3)
# A kernel that picks its own split count is planned once per shape: 12 fixed counts + 1 policy row.
if(SPLITKV_TUNER_HAS_FLASHINFER)
  splitkv_cli_test(dry_run_own_count_kernel_once_per_shape 0 "flashinfer, flashinfer_heuristic -> 13 rows"
    sweep --grid sweeps/flashinfer_smoke.json --dry-run --kernel flashinfer,flashinfer_heuristic)
endif()
# Every committed grid plans: a grid file broken by an edit fails here, not on the GPU machine. The
# glob is taken at configure time (a new grid file needs a re-run of cmake to be picked up).
file(GLOB SPLITKV_COMMITTED_GRIDS RELATIVE ${PROJECT_SOURCE_DIR}
     ${PROJECT_SOURCE_DIR}/sweeps/*.json ${PROJECT_SOURCE_DIR}/sweeps/experiments/*.json)
foreach(grid IN LISTS SPLITKV_COMMITTED_GRIDS)
  get_filename_component(grid_name ${grid} NAME_WE)
  get_filename_component(grid_folder ${grid} DIRECTORY)
  get_filename_component(grid_folder ${grid_folder} NAME)
  splitkv_cli_test(committed_grid_plans.${grid_folder}.${grid_name} 0 "planned in [0-9]+ shapes"
    sweep --grid ${grid} --dry-run)
endforeach()
splitkv_cli_test(bad_grid_names_file_and_field 2
  "bad_head_dim\\.json: blocks\\[0\\]\\.head_dim\\[1\\]: head_dim 96 is not one of 64, 128, 256"
  sweep --grid ${SPLITKV_CLI_FIXTURES}/bad_head_dim.json --dry-run)
splitkv_cli_test(missing_grid 2 "nope\\.json: cannot open"
  sweep --grid ${SPLITKV_CLI_FIXTURES}/nope.json --dry-run)
splitkv_cli_test(bad_shard 2 "--shard \"3/2\": index must be less than the count 2"
  sweep --grid sweeps/quick.json --dry-run --shard 3/2)
splitkv_cli_test(bad_search 2 "--search"
  sweep --grid sweeps/quick.json --dry-run --search greedy)
splitkv_cli_test(out_folder_missing 2 "folder .*no_such_folder does not exist"
  sweep --grid sweeps/quick.json --out ${SPLITKV_CLI_SCRATCH}/no_such_folder/quick.csv)
splitkv_cli_test(out_with_rows_needs_resume 2 "already holds 2 measured rows; pass --resume"
  sweep --grid sweeps/quick.json --out ${SPLITKV_CLI_FIXTURES}/two_rows.csv --dry-run)
splitkv_cli_test(dry_run_resume_report 0 "holds 2 rows; 2 of the .* planned rows are done"
  sweep --grid sweeps/quick.json --out ${SPLITKV_CLI_FIXTURES}/two_rows.csv --dry-run --resume)
splitkv_cli_test(out_required 2 "--out is required unless --dry-run"
  sweep --grid sweeps/quick.json)
# --plan-csv: the points a driver outside this binary times (scripts/fa3_sweep.py); the line
# count is the shard's planned points, and tests/test_fa3_sweep.py checks the contents.
splitkv_cli_test(dry_run_plan_csv 0 "483 planned in 69 shapes.*plan csv +483 lines written to .*quick_plan\\.csv"
  sweep --grid sweeps/quick.json --dry-run --plan-csv ${SPLITKV_CLI_SCRATCH}/quick_plan.csv)
splitkv_cli_test(dry_run_plan_csv_shard 0 "shard +1/3: 151 points.*plan csv +151 lines written"
  sweep --grid sweeps/quick.json --dry-run --shard 1/3 --plan-csv ${SPLITKV_CLI_SCRATCH}/quick_plan_1of3.csv)
splitkv_cli_test(plan_csv_needs_dry_run 2 "--plan-csv writes the plan of a --dry-run; add --dry-run"
  sweep --grid sweeps/quick.json --out ${SPLITKV_CLI_SCRATCH}/plan_needs_dry_run.csv
        --plan-csv ${SPLITKV_CLI_SCRATCH}/plan_needs_dry_run_plan.csv)
splitkv_cli_test(plan_csv_folder_missing 2 "--plan-csv .*no_such_folder/plan\\.csv: folder .*no_such_folder does not exist"
  sweep --grid sweeps/quick.json --dry-run --plan-csv ${SPLITKV_CLI_SCRATCH}/no_such_folder/plan.csv)
splitkv_cli_test(plan_csv_not_the_grid 2 "--plan-csv sweeps/quick\\.json: is the grid file"
  sweep --grid sweeps/quick.json --dry-run --plan-csv sweeps/quick.json)

if(NOT SPLITKV_TUNER_HAS_GPU)
  splitkv_cli_test(sweep_without_cuda 1 "this build has no CUDA support"
    sweep --grid sweeps/quick.json --out ${SPLITKV_CLI_SCRATCH}/quick.csv)
  splitkv_cli_test(devices_without_cuda 1 "this build has no CUDA support" devices)
endif()

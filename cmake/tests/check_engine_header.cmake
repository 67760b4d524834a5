# An engine compiles splitkv/num_splits.hpp with one include root: heuristics/include in the
# source tree, and include/ of the installed num_splits component (nothing else installed).
#   cmake -DCXX=... -DSOURCE_DIR=... -DBUILD_DIR=... -DWORK_DIR=... [-DFLAGS="-Wall ..."] -P check_engine_header.cmake
set(engine ${SOURCE_DIR}/cmake/tests/engine_num_splits.cpp)
separate_arguments(FLAGS UNIX_COMMAND "${FLAGS}")

function(compile_engine label include_root)
  execute_process(COMMAND ${CXX} -std=c++17 -fsyntax-only ${FLAGS} -I${include_root} ${engine}
                  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "${label}: ${engine} does not compile with only -I${include_root}:\n${out}")
  endif()
  message(STATUS "${label}: compiles with only -I${include_root}")
endfunction()

compile_engine("source tree" ${SOURCE_DIR}/heuristics/include)

file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR} --component num_splits
                RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT code EQUAL 0)
  message(FATAL_ERROR "cmake --install --component num_splits failed:\n${out}")
endif()
# The check means something only if the kernels' headers are not there to be found.
if(EXISTS ${WORK_DIR}/include/splitkv/split_partition.hpp OR EXISTS ${WORK_DIR}/include/splitkv/decode_params.hpp)
  message(FATAL_ERROR "the num_splits component installs kernel headers: ${WORK_DIR}/include/splitkv")
endif()
compile_engine("installed component" ${WORK_DIR}/include)

# find_package(splitkv) for the header-only splitkv::num_splits needs no CUDA toolkit: install this
# build, then configure, build and run package_consumer/ with CUDA out of reach (no nvcc on PATH,
# CUDACXX unset, find_package(CUDAToolkit) disabled), once without components and once with
# COMPONENTS num_splits; asking for COMPONENTS kernels must then fail at configure time.
#   cmake -DBUILD_DIR=... -DWORK_DIR=... -DCXX=... -DGENERATOR=... -P check_package_consumer.cmake
set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix}
                RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT code EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BUILD_DIR} failed:\n${out}")
endif()

# A build without CUDA installs no CUDA targets, and then the package has nothing to skip. Stand
# in for the file a CUDA build installs, one that fails whoever loads it: the package must not
# load it for these consumers.
file(GLOB config_dir LIST_DIRECTORIES true ${prefix}/lib*/cmake/splitkv)
if(NOT config_dir)
  message(FATAL_ERROR "no lib*/cmake/splitkv under ${prefix}")
endif()
if(NOT EXISTS ${config_dir}/splitkvCudaTargets.cmake)
  file(WRITE ${config_dir}/splitkvCudaTargets.cmake
       "message(FATAL_ERROR \"splitkvCudaTargets.cmake loaded without a CUDA toolkit\")\n")
endif()

set(path_without_nvcc)
string(REPLACE ":" ";" path_entries "$ENV{PATH}")
foreach(entry IN LISTS path_entries)
  if(NOT EXISTS ${entry}/nvcc)
    list(APPEND path_without_nvcc ${entry})
  endif()
endforeach()
string(REPLACE ";" ":" path_without_nvcc "${path_without_nvcc}")
set(no_cuda ${CMAKE_COMMAND} -E env --unset=CUDACXX --unset=CUDA_PATH PATH=${path_without_nvcc})

function(consumer name components expect)
  set(build ${WORK_DIR}/consumer_${name})
  execute_process(COMMAND ${no_cuda} ${CMAKE_COMMAND} -S ${CMAKE_CURRENT_LIST_DIR}/package_consumer -B ${build}
                          -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_PREFIX_PATH=${prefix}
                          -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON "-DSPLITKV_COMPONENTS=${components}"
                  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(expect STREQUAL "configure-fails")
    if(code EQUAL 0)
      message(FATAL_ERROR "${name}: find_package(splitkv COMPONENTS ${components}) succeeded without CUDA")
    endif()
    message(STATUS "${name}: refused without CUDA, as it should be")
    return()
  endif()
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "${name}: configure failed without CUDA:\n${out}")
  endif()
  execute_process(COMMAND ${no_cuda} ${CMAKE_COMMAND} --build ${build}
                  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "${name}: build failed:\n${out}")
  endif()
  execute_process(COMMAND ${build}/consumer RESULT_VARIABLE code)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "${name}: the consumer exited ${code}")
  endif()
  message(STATUS "${name}: configured, built and ran without CUDA")
endfunction()

consumer(no_components "" ok)
consumer(num_splits "num_splits" ok)
consumer(kernels "kernels" configure-fails)

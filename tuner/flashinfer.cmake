# FlashInfer's batch paged decode kernel as the kernels under test `flashinfer` and
# `flashinfer_heuristic` (tuner/FLASHINFER.md). Optional: FlashInfer is header-only CUDA, taken
# from its wheel by scripts/fetch_flashinfer.sh, and everything else builds without it.
# Included from tuner/CMakeLists.txt once SPLITKV_TUNER_HAS_GPU is known.
#
#   SPLITKV_WITH_FLASHINFER              AUTO (build them when CUDA is on and the headers are
#                                        found), ON (the same, but missing headers stop the
#                                        configure), OFF
#   SPLITKV_FLASHINFER_INCLUDE_DIR       the folder holding flashinfer/attention/decode.cuh
#   SPLITKV_FLASHINFER_CCCL_INCLUDE_DIR  the libcu++ FlashInfer vendors (holding cuda/cmath), put
#                                        ahead of the toolkit's as FlashInfer's own build does: its
#                                        headers need a newer one than CUDA 13.0 ships. Empty: the
#                                        toolkit's.
set(SPLITKV_WITH_FLASHINFER AUTO CACHE STRING
    "Build FlashInfer's batch decode kernel into the tuner: AUTO, ON or OFF")
set_property(CACHE SPLITKV_WITH_FLASHINFER PROPERTY STRINGS AUTO ON OFF)
set(SPLITKV_FLASHINFER_INCLUDE_DIR "${PROJECT_SOURCE_DIR}/.deps/flashinfer/include" CACHE PATH
    "FlashInfer's include folder (the wheel's flashinfer/data/include; scripts/fetch_flashinfer.sh puts it here)")
set(SPLITKV_FLASHINFER_CCCL_INCLUDE_DIR "${PROJECT_SOURCE_DIR}/.deps/flashinfer/cccl/libcudacxx/include" CACHE PATH
    "libcu++ for the FlashInfer adapter (the wheel's flashinfer/data/cccl/libcudacxx/include); empty: the toolkit's")

string(TOUPPER "${SPLITKV_WITH_FLASHINFER}" splitkv_flashinfer_mode)
if(NOT splitkv_flashinfer_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "SPLITKV_WITH_FLASHINFER=${SPLITKV_WITH_FLASHINFER}: expected AUTO, ON or OFF")
endif()

# The headers the adapter includes; a folder without them is not FlashInfer's include root.
set(splitkv_flashinfer_probe_headers
  flashinfer/attention/decode.cuh
  flashinfer/attention/scheduler.cuh
  flashinfer/attention/default_decode_params.cuh
  flashinfer/attention/variants.cuh
  flashinfer/page.cuh)
set(splitkv_flashinfer_skip_reason "")
if(splitkv_flashinfer_mode STREQUAL "OFF")
  set(splitkv_flashinfer_skip_reason "SPLITKV_WITH_FLASHINFER=OFF")
elseif(NOT SPLITKV_TUNER_HAS_GPU)
  set(splitkv_flashinfer_skip_reason "CUDA is off")
else()
  foreach(header ${splitkv_flashinfer_probe_headers})
    if(NOT EXISTS "${SPLITKV_FLASHINFER_INCLUDE_DIR}/${header}")
      set(splitkv_flashinfer_skip_reason
          "headers not found at ${SPLITKV_FLASHINFER_INCLUDE_DIR} (no ${header}); run scripts/fetch_flashinfer.sh")
      break()
    endif()
  endforeach()
  if(splitkv_flashinfer_skip_reason STREQUAL "" AND NOT SPLITKV_FLASHINFER_CCCL_INCLUDE_DIR STREQUAL "" AND
     NOT EXISTS "${SPLITKV_FLASHINFER_CCCL_INCLUDE_DIR}/cuda/cmath")
    set(splitkv_flashinfer_skip_reason
        "FlashInfer's libcu++ not found at ${SPLITKV_FLASHINFER_CCCL_INCLUDE_DIR} (no cuda/cmath); run scripts/fetch_flashinfer.sh")
  endif()
endif()

if(splitkv_flashinfer_skip_reason STREQUAL "")
  message(STATUS "FlashInfer kernels: flashinfer, flashinfer_heuristic (headers at ${SPLITKV_FLASHINFER_INCLUDE_DIR})")
  message(STATUS "FlashInfer kernels: libcu++ from ${SPLITKV_FLASHINFER_CCCL_INCLUDE_DIR}")
  set(SPLITKV_TUNER_HAS_FLASHINFER ON PARENT_SCOPE)
  set(splitkv_flashinfer_source ${CMAKE_CURRENT_SOURCE_DIR}/src/gpu_flashinfer_kernel.cu)
  target_sources(splitkv_tuner PRIVATE ${splitkv_flashinfer_source})
  # FlashInfer's headers and its own nvcc flags for its JIT modules (flashinfer/jit/core.py and
  # cpp_ext.py: its libcu++ by -I ahead of the toolkit's, fast math, relaxed constexpr, the bf16
  # switch), on this one file only: the rest of the tuner is compiled as before, and FlashInfer's
  # warnings stay out of it (-isystem).
  set(splitkv_flashinfer_options "-isystem;${SPLITKV_FLASHINFER_INCLUDE_DIR};-use_fast_math;--expt-relaxed-constexpr")
  if(NOT SPLITKV_FLASHINFER_CCCL_INCLUDE_DIR STREQUAL "")
    list(PREPEND splitkv_flashinfer_options "-I${SPLITKV_FLASHINFER_CCCL_INCLUDE_DIR}")
  endif()
  set_source_files_properties(${splitkv_flashinfer_source} PROPERTIES
    COMPILE_OPTIONS "${splitkv_flashinfer_options}"
    COMPILE_DEFINITIONS "FLASHINFER_ENABLE_BF16")
else()
  if(splitkv_flashinfer_mode STREQUAL "ON")
    message(FATAL_ERROR "FlashInfer kernels: SPLITKV_WITH_FLASHINFER=ON, but ${splitkv_flashinfer_skip_reason}")
  endif()
  message(NOTICE "-- FlashInfer kernels: skipped (${splitkv_flashinfer_skip_reason})")
  set(SPLITKV_TUNER_HAS_FLASHINFER OFF PARENT_SCOPE)
  # Same entry points: no kernels registered, and a reason for the GPU test to skip with.
  target_sources(splitkv_tuner PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src/flashinfer_kernel_unavailable.cpp)
  # A list separator in the reason would split the definition; the GPU test prints it.
  string(REPLACE ";" "," splitkv_flashinfer_define "${splitkv_flashinfer_skip_reason}")
  set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/src/flashinfer_kernel_unavailable.cpp PROPERTIES
    COMPILE_DEFINITIONS "SPLITKV_FLASHINFER_SKIP_REASON=\"${splitkv_flashinfer_define}\"")
endif()

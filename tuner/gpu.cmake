# GPU half of the tuner: CUDA-graph timing and the kernel validate-then-benchmark driver.
# Included from tuner/CMakeLists.txt when CUDA is enabled.
add_library(splitkv_gpu_timing STATIC ${CMAKE_CURRENT_LIST_DIR}/src/graph_timer.cu
                                      ${CMAKE_CURRENT_LIST_DIR}/src/sample_stats.cpp)
add_library(splitkv::gpu_timing ALIAS splitkv_gpu_timing)
target_include_directories(splitkv_gpu_timing PUBLIC
  $<BUILD_INTERFACE:${CMAKE_CURRENT_LIST_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_link_libraries(splitkv_gpu_timing PUBLIC CUDA::cudart)

add_executable(decode_kernel_bench ${CMAKE_CURRENT_LIST_DIR}/bench/decode_kernel_bench.cu)
target_link_libraries(decode_kernel_bench PRIVATE splitkv_kernels splitkv_gpu_timing splitkv_reference)

# The kernel validate-then-benchmark driver.
# Included from tuner/CMakeLists.txt when CUDA is enabled.
add_executable(decode_kernel_bench ${CMAKE_CURRENT_LIST_DIR}/bench/decode_kernel_bench.cu)
target_link_libraries(decode_kernel_bench PRIVATE splitkv_tuner splitkv_kernels splitkv_reference)

# Records which SM each CTA of a decode-shaped grid lands on (why the persistent grid orders its
# items as it does).
add_executable(cta_placement_probe ${CMAKE_CURRENT_LIST_DIR}/bench/cta_placement_probe.cu)


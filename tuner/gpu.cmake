# The kernel validate-then-benchmark driver (kernels/NOTES.md numbers come from it).
# Included from tuner/CMakeLists.txt when CUDA is enabled.
add_executable(decode_kernel_bench ${CMAKE_CURRENT_LIST_DIR}/bench/decode_kernel_bench.cu)
target_link_libraries(decode_kernel_bench PRIVATE splitkv_tuner splitkv_kernels splitkv_reference)

# Records which SM each CTA of a decode-shaped grid lands on (kernels/NOTES.md, v7).
add_executable(cta_placement_probe ${CMAKE_CURRENT_LIST_DIR}/bench/cta_placement_probe.cu)

# When do the split and combine kernels of one decode call start and finish on the device, fixed
# count against num_splits = auto (kernels/NOTES.md, v9g). Links the SPLITKV_TIMELINE build of the
# kernels, not splitkv_kernels (both define splitkv::decode_attention), and the header-only
# heuristic for the split counts; so not splitkv_tuner, which brings splitkv_kernels. Built on request.
add_executable(auto_timeline_probe EXCLUDE_FROM_ALL ${CMAKE_CURRENT_LIST_DIR}/bench/auto_timeline_probe.cu)
target_include_directories(auto_timeline_probe PRIVATE ${CMAKE_CURRENT_LIST_DIR}/include)  # device_random.cuh
target_link_libraries(auto_timeline_probe PRIVATE splitkv_kernels_timeline splitkv_num_splits)

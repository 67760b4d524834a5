# Included by the top-level CMakeLists.txt when SPLITKV_BUILD_FUZZERS is ON, before any
# target exists: a fuzz build instruments all host code (libFuzzer coverage, ASan, UBSan).
# It is a build of its own, e.g.
#   cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DSPLITKV_ENABLE_CUDA=OFF \
#         -DSPLITKV_BUILD_TESTS=OFF -DSPLITKV_BUILD_FUZZERS=ON
# fuzz/run_fuzzers.sh does exactly that.
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "SPLITKV_BUILD_FUZZERS needs clang (libFuzzer); configure a separate build "
                      "with -DCMAKE_CXX_COMPILER=clang++ (Debian: apt install clang libclang-rt-14-dev)")
endif()
if(SPLITKV_ENABLE_CUDA)
  message(FATAL_ERROR "SPLITKV_BUILD_FUZZERS builds host code only; add -DSPLITKV_ENABLE_CUDA=OFF")
endif()
add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
                    -fno-omit-frame-pointer -g)
add_link_options(-fsanitize=address,undefined)

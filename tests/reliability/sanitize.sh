#!/usr/bin/env bash
# The host code (no CUDA) built with AddressSanitizer and UndefinedBehaviorSanitizer, then
# every CPU test under them (ctest -L cpu: the unit tests, the bad-input catalogue, the
# kill -9 / resume test and the fuzz corpus replay). Any report fails the run: UBSan does
# not recover, ASan aborts on its first error, LeakSanitizer is on.
#
#   tests/reliability/sanitize.sh
#
# Environment: SPLITKV_SANITIZE_BUILD_DIR (default build-asan), SPLITKV_JOBS (default: all
# cores), SPLITKV_SANITIZE_GENERATOR (default Ninja when found). The build folder is kept, so a
# second run only rebuilds what changed.
#
# -g1: line tables, what the sanitizers' stack traces print (file:line per frame); full debug
# info cost a quarter of this build's time on a 2-core host (cli/src/main.cpp 36 s against 27.5).
# -O1, not -O0: -O0 compiled in a third of the time but ran the tests 4x slower (290 s against
# 73), no faster in all.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

build_dir=${SPLITKV_SANITIZE_BUILD_DIR:-build-asan}
jobs=${SPLITKV_JOBS:-$(nproc 2>/dev/null || echo 2)}
flags="-O1 -g1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all -D_GLIBCXX_ASSERTIONS"
link_flags="-fsanitize=address,undefined"

# SPLITKV_SANITIZE_GENERATOR picks the CMake generator; CI sets "Unix Makefiles" so that this
# build also proves the project builds and passes its CPU tests without Ninja (the main build uses
# Ninja, and only Ninja creates a custom command's output folder on its own).
generator_args=()
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  if [ -n "${SPLITKV_SANITIZE_GENERATOR:-}" ]; then generator_args=(-G "$SPLITKV_SANITIZE_GENERATOR")
  elif command -v ninja >/dev/null 2>&1; then generator_args=(-G Ninja); else generator_args=(-G "Unix Makefiles"); fi
elif [ -n "${SPLITKV_SANITIZE_GENERATOR:-}" ] &&
     ! grep -qx "CMAKE_GENERATOR:INTERNAL=${SPLITKV_SANITIZE_GENERATOR}" "$build_dir/CMakeCache.txt"; then
  echo "sanitize.sh: $build_dir was configured with another generator; starting it afresh"
  rm -rf "$build_dir/CMakeCache.txt" "$build_dir/CMakeFiles"
  generator_args=(-G "$SPLITKV_SANITIZE_GENERATOR")
fi
mkdir -p "$build_dir"
echo "sanitize.sh: configuring $build_dir (Debug, $flags)"
cmake -S . -B "$build_dir" "${generator_args[@]}" -DSPLITKV_ENABLE_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug \
  "-DCMAKE_CXX_FLAGS_DEBUG=$flags" "-DCMAKE_EXE_LINKER_FLAGS=$link_flags" \
  "-DCMAKE_SHARED_LINKER_FLAGS=$link_flags" >"$build_dir/configure.log" 2>&1 ||
  { cat "$build_dir/configure.log"; exit 1; }
echo "sanitize.sh: building with $jobs jobs"
cmake --build "$build_dir" --parallel "$jobs"

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1:check_initialization_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# The report.* tests rerun fit, evaluate (with nested cross-validation) and compare over the
# whole committed full.csv: ~160 s each under ASan, which would be most of this job. The same
# code paths run under ASan in the unit tests on synthetic CSVs, and the report tests run
# unsanitized in the main job.
echo "sanitize.sh: ctest -L cpu under ASan+UBSan, except report.* (ASAN_OPTIONS=$ASAN_OPTIONS)"
ctest --test-dir "$build_dir" -L cpu -E '^report\.' --output-on-failure -j "$jobs"

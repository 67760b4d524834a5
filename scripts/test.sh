#!/usr/bin/env bash
# The one test command: dependencies, configure, build, then every test through ctest.
#
# Environment:
#   SPLITKV_CMAKE_ARGS  extra configure arguments, split on spaces
#                       (e.g. "-DSPLITKV_ENABLE_CUDA=OFF" or "-DSPLITKV_CUDA_ARCHITECTURES=90a;80")
#   SPLITKV_BUILD_DIR   build folder (default: build)
#   SPLITKV_JOBS        parallel build and test jobs (default: all cores)
#   SPLITKV_SKIP_DEPS=1 do not run scripts/install_deps.sh
#   SPLITKV_BUILD_TARGETS  build only these targets (split on spaces; default: all)
#   SPLITKV_BUILD_ONLY=1   build, then stop before the tests (scripts/run.sh)
#
# GPU tests build whenever nvcc is found and skip visibly when no GPU driver or device
# answers, so this same command serves CI (no GPU) and the GPU machine.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_dir=${SPLITKV_BUILD_DIR:-build}
jobs=${SPLITKV_JOBS:-$(nproc 2>/dev/null || echo 2)}
read -r -a extra_args <<<"${SPLITKV_CMAKE_ARGS:-}"

say() { echo "test.sh: $*"; }

if [ "${SPLITKV_SKIP_DEPS:-0}" != 1 ]; then
  # Keep going if it fails: the configure step below names anything really missing, and
  # some listed packages (the Python ones) are not needed to build and test.
  scripts/install_deps.sh || say "warning: install_deps.sh failed; trying to build anyway"
fi

# The toolkit's usual home is not always on PATH (non-login shells, the GPU machine).
if [ -z "${CUDACXX:-}" ] && ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

# A cached configure remembers old -D values and its generator; start fresh whenever the
# requested arguments differ from the last run's, so the env var always means what it says.
args_stamp="$build_dir/.splitkv_cmake_args"
requested="${SPLITKV_CMAKE_ARGS:-}"
if [ -f "$build_dir/CMakeCache.txt" ] && [ "$(cat "$args_stamp" 2>/dev/null || true)" != "$requested" ]; then
  say "configure arguments changed; clearing the cached configure in $build_dir"
  rm -rf "$build_dir/CMakeCache.txt" "$build_dir/CMakeFiles"
fi

generator_args=()
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  if command -v ninja >/dev/null 2>&1; then
    generator_args=(-G Ninja)
  else
    say "ninja not found; using Unix Makefiles"
    generator_args=(-G "Unix Makefiles")
  fi
fi

say "cmake -S . -B $build_dir ${generator_args[*]} ${extra_args[*]}"
cmake -S . -B "$build_dir" "${generator_args[@]}" "${extra_args[@]}"
mkdir -p "$build_dir"
printf '%s' "$requested" >"$args_stamp"

read -r -a targets <<<"${SPLITKV_BUILD_TARGETS:-}"
say "building ${targets[*]:-everything} with $jobs jobs"
cmake --build "$build_dir" ${targets[@]:+--target "${targets[@]}"} --parallel "$jobs"

# scripts/run.sh reuses this set-up and build without running the tests.
if [ "${SPLITKV_BUILD_ONLY:-0}" = 1 ]; then
  exit 0
fi

# The slurm-labelled test starts its own Slurm daemons; .ci/run runs it on its own afterwards.
say "ctest --test-dir $build_dir --output-on-failure -j $jobs -LE slurm"
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" -LE slurm

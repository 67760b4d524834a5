#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan) and runs each one over its committed
# corpus and crash regressions for a bounded time.
#
#   fuzz/run_fuzzers.sh [SECONDS_PER_TARGET]     (default 20; CI uses this)
#
# New inputs go to a scratch folder, not into fuzz/corpus, unless SPLITKV_FUZZ_GROW=1 (then
# merge them in with -merge=1, see RELIABILITY.md). A crash stops the run with exit 1 and
# leaves the input in $SPLITKV_FUZZ_BUILD_DIR/artifacts/. Environment:
# SPLITKV_FUZZ_BUILD_DIR (default build-fuzz).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds=${1:-20}
build_dir=${SPLITKV_FUZZ_BUILD_DIR:-build-fuzz}
say() { echo "run_fuzzers.sh: $*"; }

if ! command -v clang++ >/dev/null 2>&1; then
  say "clang++ not found; install clang and libclang-rt-14-dev (scripts/install_deps.sh)" >&2
  exit 1
fi
generator_args=()
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  if command -v ninja >/dev/null 2>&1; then generator_args=(-G Ninja); else generator_args=(-G "Unix Makefiles"); fi
fi
mkdir -p "$build_dir"
cmake -S . -B "$build_dir" "${generator_args[@]}" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Release \
  -DSPLITKV_ENABLE_CUDA=OFF -DSPLITKV_BUILD_TESTS=OFF -DSPLITKV_BUILD_FUZZERS=ON \
  >"$build_dir/configure.log" 2>&1 || { cat "$build_dir/configure.log"; exit 1; }
cmake --build "$build_dir" --parallel "${SPLITKV_JOBS:-$(nproc 2>/dev/null || echo 2)}" \
  --target fuzz_grid_reader fuzz_results_csv_reader

artifacts="$build_dir/artifacts"
mkdir -p "$artifacts"
status=0
for spec in grid_reader:grid.dict results_csv_reader:results_csv.dict; do
  target=${spec%%:*}
  dict=${spec#*:}
  if [ "${SPLITKV_FUZZ_GROW:-0}" = 1 ]; then
    new="$build_dir/new_${target}"
    mkdir -p "$new"
  else
    new=$(mktemp -d)
  fi
  corpora=(fuzz/corpus/"$target")
  [ -d fuzz/regressions/"$target" ] && corpora+=(fuzz/regressions/"$target")
  say "fuzz_$target for ${seconds}s over ${corpora[*]}"
  if ! "$build_dir/fuzz/fuzz_$target" -max_total_time="$seconds" -max_len=4096 -dict="fuzz/$dict" \
      -print_final_stats=1 -artifact_prefix="$artifacts/$target-" "$new" "${corpora[@]}" \
      >"$build_dir/fuzz_$target.log" 2>&1; then
    tail -60 "$build_dir/fuzz_$target.log"
    say "fuzz_$target FOUND A CRASH: input in $artifacts/ (full log: $build_dir/fuzz_$target.log)" >&2
    status=1
  else
    grep -E "^(Done|stat::number_of_executed_units|stat::new_units_added)" "$build_dir/fuzz_$target.log" | sed "s/^/  /"
  fi
  [ "${SPLITKV_FUZZ_GROW:-0}" = 1 ] || rm -rf "$new"
done
exit "$status"

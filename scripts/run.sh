#!/usr/bin/env bash
# The main job: measure (on a GPU) or reuse the committed H200 measurements (no GPU), then fit
# the num_splits tables, emit the generated header and write the reports.
#
#   scripts/run.sh
#
# It installs missing dependencies (scripts/install_deps.sh, as scripts/test.sh does) and builds
# only the `splitkv` CLI, all the fit and the reports run. With a usable GPU (nvidia-smi lists one)
# that CLI is built with the kernels in $SPLITKV_BUILD_DIR (default build), and it sweeps
# SPLITKV_GRID (default sweeps/quick.json, ~15 s on an H200; use sweeps/full.json, ~5 min, for a
# table worth committing) into results/<gpu>/<grid>.csv, resuming a previous run there (the
# committed H200 quick.csv is complete: delete it to re-time on an H200), and fits that. Without
# one, or with SPLITKV_NO_SWEEP=1, CUDA would only cost build minutes: the CLI is configured with
# -DSPLITKV_ENABLE_CUDA=OFF in its own folder ($SPLITKV_BUILD_DIR, default build-cpu) and fits the
# committed results/h200/full.csv.
# Outputs: from full.csv, heuristics/generated/num_splits_<gpu>.hpp and results/<gpu>/report/ (from
# a committed fa3.csv or flashinfer.csv also num_splits_<kernel>_<gpu>.hpp, report/<kernel>_regret.*,
# and from a committed fp8.csv num_splits_fp8_<gpu>.hpp and report/fp8_regret.*);
# from any other grid (a smoke test, not a table to commit) the same two under $SPLITKV_BUILD_DIR/run/,
# so that a quick fit never overwrites the committed header or reports.
# Environment: SPLITKV_BUILD_DIR, SPLITKV_GRID, SPLITKV_NO_SWEEP=1 (fit the committed results even
# when a GPU is present), and scripts/test.sh's SPLITKV_CMAKE_ARGS, SPLITKV_JOBS, SPLITKV_SKIP_DEPS.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
say() { echo "run.sh: $*"; }
cmake_args="${SPLITKV_CMAKE_ARGS:-}"
if [ "${SPLITKV_NO_SWEEP:-0}" != 1 ] && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  build_dir=${SPLITKV_BUILD_DIR:-build}
else
  build_dir=${SPLITKV_BUILD_DIR:-build-cpu}
  cmake_args="-DSPLITKV_ENABLE_CUDA=OFF -DSPLITKV_BUILD_TESTS=OFF${cmake_args:+ $cmake_args}"
fi
# scripts/test.sh's dependencies, configure (and its record of the arguments, so either script can
# reuse the other's build folder) and build, limited to the CLI.
SPLITKV_BUILD_ONLY=1 SPLITKV_BUILD_TARGETS=splitkv SPLITKV_BUILD_DIR="$build_dir" SPLITKV_CMAKE_ARGS="$cmake_args" \
  scripts/test.sh
splitkv="$build_dir/cli/splitkv"

gpu=h200
results=full
if [ "${SPLITKV_NO_SWEEP:-0}" != 1 ] && devices=$("$splitkv" devices 2>/dev/null); then
  # "device 0: NVIDIA H200" -> h200: the results folder and the header's name.
  gpu=$(printf '%s\n' "$devices" | sed -n 's/^device 0: //p' | sed 's/^NVIDIA //' | tr 'A-Z' 'a-z' | tr -c 'a-z0-9\n' '_')
  grid=${SPLITKV_GRID:-sweeps/quick.json}
  results=$(basename "$grid" .json)
  mkdir -p "results/$gpu"
  resume=()
  [ -s "results/$gpu/$results.csv" ] && resume=(--resume)
  say "sweeping $grid on $gpu into results/$gpu/$results.csv"
  "$splitkv" sweep --grid "$grid" --out "results/$gpu/$results.csv" "${resume[@]}"
else
  say "no usable GPU (or SPLITKV_NO_SWEEP=1): fitting the committed H200 measurements"
fi

if [ "$results" = full ]; then
  say "fit results/$gpu/$results.csv -> heuristics/generated/num_splits_$gpu.hpp"
  "$splitkv" fit "results/$gpu/$results.csv" --out "heuristics/generated/num_splits_$gpu.hpp"
  # The regret tables (in sample, cross-validated, validation), paged vs contiguous, the capacity
  # scenario, the plots and summary.md.
  scripts/report.sh --results-dir "results/$gpu" --splitkv "$splitkv"
  # The peers' own kernels, where their rows are committed (heuristics/FIT.md, "Peer kernels"): a
  # table of each and its regret report beside the peer's own choice.
  for kernel in fa3 flashinfer; do
    [ -f "results/$gpu/$kernel.csv" ] || continue
    say "fit results/$gpu/$kernel.csv --kernel $kernel -> heuristics/generated/num_splits_${kernel}_$gpu.hpp"
    "$splitkv" fit "results/$gpu/$kernel.csv" --kernel "$kernel" --out "heuristics/generated/num_splits_${kernel}_$gpu.hpp"
    validation=()
    [ -f "results/$gpu/${kernel}_validation.csv" ] && validation=(--validation "results/$gpu/${kernel}_validation.csv")
    "$splitkv" evaluate "results/$gpu/$kernel.csv" --kernel "$kernel" "${validation[@]}" \
      --out "results/$gpu/report/${kernel}_regret.csv"
  done
  # The fp8 (e4m3) cache's table, where its rows are committed, and its regret beside reusing the
  # 16-bit table on fp8 (heuristics/FIT.md, "KV cache classes").
  if [ -f "results/$gpu/fp8.csv" ]; then
    say "fit results/$gpu/fp8.csv --kv-dtype fp8_e4m3 -> heuristics/generated/num_splits_fp8_$gpu.hpp"
    "$splitkv" fit "results/$gpu/fp8.csv" --kv-dtype fp8_e4m3 --out "heuristics/generated/num_splits_fp8_$gpu.hpp"
    validation=()
    [ -f "results/$gpu/fp8_validation.csv" ] && validation=(--validation "results/$gpu/fp8_validation.csv")
    "$splitkv" evaluate "results/$gpu/fp8.csv" --kv-dtype fp8_e4m3 "${validation[@]}" \
      --reuse-table "heuristics/generated/num_splits_$gpu.hpp" --out "results/$gpu/report/fp8_regret.csv"
  fi
  say "done: heuristics/generated/num_splits_$gpu.hpp, results/$gpu/report/summary.md"
else
  # A smoke grid's table is not one to commit: it goes beside the build, not over the
  # committed header and reports, which come from full.csv.
  run_dir="$build_dir/run/${gpu}_$results"
  mkdir -p "$run_dir"
  say "fit results/$gpu/$results.csv -> $run_dir/num_splits_$gpu.hpp (a $results-grid table; SPLITKV_GRID=sweeps/full.json for one to commit)"
  "$splitkv" fit "results/$gpu/$results.csv" --out "$run_dir/num_splits_$gpu.hpp"
  "$splitkv" evaluate "results/$gpu/$results.csv" --out "$run_dir/regret.csv"
  say "done: $run_dir/num_splits_$gpu.hpp, $run_dir/regret.md"
fi

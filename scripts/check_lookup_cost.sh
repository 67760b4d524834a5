#!/usr/bin/env bash
# CI's gate on what a num_splits lookup costs (< 20 ns per call): builds nothing, runs the
# Google Benchmark microbenchmark and checks it against the reference measured on the GPU machine's
# host (results/h200/lookup_cost.csv), scaled by this host's speed; scripts/lookup_cost.py says how.
#   scripts/check_lookup_cost.sh [build-dir] [limit-ns]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir=${1:-build}
limit=${2:-20}
exec python3 scripts/lookup_cost.py check "$build_dir/heuristics/heuristics_lookup_bench" --limit-ns "$limit"

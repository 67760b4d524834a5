#!/usr/bin/env bash
# The generated num_splits lookup must cost < 20 ns per call on the host (issue 4): runs the
# Google Benchmark microbenchmark and fails when any lookup's median CPU time is over the limit.
#   scripts/check_lookup_cost.sh [build-dir] [limit-ns]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir=${1:-build}
limit=${2:-20}
json=$(mktemp)
trap 'rm -f "$json"' EXIT
"$build_dir/heuristics/heuristics_lookup_bench" --benchmark_min_time=0.2 --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true --benchmark_format=json >"$json"
python3 - "$json" "$limit" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
limit = float(sys.argv[2])
medians = [b for b in data["benchmarks"] if b.get("aggregate_name") == "median"]
if not medians:
    sys.exit("check_lookup_cost: no median rows in the benchmark output")
worst = max(medians, key=lambda b: b["cpu_time"])
for b in medians:
    print(f"  {b['run_name']:45s} {b['cpu_time']:7.2f} {b['time_unit']} (median of 3)")
unit = worst["time_unit"]
assert unit == "ns", f"unexpected time unit {unit}"
if worst["cpu_time"] >= limit:
    sys.exit(f"check_lookup_cost: {worst['run_name']} costs {worst['cpu_time']:.2f} ns >= {limit} ns")
print(f"check_lookup_cost: every lookup under {limit} ns (worst {worst['cpu_time']:.2f} ns)")
PY

#!/usr/bin/env bash
# Regenerates every report of one GPU from its committed CSVs, in one command:
#
#   scripts/report.sh                        # results/h200 -> results/h200/report/*, paged_vs_contiguous.csv,
#                                            #                 capacity_scenario.csv
#   scripts/report.sh --out-dir /tmp/report  # the same files under /tmp/report (what CI checks)
#
# Options:
#   --results-dir DIR  the GPU's committed measurements: full.csv, validation.csv, peers.csv
#                      (default results/h200)
#   --out-dir DIR      where the reports go (default: the results dir); DIR/report/ holds fit.md,
#                      regret.{csv,md}, regret_points.csv, summary.md and the plots
#   --splitkv PATH     the splitkv binary (default build/cli/splitkv; when it is missing, a CPU-only
#                      build of it is made in build-report/)
#   --python PATH      a python3 with matplotlib (default: $SPLITKV_PYTHON when set, else python3
#                      if it imports matplotlib, else /usr/bin/python3, Debian's, where
#                      scripts/install_deps.sh installs it)
#
# Steps: splitkv fit --report (fit.md; the header it also writes is thrown away, and `fit --check`
# only says whether the committed header is still what full.csv gives), splitkv evaluate
# --validation (regret.csv, regret.md, regret_points.csv), splitkv compare --capacity-out,
# scripts/plot_report.py (plots and summary.md). Everything is written to a staging folder
# first and moved into place only after every step succeeded, so bad input leaves the
# existing reports as they were.
#
# Exit codes: 0 done; 1 a tool is missing or an output could not be written; 2 bad input
# (the failing step's message names the file and what is missing).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

say() { echo "report.sh: $*"; }
die() { echo "report.sh: $2" >&2; exit "$1"; }

results_dir=results/h200
out_dir=
splitkv=
python=${SPLITKV_PYTHON:-}
while [ $# -gt 0 ]; do
  case "$1" in
    --results-dir) results_dir=${2:?--results-dir needs a folder}; shift 2 ;;
    --out-dir) out_dir=${2:?--out-dir needs a folder}; shift 2 ;;
    --splitkv) splitkv=${2:?--splitkv needs a path}; shift 2 ;;
    --python) python=${2:?--python needs a path}; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die 2 "unknown argument \"$1\" (see --help)" ;;
  esac
done
out_dir=${out_dir:-$results_dir}

full=$results_dir/full.csv
validation=$results_dir/validation.csv
peers=$results_dir/peers.csv
for input in "$full" "$validation" "$peers"; do
  [ -f "$input" ] || die 2 "$input: no such file (the committed measurements this report is made from)"
done

# One GPU throughout, checked before the minutes of fitting: the gpu column of each input's first row.
gpu_of() { awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i == "gpu") c = i; next } c { print $c; exit }' "$1"; }
expected_gpu=$(gpu_of "$full")
gpus=""
mismatch=0
for input in "$full" "$validation" "$peers"; do
  gpu=$(gpu_of "$input")
  gpus+="${gpus:+; }$input is ${gpu:-(no gpu column or no rows)}"
  [ "$gpu" = "$expected_gpu" ] || mismatch=1
done
[ "$mismatch" -eq 0 ] || die 2 "inputs of different GPUs: $gpus; every input must come from $expected_gpu"

# A python3 that can draw.
if [ -z "$python" ]; then
  for candidate in python3 /usr/bin/python3; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import matplotlib' >/dev/null 2>&1; then
      python=$candidate
      break
    fi
  done
  [ -n "$python" ] || die 1 "no python3 with matplotlib (tried python3 and /usr/bin/python3); run scripts/install_deps.sh"
fi

# The splitkv binary.
if [ -z "$splitkv" ]; then
  splitkv=build/cli/splitkv
  if [ ! -x "$splitkv" ]; then
    say "build/cli/splitkv not found; building a CPU-only splitkv in build-report/"
    generator=()
    if [ ! -f build-report/CMakeCache.txt ] && command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
    cmake -S . -B build-report "${generator[@]}" -DSPLITKV_ENABLE_CUDA=OFF -DSPLITKV_BUILD_TESTS=OFF >/dev/null
    cmake --build build-report --target splitkv --parallel "$(nproc 2>/dev/null || echo 2)" >/dev/null
    splitkv=build-report/cli/splitkv
  fi
fi
[ -x "$splitkv" ] || die 1 "$splitkv: not an executable splitkv"

mkdir -p "$out_dir"
stage=$(mktemp -d "$out_dir/.report-stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/report"

# `step NAME [--show] COMMAND...` runs one step, quietly unless it fails (or --show); a failure
# ends the script with the step's own exit code (2 = bad input) before anything reaches the
# output folder.
step() {
  local name=$1 show=0 code=0
  shift
  if [ "$1" = --show ]; then show=1; shift; fi
  say "$name"
  "$@" >"$stage/step.log" 2>&1 || code=$?
  if [ "$code" -ne 0 ]; then
    cat "$stage/step.log" >&2
    die "$code" "step \"$name\" failed (exit $code); nothing was written to $out_dir"
  fi
  if [ "$show" = 1 ]; then grep -v '^wrote ' "$stage/step.log" | sed 's/^/  /'; fi
}

# fit.md comes from fit; evaluate then rewrites regret.{csv,md} and regret_points.csv with the
# cross-validation and the validation set, so fit skips its own cross-validation (minutes of refits).
step "fit $full" "$splitkv" fit "$full" --out "$stage/num_splits.hpp" --report "$stage/report" --no-cross-validation
step "evaluate $full with $validation" "$splitkv" evaluate "$full" --validation "$validation" --out "$stage/report/regret.csv"
step "compare $full" --show "$splitkv" compare "$full" --out "$stage/paged_vs_contiguous.csv" --capacity-out "$stage/capacity_scenario.csv"
ragged=$results_dir/ragged.csv ragged_policies=$results_dir/ragged_policies.csv
if [ -f "$ragged" ] && [ -f "$ragged_policies" ]; then
  step "evaluate-ragged $ragged with $ragged_policies" "$splitkv" evaluate-ragged "$ragged" \
    --policies-csv "$ragged_policies" --out "$stage/report/ragged.csv"
fi
step "plots and summary.md ($python)" "$python" scripts/plot_report.py --results "$full" --validation "$validation" --peers "$peers" \
  --regret "$stage/report/regret.csv" --regret-points "$stage/report/regret_points.csv" \
  --paged-vs-contiguous "$stage/paged_vs_contiguous.csv" --capacity "$stage/capacity_scenario.csv" \
  --report-dir "$stage/report"

# Every step succeeded: move the outputs into place (renames within one file system).
rm -f "$stage/num_splits.hpp" "$stage/step.log"
mkdir -p "$out_dir/report"
for file in "$stage"/report/*; do mv -f "$file" "$out_dir/report/"; done
for file in "$stage"/*.csv; do mv -f "$file" "$out_dir/"; done
say "wrote $out_dir/paged_vs_contiguous.csv, $out_dir/capacity_scenario.csv and $out_dir/report/ ($(ls "$out_dir/report" | wc -l) files)"

# The committed header is fitted on the same CSV; say whether it is still what the CSV gives.
if "$splitkv" fit "$full" --check >"$stage/check.log" 2>&1; then
  say "$(head -n 1 "$stage/check.log")"
else
  say "warning: $(head -n 1 "$stage/check.log") (regenerate the header with splitkv fit $full)"
fi

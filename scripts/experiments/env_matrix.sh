#!/usr/bin/env bash
# One build, several settings of the library's measurement switches, alternated in one device call:
# the A/B (or A/B/C/...) for kernel changes that ship behind switches (kernels/NOTES.md, v26).
#
#   ENV_MATRIX='base SPLITKV_PREFETCH_TILES=0; head; late SPLITKV_LATE_TRIGGER=1' \
#     scripts/experiments/env_matrix.sh 'capacity_auto:2' 'anchors,head_dim,batch_sweep,context_sweep,capacity:1:base,head'
#
# ENV_MATRIX: settings separated by ';', each a label and VAR=value words; every variable named in
# any setting is unset in the others (the library's default). Each argument is
# GROUPS:ROUNDS[:LABELS]: scripts/bench_peers.py on those shape groups, every setting (or the
# comma-separated LABELS) once per round, in order, each run its own process. Then per argument:
# the regret of each run (capacity_auto_regret.py, capacity_auto only) or ours against the peers
# (peers_summary.py), and time / the first setting's time per contender (capacity_auto_ab.py).
# Last, the GPU tests and compute-sanitizer memcheck under the last setting named in
# ENV_MATRIX_TEST (default: the second setting) while ENV_MATRIX_DEADLINE (default 540) seconds
# into the call allow. Everything lands in $OUT/matrix.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?env_matrix.sh is for the device tool, which sets OUT}
matrix=${ENV_MATRIX:?set ENV_MATRIX to the settings}
deadline=${ENV_MATRIX_DEADLINE:-540}
[[ $# -ge 1 ]] || { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
log=$OUT/matrix
mkdir -p "$log"
finish() { tar czf "$OUT/matrix.tgz" -C "$OUT" matrix && rm -rf "$log"; }
trap finish EXIT

declare -A setting
labels=()
IFS=';' read -ra entries <<<"$matrix"
for entry in "${entries[@]}"; do
  read -ra words <<<"$entry"
  [[ ${#words[@]} -gt 0 ]] || continue
  labels+=("${words[0]}")
  setting[${words[0]}]="${words[*]:1}"
done
unset_all=()
for label in "${labels[@]}"; do
  for word in ${setting[$label]}; do unset_all+=(-u "${word%%=*}"); done
done
run_with() { local label=$1; shift; env "${unset_all[@]}" ${setting[$label]} "$@"; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPLITKV_CUDA_ARCHITECTURES=90a \
  >"$log/configure.log" 2>&1 || { tail -20 "$log/configure.log"; exit 1; }
if ! cmake --build build-device -j "$(nproc)" --target splitkv_gpu_tests splitkv_c splitkv_heuristics_c \
  >"$log/build.log" 2>&1; then
  grep -E "error" -A3 "$log/build.log" | head -30
  exit 1
fi
echo "env_matrix.sh: built at ${SECONDS}s; settings: ${labels[*]}"

status=0
for spec in "$@"; do
  IFS=':' read -r groups rounds chosen <<<"$spec"
  run_labels=("${labels[@]}")
  [[ -n "${chosen:-}" ]] && IFS=',' read -ra run_labels <<<"$chosen"
  tag=$(echo "${groups%%,*}" | tr -c 'a-z0-9_\n' '_')
  declare -A files=()
  for ((round = 1; round <= ${rounds:-1}; round++)); do
    for label in "${run_labels[@]}"; do
      name=${tag}_$label$([[ $round -gt 1 ]] && echo "$round")
      SPLITKV_GIT_SHA=${SPLITKV_GIT_SHA:-matrix-$label} PYTHONUNBUFFERED=1 run_with "$label" timeout -s INT 300 \
        python3 scripts/bench_peers.py --lib build-device/kernels/libsplitkv_c.so \
        --heuristic-lib build-device/heuristics/libsplitkv_heuristics_c.so --out "$log/$name.csv" --groups "$groups" \
        --flex-groups "" >"$log/$name.log" 2>&1
      rc=$?
      echo "env_matrix.sh: $name exit $rc at ${SECONDS}s"
      if [[ $rc -ne 0 ]]; then tail -3 "$log/$name.log"; status=1; continue; fi
      files[$label]="${files[$label]:+${files[$label]},}$log/$name.csv"
    done
  done
  first=${run_labels[0]}
  for label in "${run_labels[@]}"; do
    [[ -n "${files[$label]:-}" ]] || continue
    IFS=',' read -ra csvs <<<"${files[$label]}"
    if [[ $groups == *capacity_auto* ]]; then
      python3 scripts/experiments/capacity_auto_regret.py "${csvs[@]}" | grep -v "splitkv_heuristic:"
    else
      python3 scripts/experiments/peers_summary.py "${csvs[@]}"
    fi
    if [[ $label != "$first" && -n "${files[$first]:-}" ]]; then
      echo "-- $label / $first:"
      python3 scripts/experiments/capacity_auto_ab.py "${files[$first]}" "${files[$label]}" \
        | tee "$log/${tag}_${label}_over_$first.txt" | grep -E "splitkv_(heuristic|auto|best) |fixed@(1|8|16) "
    fi
  done
  unset files
done

test_label=${ENV_MATRIX_TEST:-${labels[1]:-${labels[0]}}}
tests=build-device/tests/splitkv_gpu_tests
left=$(( deadline - 60 - SECONDS ))
if (( left > 30 )); then
  run_with "$test_label" timeout "$left" "$tests" >"$log/gpu_tests.log" 2>&1
  rc=$?
  echo "env_matrix.sh: GPU tests ($test_label) exit $rc at ${SECONDS}s: $(grep -E '^\[  (PASSED|FAILED)' "$log/gpu_tests.log" | tr '\n' ' ')"
  [[ $rc -eq 0 ]] || status=1
fi
left=$(( deadline - SECONDS ))
if (( left > 20 )); then
  run_with "$test_label" timeout "$left" compute-sanitizer --tool memcheck --error-exitcode 9 "$tests" \
    --gtest_filter='DecodeAttentionGpu.SanitizerSubset:DecodeAttentionGpu.EdgeLengths:DecodeAttentionGpu.CudaGraphWithAutoSplitsServesChangingLengths' \
    >"$log/memcheck.log" 2>&1
  rc=$?
  echo "env_matrix.sh: memcheck ($test_label) exit $rc at ${SECONDS}s: $(grep -E 'ERROR SUMMARY' "$log/memcheck.log" | tail -1)"
  [[ $rc -eq 0 || $rc -eq 124 ]] || status=1   # 124: out of time, said above
fi
exit $status

#!/usr/bin/env bash
# One build, one environment switch, alternated: the A/B for a kernel change that ships with a
# measurement switch (kernels/NOTES.md, v26). Runs on the device (the device tool sets OUT):
#
#   ENV_AB_NAME=SPLITKV_PREFETCH_TILES ENV_AB_BASE=0 [ENV_AB_HEAD=value] \
#     scripts/experiments/env_ab.sh 'capacity_auto:2' 'anchors,head_dim,batch_sweep,context_sweep,capacity:1'
#
# Each argument is GROUPS:PAIRS: scripts/bench_peers.py on those shape groups, base then head,
# PAIRS times (base, head, base2, head2, ...), each run its own process. ENV_AB_HEAD unset runs the
# head with the switch unset (the library's default). Then, per argument, the regret of each run
# (capacity_auto_regret.py, for capacity_auto), ours against the peers (peers_summary.py), and
# head/base per contender (capacity_auto_ab.py); then the GPU tests and compute-sanitizer memcheck
# with the head's setting while ENV_AB_DEADLINE (default 540) seconds into the call allow.
# Everything lands in $OUT/ab.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?env_ab.sh is for the device tool, which sets OUT}
name=${ENV_AB_NAME:?set ENV_AB_NAME to the switch}
base_value=${ENV_AB_BASE:?set ENV_AB_BASE to the value of the base runs}
deadline=${ENV_AB_DEADLINE:-540}
[[ $# -ge 1 ]] || { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
log=$OUT/ab
mkdir -p "$log"
finish() { tar czf "$OUT/ab.tgz" -C "$OUT" ab && rm -rf "$log"; }
trap finish EXIT

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPLITKV_CUDA_ARCHITECTURES=90a \
  >"$log/configure.log" 2>&1 || { tail -20 "$log/configure.log"; exit 1; }
if ! cmake --build build-device -j "$(nproc)" --target splitkv_gpu_tests splitkv_c splitkv_heuristics_c \
  >"$log/build.log" 2>&1; then
  grep -E "error" -A3 "$log/build.log" | head -30
  exit 1
fi
echo "env_ab.sh: built at ${SECONDS}s"

# Runs with the head's setting: the switch at ENV_AB_HEAD, or unset.
with_head() { if [[ -n "${ENV_AB_HEAD+set}" ]]; then env "$name=$ENV_AB_HEAD" "$@"; else env -u "$name" "$@"; fi; }
status=0
for spec in "$@"; do
  groups=${spec%:*}
  pairs=${spec##*:}
  tag=$(echo "${groups%%,*}" | tr -c 'a-z0-9_\n' '_')
  bases=() heads=()
  for ((i = 1; i <= pairs; i++)); do
    suffix=$([[ $i -gt 1 ]] && echo "$i")
    for side in base head; do
      csv=$log/${tag}_$side$suffix.csv
      runner=(env "$name=$base_value")
      [[ $side == head ]] && runner=(with_head)
      SPLITKV_GIT_SHA=${SPLITKV_GIT_SHA:-ab-$side} PYTHONUNBUFFERED=1 "${runner[@]}" timeout -s INT 300 \
        python3 scripts/bench_peers.py --lib build-device/kernels/libsplitkv_c.so \
        --heuristic-lib build-device/heuristics/libsplitkv_heuristics_c.so --out "$csv" --groups "$groups" \
        --flex-groups "" >"$log/${tag}_$side$suffix.log" 2>&1
      rc=$?
      echo "env_ab.sh: $tag $side$suffix exit $rc at ${SECONDS}s"
      if [[ $rc -ne 0 ]]; then tail -3 "$log/${tag}_$side$suffix.log"; status=1; continue; fi
      [[ $side == base ]] && bases+=("$csv") || heads+=("$csv")
    done
  done
  [[ ${#bases[@]} -gt 0 && ${#bases[@]} -eq ${#heads[@]} ]] || continue
  if [[ $groups == *capacity_auto* ]]; then
    python3 scripts/experiments/capacity_auto_regret.py "${bases[@]}" "${heads[@]}"
  else
    for csv in "${bases[@]}" "${heads[@]}"; do python3 scripts/experiments/peers_summary.py "$csv"; done
  fi
  python3 scripts/experiments/capacity_auto_ab.py "$(IFS=,; echo "${bases[*]}")" "$(IFS=,; echo "${heads[*]}")" \
    | tee "$log/${tag}_ab.txt" | grep -E "splitkv_(heuristic|auto|best)|sdpa_cudnn|fixed@(1|8|16) "
done

tests=build-device/tests/splitkv_gpu_tests
left=$(( deadline - 60 - SECONDS ))
if (( left > 30 )); then
  with_head timeout "$left" "$tests" >"$log/gpu_tests.log" 2>&1
  rc=$?
  echo "env_ab.sh: GPU tests (head setting) exit $rc at ${SECONDS}s: $(grep -E '^\[  (PASSED|FAILED)' "$log/gpu_tests.log" | tr '\n' ' ')"
  [[ $rc -eq 0 ]] || status=1
fi
left=$(( deadline - SECONDS ))
if (( left > 20 )); then
  with_head timeout "$left" compute-sanitizer --tool memcheck --error-exitcode 9 "$tests" \
    --gtest_filter='DecodeAttentionGpu.SanitizerSubset:DecodeAttentionGpu.EdgeLengths:DecodeAttentionGpu.CudaGraphWithAutoSplitsServesChangingLengths' \
    >"$log/memcheck.log" 2>&1
  rc=$?
  echo "env_ab.sh: memcheck (head setting) exit $rc at ${SECONDS}s: $(grep -E 'ERROR SUMMARY' "$log/memcheck.log" | tail -1)"
  [[ $rc -eq 0 || $rc -eq 124 ]] || status=1   # 124: out of time, said above
fi
exit $status

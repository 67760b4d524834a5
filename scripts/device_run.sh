#!/usr/bin/env bash
# One call on the GPU machine: build, test, sanitize and measure. Logs and CSVs go under $OUT
# (the device tool brings that folder back); a short table is printed last.
#
#   scripts/device_run.sh [tests] [sanitize] [faults] [bench] [lookup] [probe] [sweep] [fit] [peers] [profile] [all]
#   (default: all; profile is never part of all)
#
# lookup measures the num_splits lookup on this machine's host CPU (the reference CI's
# check_lookup_cost.sh scales from) into results/h200/lookup_cost.csv with a sidecar.
#
# probe records which SM each CTA of a decode-shaped grid lands on (tuner/bench/cta_placement_probe.cu)
# into the logs (cta_placement.csv).
#
# Extra arguments for the bench go in SPLITKV_BENCH_ARGS; extra build targets in SPLITKV_EXTRA_TARGETS. A step name that matches none
# of the above (say `build`) only configures and builds. The sweep step runs the sweeps listed
# in SPLITKV_SWEEPS (entries name:grid[:kernels[:VAR=value]], default: sweeps/quick.json twice as
# quick_a/quick_b for run-to-run stability, then sweeps/full.json), each into
# results/h200/<name>.csv, and interrupts whatever still runs SPLITKV_SWEEP_DEADLINE seconds into
# the script (default 420; it stops cleanly and can be resumed: with SPLITKV_SWEEP_RESUME=1 a sweep
# whose CSV is already in the tree, brought back from an interrupted call, continues with --resume
# instead of starting over). fit regenerates the header from
# results/h200/full.csv; peers runs scripts/bench_peers.py until SPLITKV_DEADLINE (default 560).
# profile runs Nsight Compute (clocks left alone) on scripts/experiments/ncu_auto_vs_fixed.py: the
# split kernels at the host heuristic's count and with num_splits = auto, SpeedOfLight, warp state
# and source counters, raw metrics and the per-instruction SASS view as CSVs in logs.tgz (ncu/);
# SPLITKV_PROFILE_ARGS overrides the probe's arguments (default --shapes 1x512,16x512 --repeats 1).
# results/h200 and heuristics/generated come back as $OUT/results_h200.tgz. The device copy has no
# .git: pass the commit as SPLITKV_GIT_SHA for the sidecars.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-out}
LOG=$OUT/logs   # packed into $OUT/logs.tgz at exit: the device tool returns at most 8 files
mkdir -p "$OUT" "$LOG"
# Outputs that must come back even if a later step fails or the call runs out of time.
pack_results() {
  tar czf "$OUT/results_h200.tgz" results/h200 heuristics/generated 2>/dev/null
  tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$LOG"
}
trap pack_results EXIT
steps=" ${*:-all} "
wants() { [[ "$steps" == *" all "* || "$steps" == *" $1 "* ]]; }
status=0
summary=""   # one line per step, printed last
section() { printf '\n=== %s (%s) ===\n' "$1" "$(date -u +%H:%M:%S)"; }
# The sidecar of a step's own files: what ran, on which GPU and driver, from which commit, when.
write_step_sidecar() {  # path what started_utc exit_status
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | {
    IFS=, read -r gpu driver
    printf '{\n  "what": "%s",\n  "device": "%s",\n  "driver": "%s",\n  "git_sha": "%s",\n  "started_utc": "%s",\n  "finished_utc": "%s",\n  "exit_status": %d\n}\n' \
      "$2" "$gpu" "${driver# }" "${SPLITKV_GIT_SHA:-unknown}" "$3" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$4" >"$1"
  }
}

section "device"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv | tee "$LOG/nvidia_smi.csv"
nvcc --version | tail -1

section "build"
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPLITKV_CUDA_ARCHITECTURES=90a \
  >"$LOG/configure.log" 2>&1 || { tail -40 "$LOG/configure.log"; exit 1; }
targets="splitkv_gpu_tests splitkv_c splitkv splitkv_heuristics_c ${SPLITKV_EXTRA_TARGETS:-}"
wants bench && targets="$targets decode_kernel_bench"
wants lookup && targets="$targets heuristics_lookup_bench"
wants probe && targets="$targets cta_placement_probe"
if ! cmake --build build-device -j "$(nproc)" --target $targets >"$LOG/build.log" 2>&1; then
  grep -E "error|Error" -A3 "$LOG/build.log" | head -60
  exit 1
fi
grep -E "spill|stack frame" "$LOG/build.log" | sort | uniq -c | head -5

if wants tests; then
  section "gpu tests"
  build-device/tests/splitkv_gpu_tests 2>&1 | tee "$LOG/gpu_tests.log" | grep -E "^\[ (randomized|  PASSED|  FAILED|  SKIPPED) |FAILED|Failure|error" | head -40
  [[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
  summary+=$(printf '\n%-28s %s' "gpu tests" "$(grep -E '^\[  (PASSED|FAILED) ' "$LOG/gpu_tests.log" | tr '\n' ' ')")
fi

if wants sanitize; then
  # memcheck on every kernel path; racecheck and synccheck also on num_splits = auto, whose
  # persistent CTAs run several warp groups on named barriers. Each tool is bounded in time.
  base_tests='DecodeAttentionGpu.SanitizerSubset:DecodeAttentionGpu.EdgeLengths'
  auto_tests='DecodeAttentionGpu.AutoSplitsOnUniformAndNearlyUniformBatches:DecodeAttentionGpu.PerSequenceSplitsOnTheDevice'
  for tool in memcheck racecheck synccheck; do
    section "compute-sanitizer $tool"
    case $tool in
      memcheck) filter="$base_tests:$auto_tests:DecodeAttentionGpu.PerSequenceSplitsAcrossManySequences:DecodeAttentionGpu.CudaGraphWithAutoSplitsServesChangingLengths:DevicePolicies.*" ;;
      racecheck) filter="$base_tests:$auto_tests" ;;
      synccheck) filter="$auto_tests" ;;
    esac
    # The auto test covers head_dim 64/128/256 x two layouts x 8 batches; under racecheck that takes
    # longer than its limit, so racecheck takes head_dim 128, where the persistent kernel guesses.
    head_dims=""; [[ $tool == racecheck ]] && head_dims=128
    SPLITKV_TEST_AUTO_HEAD_DIM=$head_dims timeout 240 compute-sanitizer --tool "$tool" --error-exitcode 9 build-device/tests/splitkv_gpu_tests \
      --gtest_filter="$filter" >"$LOG/sanitizer_$tool.log" 2>&1
    rc=$?
    tail -3 "$LOG/sanitizer_$tool.log"
    summary+=$(printf '\n%-28s exit %d, %s' "compute-sanitizer $tool" "$rc" "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$LOG/sanitizer_$tool.log" | tail -1)")
    [[ $rc -eq 0 ]] || { echo "compute-sanitizer $tool: exit $rc"; status=1; }
  done
fi

if wants faults; then
  section "GPU fault cases (tests/gpu/fault_cases.sh: OOM, launch failure, sticky illegal address)"
  bash tests/gpu/fault_cases.sh build-device/cli/splitkv "$LOG/faults" >"$LOG/fault_cases.log" 2>&1
  rc=$?
  tail -24 "$LOG/fault_cases.log"
  summary+=$(printf '\n%-28s %s' "fault cases" "$(tail -1 "$LOG/fault_cases.log") (exit $rc)")
  [[ $rc -eq 0 ]] || status=1
fi

if wants bench; then
  section "kernel bench (CUDA graphs, rotating buffers)"
  build-device/tuner/decode_kernel_bench tuner/bench/h200_peer_anchors.csv --out "$LOG/decode_kernel_bench.csv" \
    ${SPLITKV_BENCH_ARGS:-} 2>&1 | tee "$LOG/bench.log"
  [[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
fi
if wants lookup; then
  section "num_splits lookup cost on this host's CPU"
  python3 scripts/lookup_cost.py measure build-device/heuristics/heuristics_lookup_bench \
    --out results/h200/lookup_cost.csv 2>&1 | tee "$LOG/lookup_cost.log"
  rc=${PIPESTATUS[0]}
  summary+=$(printf '\n%-28s %s' "lookup cost" "$(grep -E 'compiled_in_h200' "$LOG/lookup_cost.log" | head -1 | awk '{print $2 " ns min, " $3 " median"}') (exit $rc)")
  [[ $rc -eq 0 ]] || status=1
fi
if wants probe; then
  section "CTA placement probe"
  probe_csv=$LOG/cta_placement.csv
  started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  build-device/tuner/cta_placement_probe --out "$probe_csv" 2>&1 | tee "$LOG/probe.log"
  rc=${PIPESTATUS[0]}
  write_step_sidecar "${probe_csv%.csv}.json" "tuner/bench/cta_placement_probe --out $probe_csv" "$started" "$rc"
  summary+=$(printf '\n%-28s exit %d' "CTA placement probe" "$rc")
  [[ $rc -eq 0 ]] || status=1
fi

deadline=${SPLITKV_DEADLINE:-560}   # seconds into this script by which everything must be done

if wants sweep; then
  section "sweeps"
  mkdir -p results/h200
  splitkv=build-device/cli/splitkv
  $splitkv devices | tee "$LOG/devices.txt"
  # Each entry of SPLITKV_SWEEPS is name:grid[:kernels[:VAR=value]]; results/h200/<name>.csv.
  # Every sweep is interrupted with SIGINT (the sweep's own "stop after this point, keep every
  # row" signal) once SPLITKV_SWEEP_DEADLINE seconds of this script have passed; --resume
  # finishes it later.
  sweep_deadline=${SPLITKV_SWEEP_DEADLINE:-${SPLITKV_FULL_DEADLINE:-420}}
  for entry in ${SPLITKV_SWEEPS:-quick_a:sweeps/quick.json quick_b:sweeps/quick.json full:sweeps/full.json}; do
    IFS=: read -r name grid kernels env_assign <<<"$entry"
    left=$(( sweep_deadline - SECONDS ))
    if (( left < 5 )); then echo "$name: skipped, sweep deadline reached"; continue; fi
    mkdir -p "$(dirname "results/h200/$name.csv")" "$(dirname "$LOG/sweep_$name.log")"
    resume=()
    if [[ ${SPLITKV_SWEEP_RESUME:-0} == 1 && -s "results/h200/$name.csv" ]]; then
      resume=(--resume)   # a sweep an earlier call interrupted: its rows came back and travel with the tree
    else
      rm -f "results/h200/$name.csv" "results/h200/$name.json"
    fi
    start=$SECONDS
    env ${env_assign:-SPLITKV_NO_EXTRA_ENV=1} "$splitkv" sweep --grid "$grid" --kernel "${kernels:-splitkv}" \
      --out "results/h200/$name.csv" "${resume[@]}" 2>"$LOG/sweep_$name.log" &
    sweep_pid=$!
    # The watchdog's sleep must not hold this script's stdout: the device tool waits for every
    # writer of it to close, so a stray sleep would keep the call (and the GPU) busy until it ends.
    ( sleep "$left"; kill -INT "$sweep_pid" 2>/dev/null ) >/dev/null 2>&1 </dev/null &
    watchdog=$!
    wait "$sweep_pid"
    rc=$?
    pkill -P "$watchdog" sleep 2>/dev/null
    kill "$watchdog" 2>/dev/null
    line=$(printf '%-28s exit %3d  %4ds  %s' "$name" "$rc" $((SECONDS - start)) "$(tail -1 "$LOG/sweep_$name.log")")
    echo "$line"
    summary+=$'\n'"sweep $line"
  done
fi

if wants fit; then
  section "fit (CPU) and the heuristics C ABI"
  build-device/cli/splitkv fit results/h200/full.csv --out heuristics/generated/num_splits_h200.hpp \
    --report results/h200/report/ 2>&1 | tail -5
  cmake --build build-device --target splitkv_heuristics_c >>"$LOG/build.log" 2>&1 || echo "heuristics C ABI build failed"
fi

if wants peers; then
  section "peers (scripts/bench_peers.py)"
  peers_seconds=$(( deadline - SECONDS ))
  (( peers_seconds > 20 )) || peers_seconds=20
  echo "peers: at most ${peers_seconds}s"
  PYTHONUNBUFFERED=1 timeout -s INT "$peers_seconds" python3 scripts/bench_peers.py \
    --lib build-device/kernels/libsplitkv_c.so --heuristic-lib build-device/heuristics/libsplitkv_heuristics_c.so \
    --out results/h200/peers.csv --groups "${SPLITKV_PEER_GROUPS:-anchors,capacity,head_dim,batch_sweep,context_sweep}" \
    --flex-groups "${SPLITKV_FLEX_GROUPS:-}" 2>&1 | tee "$LOG/peers.log" | cut -c1-220
fi
if [[ "$steps" == *" profile "* ]]; then
  section "profile (Nsight Compute on the fixed-count and auto split kernels)"
  ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  mkdir -p "$LOG/ncu"
  # --clock-control none: Nsight Compute would otherwise lock the clocks to base for the run.
  timeout 300 "$ncu" --clock-control none --kernel-name regex:'decode_split|combine' --section SpeedOfLight \
    --section WarpStateStats --section SourceCounters -o "$LOG/ncu/profile" \
    python3 scripts/experiments/ncu_auto_vs_fixed.py --lib build-device/kernels/libsplitkv_c.so \
    --heuristic-lib build-device/heuristics/libsplitkv_heuristics_c.so ${SPLITKV_PROFILE_ARGS:---shapes 1x512,16x512 --repeats 1} \
    >"$LOG/ncu/ncu.log" 2>&1
  rc=$?
  "$ncu" --import "$LOG/ncu/profile.ncu-rep" --page raw --csv >"$LOG/ncu/raw.csv" 2>/dev/null
  "$ncu" --import "$LOG/ncu/profile.ncu-rep" --page source --csv --print-source sass >"$LOG/ncu/source.csv" 2>/dev/null
  "$ncu" --import "$LOG/ncu/profile.ncu-rep" --page details --csv 2>/dev/null |
    awk -F'","' '$13 == "Duration" {sub(/\(.*/, "", $5); v = $15; sub(/",?$/, "", v); print $5, $9, v " ns"}' | tee "$LOG/ncu/durations.txt"
  rm -f "$LOG/ncu/profile.ncu-rep"   # ~20 MB; the CSVs hold what it holds, and logs.tgz must stay under 16 MiB
  summary+=$(printf '\n%-28s exit %d (%s kernels)' "profile" "$rc" "$(wc -l <"$LOG/ncu/durations.txt")")
  [[ $rc -eq 0 ]] || status=1
fi
section "summary"
echo "${summary#$'\n'}"
exit $status

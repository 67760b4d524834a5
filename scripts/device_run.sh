#!/usr/bin/env bash
# One call on the GPU machine: build, test, sanitize and measure. Logs and CSVs go under $OUT
# (the device tool brings that folder back); a short table is printed last.
#
#   scripts/device_run.sh [tests] [sanitize] [faults] [bench] [lookup] [probe] [sweep] [fit] [peers] [profile]
#                         [multigpu] [flashinfer] [fa3] [fp8fit] [fp8peers] [fp8profile] [all]
#   (default: all; profile, multigpu, flashinfer, fa3, fp8fit, fp8peers and fp8profile are never part of all)
#
# fp8peers races our fp8 kernel against FlashAttention 3's (scripts/bench_fp8_peers.py) into
# results/h200/peers_fp8.csv and report/fp8_peers.md; the call must carry .whl/ (the fa3_fwd wheel).
# fp8profile runs Nsight Compute on the fp8 kernel (SPLITKV_FP8_PROFILE picks the shapes).
#
# multigpu times one grid twice: with `splitkv sweep --devices all` (--devices 0,0, two workers
# sharing the GPU, where only one is visible) and as one process on GPU 0, then prints both wall
# times, their ratio, whether both CSVs cover the same points, and the median ratio of the ok
# rows' times (multi / single). SPLITKV_MULTI_GRID picks the grid; the default is blocks 1 and 4 of
# sweeps/full.json (10,464 points), sized so that both runs together take under 5 minutes on one
# H200 (the whole full.json takes 5 min 21 s there). CSVs and logs go to logs/multigpu/.
# SPLITKV_BUILD_TARGETS replaces the default build targets (e.g. just splitkv for multigpu).
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
# SPLITKV_PROFILE_ARGS overrides the probe's arguments (default --shapes 1x512,16x512 --repeats 1; with
# --cudnn it also calls cuDNN's SDPA, profiled when SPLITKV_PROFILE_KERNELS, the kernel-name regex, matches it).
# flashinfer runs FlashInfer's kernel (tuner/FLASHINFER.md): its GPU test, memcheck, and
# sweeps/flashinfer_smoke.json, sweeps/flashinfer.json and its off-grid sweeps/flashinfer_validation.json
# into results/h200/ (and $OUT) until
# SPLITKV_FLASHINFER_DEADLINE seconds into the script (default 540); the call must carry .deps/flashinfer.
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
flashinfer_setting=()   # the flashinfer step needs FlashInfer: a missing .deps/flashinfer stops the configure
[[ "$steps" == *" flashinfer "* ]] && flashinfer_setting=(-DSPLITKV_WITH_FLASHINFER=ON)
# Elsewhere FlashInfer builds when its headers came with the call (the peers race uses it).
[[ -z "${flashinfer_setting[*]}" && -d .deps/flashinfer/include ]] && flashinfer_setting=(-DSPLITKV_WITH_FLASHINFER=AUTO)
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPLITKV_CUDA_ARCHITECTURES=90a "${flashinfer_setting[@]}" \
  >"$LOG/configure.log" 2>&1 || { tail -40 "$LOG/configure.log"; exit 1; }
grep -E "FlashInfer kernels" "$LOG/configure.log"
targets="${SPLITKV_BUILD_TARGETS:-splitkv_gpu_tests splitkv_c splitkv splitkv_heuristics_c} ${SPLITKV_EXTRA_TARGETS:-}"
wants bench && targets="$targets decode_kernel_bench"
wants lookup && targets="$targets heuristics_lookup_bench"
wants probe && targets="$targets cta_placement_probe"
[[ "$steps" == *" fp8profile "* ]] && targets="$targets decode_kernel_bench"
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

# Runs sweeps one after another. Each entry is name:grid[:kernels[:VAR=value]], swept into
# results/h200/<name>.csv. Every sweep is interrupted with SIGINT (the sweep's own "stop after this
# point, keep every row" signal) once `deadline` seconds of this script have passed; --resume
# finishes it later: with SPLITKV_SWEEP_RESUME=1 a sweep whose CSV is already in the tree (brought
# back from an interrupted call) continues instead of starting over.
run_sweeps() {  # deadline entry...
  local sweep_deadline=$1 entry name grid kernels env_assign left start rc line sweep_pid watchdog
  shift
  for entry in "$@"; do
    IFS=: read -r name grid kernels env_assign <<<"$entry"
    left=$(( sweep_deadline - SECONDS ))
    if (( left < 5 )); then echo "$name: skipped, sweep deadline reached"; summary+=$'\n'"sweep $name: skipped, deadline"; continue; fi
    mkdir -p "$(dirname "results/h200/$name.csv")" "$(dirname "$LOG/sweep_$name.log")"
    resume=()
    if [[ ${SPLITKV_SWEEP_RESUME:-0} == 1 && -s "results/h200/$name.csv" ]]; then
      resume=(--resume)   # a sweep an earlier call interrupted: its rows came back and travel with the tree
    else
      rm -f "results/h200/$name.csv" "results/h200/$name.json"
    fi
    start=$SECONDS
    env ${env_assign:-SPLITKV_NO_EXTRA_ENV=1} build-device/cli/splitkv sweep --grid "$grid" --kernel "${kernels:-splitkv}" \
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
}

if wants sweep; then
  section "sweeps"
  mkdir -p results/h200
  build-device/cli/splitkv devices | tee "$LOG/devices.txt"
  run_sweeps "${SPLITKV_SWEEP_DEADLINE:-${SPLITKV_FULL_DEADLINE:-420}}" \
    ${SPLITKV_SWEEPS:-quick_a:sweeps/quick.json quick_b:sweeps/quick.json full:sweeps/full.json}
fi

# FlashInfer's decode kernel (tuner/FLASHINFER.md): its GPU test, memcheck on the test's small
# subset, then the smoke grid and, once the smoke grid gave ok rows of both kernels, the full grid,
# interrupted SPLITKV_FLASHINFER_DEADLINE seconds into the script (default 540; resumable as above).
# Needs .deps/flashinfer carried with the tree (scripts/fetch_flashinfer.sh; nothing is fetched
# here) and the configure then insists on it. The CSVs and sidecars are copied to $OUT as well.
if [[ "$steps" == *" flashinfer "* ]]; then
  section "FlashInfer: gpu test"
  build-device/tests/splitkv_gpu_tests --gtest_filter='FlashinferDecodeGpu.*' 2>&1 | tee "$LOG/flashinfer_gpu_test.log" |
    grep -E "^\[ (flashinfer|  PASSED|  FAILED|  SKIPPED) |FAILED|Failure|Skipped|error" | head -40
  rc=${PIPESTATUS[0]}
  summary+=$(printf '\n%-28s exit %d, %s' "flashinfer gpu test" "$rc" "$(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$LOG/flashinfer_gpu_test.log" | tr '\n' ' ')")
  [[ $rc -eq 0 ]] || status=1

  section "FlashInfer: compute-sanitizer memcheck"
  timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 build-device/tests/splitkv_gpu_tests \
    --gtest_filter='FlashinferDecodeGpu.SanitizerSubset:FlashinferDecodeGpu.CallsCapturedInTheSweepsCudaGraph' \
    >"$LOG/sanitizer_memcheck_flashinfer.log" 2>&1
  rc=$?
  tail -3 "$LOG/sanitizer_memcheck_flashinfer.log"
  summary+=$(printf '\n%-28s exit %d, %s' "flashinfer memcheck" "$rc" "$(grep -E 'ERROR SUMMARY' "$LOG/sanitizer_memcheck_flashinfer.log" | tail -1)")
  [[ $rc -eq 0 ]] || { echo "compute-sanitizer memcheck (flashinfer): exit $rc"; status=1; }

  section "FlashInfer: sweeps"
  mkdir -p results/h200
  build-device/cli/splitkv devices | tee "$LOG/devices.txt"
  flashinfer_kernels=flashinfer,flashinfer_heuristic
  flashinfer_deadline=${SPLITKV_FLASHINFER_DEADLINE:-540}
  run_sweeps "$flashinfer_deadline" "flashinfer_smoke:sweeps/flashinfer_smoke.json:$flashinfer_kernels"
  cat results/h200/flashinfer_smoke.csv 2>/dev/null | cut -c1-200
  if grep -q '^[^,]*,flashinfer,.*,ok,' results/h200/flashinfer_smoke.csv 2>/dev/null &&
     grep -q '^[^,]*,flashinfer_heuristic,.*,ok,' results/h200/flashinfer_smoke.csv; then
    run_sweeps "$flashinfer_deadline" "flashinfer:sweeps/flashinfer.json:$flashinfer_kernels" \
      "flashinfer_validation:sweeps/flashinfer_validation.json:$flashinfer_kernels"
  else
    echo "flashinfer: full grid not started, the smoke grid has no ok row of both kernels"
    summary+=$'\n'"sweep flashinfer: not started (smoke grid not ok)"
    status=1
  fi
  # The split count FlashInfer's plan picked for each shape: the CSV has no column for it.
  cat "$LOG"/sweep_flashinfer_smoke.log "$LOG"/sweep_flashinfer.log 2>/dev/null |
    grep '^flashinfer_heuristic plan: ' >"$LOG/flashinfer_heuristic_plans.txt"
  head -3 "$LOG/flashinfer_heuristic_plans.txt"
  for file in flashinfer_smoke.csv flashinfer_smoke.json flashinfer.csv flashinfer.json flashinfer_validation.csv \
    flashinfer_validation.json; do
    [[ -f "results/h200/$file" ]] && cp "results/h200/$file" "$OUT/"
  done
fi

# FlashAttention 3's kernel (scripts/fa3_sweep.py, the fa3_fwd wheel): the grids in
# SPLITKV_FA3_SWEEPS (name:grid, default fa3 and fa3_validation) into results/h200/<name>.csv,
# each resumed where a CSV came back from an earlier call, until SPLITKV_FA3_DEADLINE seconds into
# the script (default 540). The call must carry .whl/fa3_fwd-0.0.3-cp39-abi3-manylinux_2_24_x86_64.whl.
if [[ "$steps" == *" fa3 "* ]]; then
  section "FA3: sweeps (scripts/fa3_sweep.py)"
  rm -rf /tmp/fa3 && python3 -m zipfile -e .whl/fa3_fwd-*.whl /tmp/fa3 || { echo "fa3: no wheel under .whl/"; status=1; }
  fa3_deadline_at=$(( $(date +%s) + ${SPLITKV_FA3_DEADLINE:-540} - SECONDS ))
  for entry in ${SPLITKV_FA3_SWEEPS:-fa3:sweeps/fa3.json fa3_validation:sweeps/fa3_validation.json}; do
    name=${entry%%:*}
    grid=${entry#*:}
    resume=()
    [[ -s "results/h200/$name.csv" ]] && resume=(--resume)
    start=$SECONDS
    python3 scripts/fa3_sweep.py --grid "$grid" --out "results/h200/$name.csv" "${resume[@]}" --fa3-path /tmp/fa3 \
      --splitkv build-device/cli/splitkv --deadline-at "$fa3_deadline_at" >"$LOG/fa3_$name.log" 2>&1
    rc=$?
    line=$(printf '%-28s exit %3d  %4ds  %s' "fa3 $name" "$rc" $((SECONDS - start)) "$(tail -1 "$LOG/fa3_$name.log")")
    echo "$line"
    summary+=$'\n'"$line"
    [[ $rc -eq 0 || $rc -eq 75 ]] || status=1
  done
fi

if wants fit; then
  section "fit (CPU) and the heuristics C ABI"
  build-device/cli/splitkv fit results/h200/full.csv --out heuristics/generated/num_splits_h200.hpp \
    --report results/h200/report/ 2>&1 | tail -5
  cmake --build build-device --target splitkv_heuristics_c >>"$LOG/build.log" 2>&1 || echo "heuristics C ABI build failed"
fi

# fp8fit refits the fp8 table from results/h200/fp8.csv (a sweep earlier in the call may have
# just rewritten it) and rebuilds the libraries that compile it in, so a later fp8peers races it.
if [[ "$steps" == *" fp8fit "* ]]; then
  section "fp8 fit (CPU) and the libraries that compile the table in"
  build-device/cli/splitkv fit results/h200/fp8.csv --kv-dtype fp8_e4m3 \
    --out heuristics/generated/num_splits_fp8_h200.hpp 2>&1 | tail -5
  cmake --build build-device --target splitkv_heuristics_c splitkv >>"$LOG/build.log" 2>&1 ||
    { echo "fp8fit: rebuilding with the new table failed"; status=1; }
fi

if wants peers; then
  section "peers (scripts/bench_peers.py)"
  peers_seconds=$(( deadline - SECONDS ))
  (( peers_seconds > 20 )) || peers_seconds=20
  echo "peers: at most ${peers_seconds}s"
  # FA3 and FlashInfer join the race when the call carries the FA3 wheel and FlashInfer's headers.
  peer_kernel_args=()
  if ls .whl/fa3_fwd-*.whl >/dev/null 2>&1; then
    rm -rf /tmp/fa3 && python3 -m zipfile -e .whl/fa3_fwd-*.whl /tmp/fa3 && peer_kernel_args+=(--fa3-path /tmp/fa3)
  fi
  grep -q "FlashInfer kernels: flashinfer" "$LOG/configure.log" && peer_kernel_args+=(--splitkv build-device/cli/splitkv)
  PYTHONUNBUFFERED=1 timeout -s INT "$peers_seconds" python3 scripts/bench_peers.py \
    --lib build-device/kernels/libsplitkv_c.so --heuristic-lib build-device/heuristics/libsplitkv_heuristics_c.so \
    --out results/h200/peers.csv --groups "${SPLITKV_PEER_GROUPS:-anchors,capacity,head_dim,batch_sweep,context_sweep}" \
    --flex-groups "${SPLITKV_FLEX_GROUPS:-}" "${peer_kernel_args[@]}" 2>&1 | tee "$LOG/peers.log" | cut -c1-220
fi
if [[ "$steps" == *" fp8peers "* ]]; then
  section "fp8 peers (scripts/bench_fp8_peers.py: our fp8 kernel against FlashAttention 3's)"
  if ls .whl/fa3_fwd-*.whl >/dev/null 2>&1 && rm -rf /tmp/fa3 && python3 -m zipfile -e .whl/fa3_fwd-*.whl /tmp/fa3; then
    PYTHONUNBUFFERED=1 timeout -s INT "${SPLITKV_FP8_PEERS_SECONDS:-300}" python3 scripts/bench_fp8_peers.py \
      --lib build-device/kernels/libsplitkv_c.so --heuristic-lib build-device/heuristics/libsplitkv_heuristics_c.so \
      --fa3-path /tmp/fa3 --out results/h200/peers_fp8.csv 2>&1 | tee "$LOG/peers_fp8.log" | cut -c1-220
    rc=${PIPESTATUS[0]}
    python3 scripts/bench_fp8_peers.py --summarize results/h200/peers_fp8.csv | tail -3
    summary+=$(printf '\n%-28s exit %d, %s' "fp8 peers" "$rc" "$(grep -E '^Shapes both ran' results/h200/report/fp8_peers.md | cut -c1-160)")
    [[ $rc -eq 0 ]] || status=1
  else
    echo "fp8peers: the call must carry .whl/ with the fa3_fwd wheel"; status=1
  fi
fi
if [[ "$steps" == *" fp8profile "* ]]; then
  # Nsight Compute on decode_kernel_bench's fp8 kernel, one launch per (shape, layout) of
  # SPLITKV_FP8_PROFILE (entries BxL:splits:layout, d128 32/8), clocks left alone.
  section "fp8 profile (Nsight Compute on decode_kernel_bench)"
  ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  mkdir -p "$LOG/ncu"
  for entry in ${SPLITKV_FP8_PROFILE:-16x65536:4:contiguous 64x16384:1:contiguous 64x16384:1:paged16}; do
    IFS=: read -r shape splits layout <<<"$entry"
    report="$LOG/ncu/fp8_${entry//:/_}"
    printf 'batch,num_heads,num_kv_heads,context_len,fa2_sdpa_us,cudnn_sdpa_us,cudnn_tbps\n%s,32,8,%s,0,0,0\n' \
      "${shape%x*}" "${shape#*x}" >"$LOG/ncu/$shape.csv"
    timeout 200 "$ncu" --clock-control none --kernel-name regex:decode_split --launch-skip 20 --launch-count 1 \
      --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis --section InstructionStats --section SchedulerStats \
      --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section SourceCounters -o "$report" \
      build-device/tuner/decode_kernel_bench "$LOG/ncu/$shape.csv" --splits "$splits" --layouts "$layout" \
      --kv-dtypes fp8_e4m3 --out "$LOG/ncu/bench_$shape.csv" >"$report.log" 2>&1
    "$ncu" --import "$report.ncu-rep" --page details --csv >"${report}_details.csv" 2>/dev/null
    "$ncu" --import "$report.ncu-rep" --page raw --csv >"${report}_raw.csv" 2>/dev/null
    "$ncu" --import "$report.ncu-rep" --page source --csv --print-source sass >"${report}_sass.csv" 2>/dev/null
    python3 - "${report}_details.csv" "$entry" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]))) if open(sys.argv[1]).read(1) else []
keep = ("Duration", "DRAM Throughput", "Memory Throughput", "Achieved Occupancy", "No Eligible", "Issued Warp",
        "Warp Cycles Per Issued Instruction", "Executed Ipc Active", "Registers Per Thread", "Theoretical Occupancy")
print(sys.argv[2], "; ".join(f"{r['Metric Name']}={r['Metric Value']} {r['Metric Unit']}" for r in rows
                             if r.get("Metric Name") in keep))
PY
  done
fi
if [[ "$steps" == *" profile "* ]]; then
  section "profile (Nsight Compute on the fixed-count and auto split kernels)"
  ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  mkdir -p "$LOG/ncu"
  # --clock-control none: Nsight Compute would otherwise lock the clocks to base for the run.
  timeout 300 "$ncu" --clock-control none --kernel-name regex:"${SPLITKV_PROFILE_KERNELS:-decode_split|combine}" \
    --section SpeedOfLight --section WarpStateStats --section SourceCounters --section MemoryWorkloadAnalysis \
    --section Occupancy --section LaunchStats -o "$LOG/ncu/profile" \
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
if [[ "$steps" == *" multigpu "* ]]; then
  section "multi-GPU sweep (--devices) against one GPU"
  mdir=$LOG/multigpu
  mkdir -p "$mdir"
  gpus=$(nvidia-smi -L | grep -c '^GPU ')
  if (( gpus >= 2 )); then devices=all; else devices=0,0; fi
  grid=${SPLITKV_MULTI_GRID:-}
  if [[ -z "$grid" ]]; then
    grid=$mdir/full_blocks_1_4.json
    python3 -c 'import json, sys
g = json.load(open("sweeps/full.json"))
g["name"] = "full_blocks_1_4"
g["blocks"] = [g["blocks"][1], g["blocks"][4]]
json.dump(g, open(sys.argv[1], "w"), indent=1)' "$grid"
  fi
  splitkv=build-device/cli/splitkv
  $splitkv sweep --grid "$grid" --dry-run --devices "$devices" 2>&1 | grep -E '^(points|worker)' | tee "$mdir/plan.txt"
  start=$SECONDS
  $splitkv sweep --grid "$grid" --out "$mdir/multi.csv" --devices "$devices" 2>"$mdir/multi.log"
  rc_multi=$?
  multi_s=$((SECONDS - start))
  grep -v '^\[' "$mdir/multi.log" | tail -4
  start=$SECONDS
  $splitkv sweep --grid "$grid" --out "$mdir/single.csv" --device 0 2>"$mdir/single.log"
  rc_single=$?
  single_s=$((SECONDS - start))
  tail -1 "$mdir/single.log"
  python3 - "$mdir/multi.csv" "$mdir/single.csv" "$devices" "$multi_s" "$single_s" <<'PY' | tee "$mdir/comparison.txt"
import csv, statistics, sys
multi_path, single_path, devices, multi_s, single_s = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
def load(path):
    try:
        with open(path, newline="") as handle:
            rows = list(csv.DictReader(handle))
    except OSError:
        return {}
    key = lambda r: tuple(r[c] for c in ("kernel", "layout", "page_size", "dtype", "batch", "num_heads", "num_kv_heads",
                                         "head_dim", "context_len", "cache_capacity", "length_distribution", "num_splits"))
    return {key(r): r for r in rows if r["status"] != "throttled"}
multi, single = load(multi_path), load(single_path)
both_ok = [k for k in multi if k in single and multi[k]["status"] == "ok" and single[k]["status"] == "ok"]
ratios = sorted(float(multi[k]["time_us_median"]) / float(single[k]["time_us_median"]) for k in both_ok)
gpus = sorted({r.get("gpu_uuid", "") for r in multi.values()})
print(f"--devices {devices}: {multi_s}s, {len(multi)} points on {len(gpus)} GPU(s); one GPU: {single_s}s, {len(single)} points")
print(f"wall time one GPU / --devices {devices}: {single_s / max(multi_s, 1):.2f}x")
print(f"coverage: {'equal' if set(multi) == set(single) else 'DIFFERENT'} ({len(set(multi) - set(single))} only in --devices, "
      f"{len(set(single) - set(multi))} only in one GPU)")
if ratios:
    q = lambda f: ratios[min(len(ratios) - 1, int(f * len(ratios)))]
    print(f"ok in both: {len(ratios)} points; time --devices / one GPU: median {statistics.median(ratios):.4f}, "
          f"p10 {q(0.1):.4f}, p90 {q(0.9):.4f}")
PY
  summary+=$(printf '\n%-28s exit %d/%d, %ds vs %ds one GPU; %s' "multi-GPU (--devices $devices)" "$rc_multi" \
    "$rc_single" "$multi_s" "$single_s" "$(grep -E '^ok in both' "$mdir/comparison.txt" | cut -d';' -f2)")
  [[ $rc_multi -eq 0 && $rc_single -eq 0 ]] || status=1
fi
section "summary"
echo "${summary#$'\n'}"
exit $status

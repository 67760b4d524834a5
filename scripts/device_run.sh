#!/usr/bin/env bash
# One call on the GPU machine: build, test, sanitize and measure. Logs and CSVs go under $OUT
# (the device tool brings that folder back); a short table is printed last.
#
#   scripts/device_run.sh [build] [tests] [sanitize] [bench] [sweep] [all]    (default: all)
#
# Extra arguments for the bench can be passed in SPLITKV_BENCH_ARGS. The sweep step runs
# sweeps/quick.json (both kernels, exhaustive and pruned), sweeps/validation.json, then
# sweeps/full.json until SPLITKV_DEADLINE seconds into the script (default 540), resuming results/h200/full.csv
# when it exists; it leaves everything in $OUT/results_h200.tgz. The device copy has no .git, so
# pass the commit as SPLITKV_GIT_SHA for the sidecars.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
steps=" ${*:-all} "
wants() { [[ "$steps" == *" all "* || "$steps" == *" $1 "* ]]; }
status=0
section() { printf '\n=== %s (%s) ===\n' "$1" "$(date -u +%H:%M:%S)"; }

section "device"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv | tee "$OUT/nvidia_smi.csv"
nvcc --version | tail -1

section "build"
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPLITKV_CUDA_ARCHITECTURES=90a \
  >"$OUT/configure.log" 2>&1 || { tail -40 "$OUT/configure.log"; exit 1; }
targets="splitkv_gpu_tests decode_kernel_bench splitkv_c splitkv ${SPLITKV_EXTRA_TARGETS:-}"
if ! cmake --build build-device -j "$(nproc)" --target $targets >"$OUT/build.log" 2>&1; then
  grep -E "error|Error" -A3 "$OUT/build.log" | head -60
  exit 1
fi
grep -E "spill|stack frame" "$OUT/build.log" | sort | uniq -c | head -5

if wants tests; then
  section "gpu tests"
  build-device/tests/splitkv_gpu_tests 2>&1 | tee "$OUT/gpu_tests.log" | grep -E "^\[ (randomized|  PASSED|  FAILED|  SKIPPED) |FAILED|Failure|error" | head -40
  [[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
fi

if wants sanitize; then
  for tool in memcheck racecheck; do
    section "compute-sanitizer $tool"
    compute-sanitizer --tool "$tool" --error-exitcode 9 build-device/tests/splitkv_gpu_tests \
      --gtest_filter='DecodeAttentionGpu.SanitizerSubset:DecodeAttentionGpu.EdgeLengths' >"$OUT/sanitizer_$tool.log" 2>&1
    rc=$?
    tail -3 "$OUT/sanitizer_$tool.log"
    [[ $rc -eq 0 ]] || { echo "compute-sanitizer $tool: exit $rc"; status=1; }
  done
fi

if wants bench; then
  section "kernel bench (CUDA graphs, rotating buffers)"
  build-device/tuner/decode_kernel_bench tuner/bench/h200_peer_anchors.csv --out "$OUT/decode_kernel_bench.csv" \
    ${SPLITKV_BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log"
  [[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
fi
if wants sweep; then
  section "sweeps"
  sweep_dir=build-device/results/h200
  rm -rf "$sweep_dir" && mkdir -p "$sweep_dir"
  splitkv=build-device/cli/splitkv
  $splitkv devices | tee "$OUT/devices.txt"
  run_sweep() {  # name, then sweep arguments; a failing sweep is reported, the others still run
    local name=$1
    shift
    local start=$SECONDS
    "$splitkv" sweep --out "$sweep_dir/$name.csv" "$@" 2>"$sweep_dir/$name.log"
    local rc=$?
    printf '%-16s exit %3d  %4ds  %s\n' "$name" "$rc" $((SECONDS - start)) "$(tail -1 "$sweep_dir/$name.log")"
  }
  run_sweep quick --grid sweeps/quick.json --kernel splitkv,unpacked_gqa
  run_sweep quick_pruned --grid sweeps/quick.json --search pruned
  run_sweep validation --grid sweeps/validation.json --search pruned
  if [[ -f results/h200/full.csv ]]; then
    cp results/h200/full.csv results/h200/full.json "$sweep_dir/" 2>/dev/null
    full_args=(--resume)
  else
    full_args=()
  fi
  # SIGINT is the sweep's own "stop after this point, keep every row" signal.
  run_sweep full --grid sweeps/full.json --search pruned "${full_args[@]}" &
  full_pid=$!
  # Stop the full sweep so the whole script ends by SPLITKV_DEADLINE seconds (the device call's limit).
  full_seconds=$(( ${SPLITKV_DEADLINE:-540} - SECONDS ))
  (( full_seconds > 10 )) || full_seconds=10
  echo "full sweep: at most ${full_seconds}s"
  ( sleep "$full_seconds"; pkill -INT -f "sweeps/full.json" ) &
  watchdog=$!
  wait $full_pid
  kill $watchdog 2>/dev/null
  tar czf "$OUT/results_h200.tgz" -C build-device/results h200
  ls -la "$sweep_dir"
fi
exit $status

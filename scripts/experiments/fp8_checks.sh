#!/usr/bin/env bash
# The fp8 (e4m3) cache's checks in one GPU call: build, the fp8 and bf16 GPU tests, memcheck on
# the every-code test and a random subset, the fp8-vs-bf16 bandwidth bench, and (FP8_NCU=1) an
# Nsight Compute profile of one bandwidth-bound shape. Logs and CSVs under $OUT (default ./fp8-out).
#   scripts/experiments/fp8_checks.sh [build-dir]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/fp8-out}
build=${1:-build-fp8}
mkdir -p "$OUT"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPLITKV_CUDA_ARCHITECTURES=90a \
  -DSPLITKV_WITH_FLASHINFER=OFF >"$OUT/fp8_configure.log" 2>&1 || { tail -20 "$OUT/fp8_configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc)" --target splitkv_gpu_tests decode_kernel_bench >"$OUT/fp8_build.log" 2>&1 ||
  { grep -E "error" -A3 "$OUT/fp8_build.log" | head -40; exit 1; }
grep -E "spill" "$OUT/fp8_build.log" | sort | uniq -c | head -5
summary=""
"$build/tests/splitkv_gpu_tests" --gtest_filter='Fp8*:DecodeAttentionGpu.*' >"$OUT/fp8_gpu_tests.log" 2>&1
rc=$?
grep -E "^\[ fp8 \]|^\[  (PASSED|FAILED) |Failure" "$OUT/fp8_gpu_tests.log" | head -20
summary+=$(printf '\n%-24s exit %d, %s' "gpu tests" "$rc" "$(grep -E '^\[ fp8 \]' "$OUT/fp8_gpu_tests.log" | cut -c1-90)")
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 "$build/tests/splitkv_gpu_tests" \
  --gtest_filter='Fp8DecodeAttentionGpu.EveryCode*' >"$OUT/fp8_memcheck.log" 2>&1
rc=$?
summary+=$(printf '\n%-24s exit %d, %s' "memcheck" "$rc" "$(grep 'ERROR SUMMARY' "$OUT/fp8_memcheck.log" | tail -1)")
"$build/tuner/decode_kernel_bench" tuner/bench/fp8_bandwidth_shapes.csv --out "$OUT/fp8_vs_bf16.csv" \
  --splits 1,2,4,8 --layouts contiguous,paged16 --kv-dtypes bf16,fp8_e4m3 >"$OUT/fp8_bench.log" 2>&1
rc=$?
summary+=$(printf '\n%-24s exit %d' "bench" "$rc")
if [[ ${FP8_NCU:-0} == 1 ]]; then
  timeout 200 ncu --clock-control none --kernel-name regex:decode_split --launch-count 4 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section MemoryWorkloadAnalysis \
    "$build/tuner/decode_kernel_bench" tuner/bench/fp8_bandwidth_shapes.csv --splits 2 --layouts contiguous \
    --kv-dtypes fp8_e4m3 >"$OUT/fp8_ncu.log" 2>&1
  summary+=$(printf '\n%-24s exit %d' "ncu" "$?")
fi
echo "=== fp8 bench ==="
grep -vE '^\s*$' "$OUT/fp8_bench.log" | tail -30
echo "=== fp8 summary ==="
echo "${summary#$'\n'}"

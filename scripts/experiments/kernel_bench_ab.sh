#!/usr/bin/env bash
# Builds of the kernels timed by decode_kernel_bench in one device call, alternated base, head,
# base, head on the same shapes, then the head build's GPU tests and memcheck: how a kernel change
# that targets streaming speed (rather than the capacity scenario, capacity_ab.sh) is kept or dropped.
#
#   scripts/experiments/kernel_bench_ab.sh prepare BASE_REV [HEAD_REV]   # build-archive/{base,head}.tar
#   scripts/experiments/kernel_bench_ab.sh run                           # on the device, carry ["build-archive"]
#
# KB_TREES (default "base head") names the archives to time, base first: a third variant is
# `git archive REV -o build-archive/NAME.tar` and KB_TREES="base head NAME"; each is compared with base.
#
# KB_SHAPES (default tuner/bench/fp8_bandwidth_shapes.csv) and KB_ARGS (default --splits 1,2,4,8
# --layouts contiguous,paged16 --kv-dtypes bf16,fp8_e4m3) go to decode_kernel_bench; KB_TEST_FILTER
# picks the head's GPU tests (default the fp8 and decode tests); KB_DEADLINE (default 420) bounds the
# call. Prints, per (layout, kv dtype, shape), the best time of each build and head/base, and the
# geomean per (layout, kv dtype); writes $OUT/kb.tgz (CSVs, logs). The head build stays in
# /tmp/kernel_bench_ab/head/build-device for a following call while the machine is warm.
set -uo pipefail
cd "$(dirname "$0")/../.."
archive=build-archive
case "${1:-}" in
  prepare)
    # The same archives as capacity_ab.sh's.
    exec bash "$(dirname "$0")/capacity_ab.sh" "$@"
    ;;
  run)
    OUT=${OUT:?run is for the device tool, which sets OUT}
    deadline=${KB_DEADLINE:-420}
    work=/tmp/kernel_bench_ab
    mkdir -p "$OUT/kb"
    read -ra trees <<<"${KB_TREES:-base head}"
    for tree in "${trees[@]}"; do
      [[ -f "$archive/$tree.tar" ]] || { echo "kernel_bench_ab.sh: $archive/$tree.tar missing: run prepare first" >&2; exit 2; }
      # A warm machine keeps the builds: unpack over them so ninja rebuilds only what changed.
      mkdir -p "$work/$tree" && tar xf "$archive/$tree.tar" -C "$work/$tree" || exit 2
      cmake -S "$work/$tree" -B "$work/$tree/build-device" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DSPLITKV_CUDA_ARCHITECTURES=90a -DSPLITKV_WITH_FLASHINFER=OFF >"$OUT/kb/configure_$tree.log" 2>&1 ||
        { tail -20 "$OUT/kb/configure_$tree.log"; exit 1; }
    done
    # Every tree builds the bench; head also its tests and libraries. They share the cores.
    for tree in "${trees[@]}"; do
      [[ $tree == head ]] && continue
      (cmake --build "$work/$tree/build-device" -j 6 --target decode_kernel_bench >"$OUT/kb/build_$tree.log" 2>&1
       echo $? >"$work/${tree}_rc") &
    done
    cmake --build "$work/head/build-device" -j 10 --target decode_kernel_bench splitkv_gpu_tests splitkv_c \
      splitkv_heuristics_c splitkv >"$OUT/kb/build_head.log" 2>&1
    echo $? >"$work/head_rc"
    wait
    for tree in "${trees[@]}"; do
      if [[ "$(cat "$work/${tree}_rc")" != 0 ]]; then
        grep -hE "error" -A3 "$OUT"/kb/build_*.log | head -30
        tar czf "$OUT/kb.tgz" -C "$OUT" kb
        exit 1
      fi
    done
    grep -hE "spill" "$OUT"/kb/build_head.log | sort | uniq -c | head -3
    echo "kernel_bench_ab.sh: built at ${SECONDS}s"
    status=0
    shapes=${KB_SHAPES:-tuner/bench/fp8_bandwidth_shapes.csv}
    read -ra bench_args <<<"${KB_ARGS:---splits 1,2,4,8 --layouts contiguous,paged16 --kv-dtypes bf16,fp8_e4m3}"
    # Every tree once, then every tree again: NAME.csv and NAME2.csv.
    for pass in "" 2; do for tree in "${trees[@]}"; do
      run=$tree$pass
      timeout $(( deadline - 60 - SECONDS > 30 ? deadline - 60 - SECONDS : 30 )) \
        "$work/$tree/build-device/tuner/decode_kernel_bench" "$work/head/$shapes" --out "$OUT/kb/$run.csv" "${bench_args[@]}" \
        >"$OUT/kb/$run.log" 2>&1
      rc=$?
      echo "kernel_bench_ab.sh: $run exit $rc at ${SECONDS}s"
      [[ $rc -eq 0 ]] || { tail -3 "$OUT/kb/$run.log"; status=1; }
    done; done
    python3 scripts/experiments/kernel_bench_summary.py ab "$OUT/kb" "${trees[@]}"
    tests=$work/head/build-device/tests/splitkv_gpu_tests
    left=$(( deadline - 40 - SECONDS ))
    if (( left > 30 )); then
      timeout "$left" "$tests" --gtest_filter="${KB_TEST_FILTER:-Fp8*:DecodeAttentionGpu.*}" >"$OUT/kb/gpu_tests.log" 2>&1
      rc=$?
      echo "kernel_bench_ab.sh: head GPU tests exit $rc at ${SECONDS}s: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/kb/gpu_tests.log" | tr '\n' ' ')"
      grep -E "^\[ fp8 \]|^\[ randomized" "$OUT/kb/gpu_tests.log" | cut -c1-160 | head -4
      [[ $rc -eq 0 ]] || status=1
    fi
    left=$(( deadline - SECONDS ))
    if (( left > 20 )); then
      timeout "$left" compute-sanitizer --tool memcheck --error-exitcode 9 "$tests" \
        --gtest_filter='Fp8DecodeAttentionGpu.EveryCode*:DecodeAttentionGpu.SanitizerSubset' >"$OUT/kb/memcheck.log" 2>&1
      rc=$?
      echo "kernel_bench_ab.sh: head memcheck exit $rc at ${SECONDS}s: $(grep -E 'ERROR SUMMARY' "$OUT/kb/memcheck.log" | tail -1)"
      [[ $rc -eq 0 || $rc -eq 124 ]] || status=1
    fi
    tar czf "$OUT/kb.tgz" -C "$OUT" kb
    exit $status
    ;;
  *)
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac

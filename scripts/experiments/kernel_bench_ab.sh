#!/usr/bin/env bash
# Two builds of the kernels timed by decode_kernel_bench in one device call, alternated base, head,
# base, head on the same shapes, then the head build's GPU tests and memcheck: how a kernel change
# that targets streaming speed (rather than the capacity scenario, capacity_ab.sh) is kept or dropped.
#
#   scripts/experiments/kernel_bench_ab.sh prepare BASE_REV [HEAD_REV]   # build-archive/{base,head}.tar
#   scripts/experiments/kernel_bench_ab.sh run                           # on the device, carry ["build-archive"]
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
    for tree in base head; do
      [[ -f "$archive/$tree.tar" ]] || { echo "kernel_bench_ab.sh: $archive/$tree.tar missing: run prepare first" >&2; exit 2; }
      # A warm machine keeps the builds: unpack over them so ninja rebuilds only what changed.
      mkdir -p "$work/$tree" && tar xf "$archive/$tree.tar" -C "$work/$tree" || exit 2
      cmake -S "$work/$tree" -B "$work/$tree/build-device" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DSPLITKV_CUDA_ARCHITECTURES=90a -DSPLITKV_WITH_FLASHINFER=OFF >"$OUT/kb/configure_$tree.log" 2>&1 ||
        { tail -20 "$OUT/kb/configure_$tree.log"; exit 1; }
    done
    (cmake --build "$work/base/build-device" -j 6 --target decode_kernel_bench >"$OUT/kb/build_base.log" 2>&1
     echo $? >"$work/base_rc") &
    cmake --build "$work/head/build-device" -j 10 --target decode_kernel_bench splitkv_gpu_tests splitkv_c \
      splitkv_heuristics_c splitkv >"$OUT/kb/build_head.log" 2>&1
    head_rc=$?
    wait
    if [[ $head_rc -ne 0 || "$(cat "$work/base_rc")" != 0 ]]; then
      grep -hE "error" -A3 "$OUT"/kb/build_*.log | head -30
      tar czf "$OUT/kb.tgz" -C "$OUT" kb
      exit 1
    fi
    grep -hE "spill" "$OUT"/kb/build_head.log | sort | uniq -c | head -3
    echo "kernel_bench_ab.sh: built at ${SECONDS}s"
    status=0
    shapes=${KB_SHAPES:-tuner/bench/fp8_bandwidth_shapes.csv}
    read -ra bench_args <<<"${KB_ARGS:---splits 1,2,4,8 --layouts contiguous,paged16 --kv-dtypes bf16,fp8_e4m3}"
    for run in base head base2 head2; do
      tree=$work/${run%2}
      timeout $(( deadline - 60 - SECONDS > 30 ? deadline - 60 - SECONDS : 30 )) \
        "$tree/build-device/tuner/decode_kernel_bench" "$work/head/$shapes" --out "$OUT/kb/$run.csv" "${bench_args[@]}" \
        >"$OUT/kb/$run.log" 2>&1
      rc=$?
      echo "kernel_bench_ab.sh: $run exit $rc at ${SECONDS}s"
      [[ $rc -eq 0 ]] || { tail -3 "$OUT/kb/$run.log"; status=1; }
    done
    python3 - "$OUT/kb" <<'PY'
import csv, math, os, sys
folder = sys.argv[1]
def best(path):
    out = {}
    if not os.path.exists(path):
        return out
    for r in csv.DictReader(open(path)):
        key = (r["layout"], r["kv_dtype"], f"B{r['batch']} {r['num_heads']}/{r['num_kv_heads']} d{r['head_dim']} L{r['context_len']}")
        t = float(r["time_us_median"])
        if key not in out or t < out[key][0]:
            out[key] = (t, r["num_splits"], float(r["tbps"]))
    return out
runs = {run: best(os.path.join(folder, run + ".csv")) for run in ("base", "head", "base2", "head2")}
keys = sorted(set(runs["base"]) & set(runs["head"]))
print(f"{'layout':10s} {'kv':8s} {'shape':24s} {'base us':>9s} {'base2':>9s} {'head us':>9s} {'head2':>9s} {'TB/s':>6s} {'head/base':>9s}")
groups = {}
for k in keys:
    b = min(runs[r][k][0] for r in ("base", "base2") if k in runs[r])
    h = min(runs[r][k][0] for r in ("head", "head2") if k in runs[r])
    groups.setdefault(k[:2], []).append(h / b)
    cell = lambda r: f"{runs[r][k][0]:9.1f}" if k in runs[r] else f"{'-':>9s}"
    print(f"{k[0]:10s} {k[1]:8s} {k[2]:24s} {cell('base')} {cell('base2')} {cell('head')} {cell('head2')} "
          f"{runs['head'][k][2]:6.2f} {h / b:9.3f}")
for g, ratios in sorted(groups.items()):
    print(f"geomean head/base {g[0]} {g[1]}: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.4f} over {len(ratios)} shapes")
PY
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

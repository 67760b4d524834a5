#!/usr/bin/env bash
# Where the fp8 kernel's bandwidth goes: decode_kernel_bench on the same KV bytes laid out so that
# a CTA's rows are interleaved with other kv heads' (32/8) or stream alone (8/1), bf16 and fp8,
# timed in steady streams of calls (16 per graph) and after idle gaps (1 per graph), with the
# clocks, power and throttle reasons sampled alongside. Device only; writes $OUT/probe.tgz (and
# device_run.sh's build logs, $OUT/logs.tgz). PROBE_SHAPES, PROBE_SPLITS, PROBE_CALLS (calls per
# graph, default "16 1") and PROBE_LAYOUTS (default contiguous) pick the points.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?for the device tool, which sets OUT}
mkdir -p "$OUT/probe"
SPLITKV_BUILD_TARGETS=decode_kernel_bench bash scripts/device_run.sh build >"$OUT/probe/build.log" 2>&1 ||
  { tail -30 "$OUT/probe/build.log"; exit 1; }
shapes=$OUT/probe/shapes.csv
printf 'batch,num_heads,num_kv_heads,context_len,fa2_sdpa_us,cudnn_sdpa_us,cudnn_tbps\n' >"$shapes"
printf '%s,0,0,0\n' ${PROBE_SHAPES:-64,32,8,16384 512,8,1,16384 16,32,8,65536 128,8,1,65536 64,32,8,4096 512,8,1,4096} >>"$shapes"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,temperature.memory,clocks_throttle_reasons.active \
  --format=csv -lms 200 >"$OUT/probe/smi.csv" 2>&1 &
smi=$!
for calls in ${PROBE_CALLS:-16 1}; do
  timeout 200 build-device/tuner/decode_kernel_bench "$shapes" --splits ${PROBE_SPLITS:-1,2,4} --layouts ${PROBE_LAYOUTS:-contiguous} \
    --kv-dtypes bf16,fp8_e4m3 --calls-per-graph "$calls" --out "$OUT/probe/calls$calls.csv" >"$OUT/probe/calls$calls.log" 2>&1
  echo "calls per graph $calls: exit $? at ${SECONDS}s"
done
kill $smi 2>/dev/null
tar czf "$OUT/probe.tgz" -C "$OUT" probe
python3 scripts/experiments/kernel_bench_summary.py streams "$OUT"/probe/calls*.csv
awk -F", " 'NR>1 {print $2, $7}' "$OUT/probe/smi.csv" | sort | uniq -c | sort -rn | head -8

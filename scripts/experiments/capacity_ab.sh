#!/usr/bin/env bash
# Two builds of the kernels on the capacity scenario, in one device call: how a kernel change is
# kept or dropped (kernels/DECISIONS.md). Both builds' libraries time `auto`, the heuristic's count
# and every fixed count on the same shapes, alternated base, head, base, head, so drift between runs shows
# as base/base2 and a real change as head/base on `auto` with the fixed counts at ~0.998.
#
#   scripts/experiments/capacity_ab.sh prepare BASE_REV [HEAD_REV]   # here: build-archive/{base,head}.tar
#                                                                   # (HEAD_REV omitted: the working tree)
#   scripts/experiments/capacity_ab.sh run                           # on the device, with carry ["build-archive"]
#
# AB_GROUPS (default capacity_auto): the bench_peers.py group sets to alternate, separated by ';',
# e.g. AB_GROUPS='capacity_auto;anchors,head_dim,batch_sweep,context_sweep,capacity' adds the
# peers groups (~52 s a run against ~30 s; raise AB_DEADLINE to ~560 to leave the tests time);
# each set's runs are summarised by capacity_auto_regret.py (capacity_auto) or peers_summary.py.
#
# `run` writes $OUT/ab.tgz (four CSVs per group set with sidecars, build and test logs) and prints
# each set's summaries and head/base per contender (capacity_auto_ab.py),
# then the auto GPU tests of the head build, then memcheck on them while the time allows
# (AB_DEADLINE seconds into the call, default 280). About 240 s warm or 280 s cold.
# AB_PEER_RUNS=2 runs a peers set once each way (base, head) instead of twice; AB_base_SHA and
# AB_head_SHA go into the CSVs' sidecars as git_sha; AB_TEST_FILTER overrides the GPU tests' filter.
# AB_HEAD_TARGETS adds build targets to the head build; AB_HEAD_HOOK (a script of the head tree) runs
# right after the builds as HOOK HEAD_SOURCE HEAD_BUILD $OUT/ab, before the timed runs.
set -uo pipefail
cd "$(dirname "$0")/../.."
archive=build-archive

case "${1:-}" in
  prepare)
    base=${2:?prepare needs BASE_REV}
    mkdir -p "$archive"
    git archive "$base" -o "$archive/base.tar" -- . ':!results' || exit 2
    if [[ -n "${3:-}" ]]; then
      git archive "$3" -o "$archive/head.tar" -- . ':!results' || exit 2
    else
      # `git stash create` snapshots tracked changes; untracked files must be added first.
      if [[ -n "$(git ls-files --others --exclude-standard)" ]]; then
        echo "capacity_ab.sh: untracked files would be left out of head.tar; git add them first" >&2
        exit 2
      fi
      snapshot=$(git stash create)
      git archive "${snapshot:-HEAD}" -o "$archive/head.tar" -- . ':!results' || exit 2
    fi
    echo "capacity_ab.sh: $archive/base.tar ($base) and $archive/head.tar (${3:-working tree}) ready"
    ;;
  run)
    OUT=${OUT:?run is for the device tool, which sets OUT}
    deadline=${AB_DEADLINE:-280}
    for tar in base head; do
      [[ -f "$archive/$tar.tar" ]] || { echo "capacity_ab.sh: $archive/$tar.tar missing: run prepare first" >&2; exit 2; }
    done
    work=/tmp/capacity_ab
    rm -rf "$work" && mkdir -p "$work/base" "$work/head" "$OUT/ab"
    tar xf "$archive/base.tar" -C "$work/base" && tar xf "$archive/head.tar" -C "$work/head" || exit 2
    configure() {
      cmake -S "$1" -B "$1/build-device" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPLITKV_CUDA_ARCHITECTURES=90a \
        >"$OUT/ab/configure_$2.log" 2>&1
    }
    configure "$work/base" base && configure "$work/head" head || { tail -20 "$OUT"/ab/configure_*.log; exit 1; }
    # The two builds share the cores: one translation unit each dominates.
    (cmake --build "$work/base/build-device" -j 6 --target splitkv_c >"$OUT/ab/build_base.log" 2>&1; echo $? >"$work/base_rc") &
    cmake --build "$work/head/build-device" -j 10 --target splitkv_gpu_tests splitkv_c splitkv_heuristics_c splitkv \
      ${AB_HEAD_TARGETS:-} >"$OUT/ab/build_head.log" 2>&1
    head_rc=$?
    wait
    if [[ $head_rc -ne 0 || "$(cat "$work/base_rc")" != 0 ]]; then
      grep -hE "error" -A3 "$OUT"/ab/build_*.log | head -30
      tar czf "$OUT/ab.tgz" -C "$OUT" ab && rm -rf "$OUT/ab"
      exit 1
    fi
    echo "capacity_ab.sh: built at ${SECONDS}s"
    heuristics=$work/head/build-device/heuristics/libsplitkv_heuristics_c.so
    status=0
    if [[ -n "${AB_HEAD_HOOK:-}" ]]; then
      "$work/head/$AB_HEAD_HOOK" "$work/head" "$work/head/build-device" "$OUT/ab" || status=1
      echo "capacity_ab.sh: $AB_HEAD_HOOK done at ${SECONDS}s"
    fi
    IFS=';' read -ra group_sets <<<"${AB_GROUPS:-capacity_auto}"
    for groups in "${group_sets[@]}"; do
      tag=$(echo "${groups%%,*}" | tr -c 'a-z0-9_\n' '_')
      seconds=$([[ $groups == capacity_auto ]] && echo 60 || echo 150)
      set_status=0
      # AB_PEER_RUNS=2: the peers sets only once each way (base, head), for a tight device budget.
      runs="base head base2 head2"
      [[ $groups != capacity_auto && ${AB_PEER_RUNS:-4} == 2 ]] && runs="base head"
      for run in $runs; do
        lib=$work/${run%2}/build-device/kernels/libsplitkv_c.so
        sha_variable=AB_${run%2}_SHA
        SPLITKV_GIT_SHA=${!sha_variable:-ab-$run} PYTHONUNBUFFERED=1 timeout -s INT "$seconds" \
          python3 "$work/head/scripts/bench_peers.py" --lib "$lib" --heuristic-lib "$heuristics" \
          --out "$OUT/ab/${tag}_$run.csv" --groups "$groups" --flex-groups "" >"$OUT/ab/${tag}_$run.log" 2>&1
        rc=$?
        echo "capacity_ab.sh: ${tag}_$run exit $rc at ${SECONDS}s"
        if [[ $rc -ne 0 ]]; then tail -3 "$OUT/ab/${tag}_$run.log"; set_status=1; status=1; fi
      done
      [[ $set_status -eq 0 ]] || continue
      if [[ $groups == *capacity_auto* ]]; then
        python3 "$work/head/scripts/experiments/capacity_auto_regret.py" "$OUT"/ab/"${tag}"_*.csv
      else
        python3 "$work/head/scripts/experiments/peers_summary.py" "$OUT"/ab/"${tag}"_*.csv
      fi
      if [[ $runs == "base head" ]]; then
        python3 "$work/head/scripts/experiments/capacity_auto_ab.py" "$OUT/ab/${tag}_base.csv" "$OUT/ab/${tag}_head.csv"
      else
        python3 "$work/head/scripts/experiments/capacity_auto_ab.py" \
          "$OUT/ab/${tag}_base.csv,$OUT/ab/${tag}_base2.csv" "$OUT/ab/${tag}_head.csv,$OUT/ab/${tag}_head2.csv"
      fi
    done
    tests=$work/head/build-device/tests/splitkv_gpu_tests
    filter=${AB_TEST_FILTER:-'*Auto*:*Graph*:*DevicePolicies*:*PerSequence*:*SanitizerSubset*:*EdgeLengths*'}
    left=$(( deadline - 40 - SECONDS ))
    if (( left > 30 )); then
      timeout "$left" "$tests" --gtest_filter="$filter" >"$OUT/ab/gpu_tests.log" 2>&1
      rc=$?
      echo "capacity_ab.sh: head GPU tests exit $rc at ${SECONDS}s: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/ab/gpu_tests.log" | tr '\n' ' ')"
      [[ $rc -eq 0 ]] || status=1
    fi
    left=$(( deadline - SECONDS ))
    if (( left > 20 )); then
      SPLITKV_TEST_AUTO_HEAD_DIM=128 timeout "$left" compute-sanitizer --tool memcheck --error-exitcode 9 "$tests" \
        --gtest_filter='DecodeAttentionGpu.AutoSplitsOnUniformAndNearlyUniformBatches:DecodeAttentionGpu.PerSequenceSplitsOnTheDevice' \
        >"$OUT/ab/memcheck.log" 2>&1
      rc=$?
      echo "capacity_ab.sh: head memcheck exit $rc at ${SECONDS}s: $(grep -E 'ERROR SUMMARY' "$OUT/ab/memcheck.log" | tail -1)"
      [[ $rc -eq 0 || $rc -eq 124 ]] || status=1   # 124: out of time, said above
    fi
    tar czf "$OUT/ab.tgz" -C "$OUT" ab && rm -rf "$OUT/ab"
    exit $status
    ;;
  *)
    sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac

#!/usr/bin/env bash
# GPU fault cases (RELIABILITY.md section 6): sweeps tests/gpu/fault_grid.json with the
# test-only fault_injection kernel (tuner/src/gpu_fault_kernel.cu) and checks what the
# runner makes of each fault:
#   batch 3: out of memory in prepare  -> rows with status oom, the sweep goes on
#   batch 5: non-sticky launch failure -> rows with status launch_failed, the sweep goes on
#   batch 7: sticky illegal address    -> the sweep stops (exit 1, sidecar "aborted"), every
#            earlier row intact, no torn line, a resume hint on stderr
# then runs the printed --resume: it meets batch 7 again and must leave the CSV unchanged
# (no duplicated rows). Exit 0 all passed, 1 a check failed, 77 no CUDA device (skipped).
#
# usage: tests/gpu/fault_cases.sh <splitkv binary> <out dir>
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 <splitkv binary> <out dir>" >&2
  exit 2
fi
bin=$1
out=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
grid=$here/fault_grid.json

if ! "$bin" devices >/dev/null 2>&1; then
  echo "SKIP: no CUDA device ($("$bin" devices 2>&1 | head -1 || true))"
  exit 77
fi

mkdir -p "$out"
csv=$out/fault.csv
sidecar=$out/fault.json
rm -f "$csv" "$sidecar"

names=()
verdicts=()
failed=0
check() {  # check <name> <command...>: records PASS when the command succeeds
  local name=$1
  shift
  names+=("$name")
  if "$@"; then
    verdicts+=(PASS)
  else
    verdicts+=(FAIL)
    failed=1
  fi
}

# status of the rows of one batch, in file order (batch is field 6, status field 21; only the
# last field, message, can hold commas)
statuses() { awk -F, -v b="$1" 'NR > 1 && $6 == b { printf "%s ", $21 }' "$csv"; }
rows() { awk 'END { print NR - 1 }' "$csv"; }
ends_with_newline() { [[ -s $csv && $(tail -c 1 "$csv" | od -An -c | tr -d ' ') == '\n' ]]; }
no_duplicate_points() {  # gpu..num_splits (fields 1-13) identify a point
  [[ -z $(awk 'NR > 1' "$csv" | cut -d, -f1-13 | sort | uniq -d) ]]
}

# Not registered without the environment variable: users never see it.
set +e
"$bin" sweep --grid "$grid" --out "$out/unregistered.csv" --kernel fault_injection >"$out/unregistered.out" 2>&1
rc_hidden=$?
set -e
check "hidden without SPLITKV_ENABLE_FAULT_KERNEL (exit 2)" test "$rc_hidden" -eq 2

export SPLITKV_ENABLE_FAULT_KERNEL=1
set +e
"$bin" sweep --grid "$grid" --out "$csv" --kernel fault_injection >"$out/sweep.out" 2>"$out/sweep.err"
rc_sweep=$?
set -e
echo "--- first sweep: exit $rc_sweep, stderr tail:"
tail -n 4 "$out/sweep.err"

check "ok points timed (batches 1, 2)" test "$(statuses 1)$(statuses 2)" == "ok ok ok ok "
check "oom row has status oom (batch 3)" test "$(statuses 3)" == "oom oom "
check "oom message names cudaMalloc" grep -q "fault injection: cudaMalloc(.*cudaErrorMemoryAllocation" "$csv"
check "sweep went on after oom (batch 4 ok)" test "$(statuses 4)" == "ok ok "
check "launch failure row is launch_failed (batch 5)" test "$(statuses 5)" == "launch_failed launch_failed "
check "launch failure message has the CUDA error" grep -q "fault injection: launch with 2048 threads per block: cudaError[A-Za-z]*: " "$csv"
check "sweep went on after launch failure (batch 6 ok)" test "$(statuses 6)" == "ok ok "
check "sticky point stops the sweep (exit 1)" test "$rc_sweep" -eq 1
check "sticky error named on stderr" grep -q "cudaErrorIllegalAddress" "$out/sweep.err"
check "no row for the sticky point or after it" test -z "$(statuses 7)$(statuses 8)$(statuses 9)"
check "every earlier row kept (12 rows)" test "$(rows)" -eq 12
check "no torn last line" ends_with_newline
check "sidecar state aborted" grep -q '"state": "aborted"' "$sidecar"
check "resume hint with the exact command" \
  grep -qF "resume with: splitkv sweep --grid $grid --out $csv --resume --kernel fault_injection" "$out/sweep.err"

cp "$csv" "$out/before_resume.csv"
set +e
"$bin" sweep --grid "$grid" --out "$csv" --kernel fault_injection --resume >"$out/resume.out" 2>"$out/resume.err"
rc_resume=$?
set -e
echo "--- resume: exit $rc_resume, stderr tail:"
tail -n 4 "$out/resume.err"
check "resume meets the sticky point again (exit 1)" test "$rc_resume" -eq 1
check "resume skipped every finished row (0 written)" grep -q "aborted: 0 rows written" "$out/resume.err"
check "CSV unchanged by the resume" cmp -s "$csv" "$out/before_resume.csv"
check "no duplicate rows" no_duplicate_points

echo
printf '%-58s %s\n' "fault case check" "result"
printf '%-58s %s\n' "----------------" "------"
for i in "${!names[@]}"; do printf '%-58s %s\n' "${names[$i]}" "${verdicts[$i]}"; done
if [[ $failed -ne 0 ]]; then
  echo "FAIL: see $out (sweep.err, resume.err, fault.csv)"
  exit 1
fi
echo "PASS: all ${#names[@]} checks"

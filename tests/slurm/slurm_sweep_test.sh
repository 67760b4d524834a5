#!/usr/bin/env bash
# `splitkv sweep --emit-slurm` against a real one-node Slurm on this machine: munged, slurmctld
# and slurmd on 127.0.0.1 with a generated key and slurm.conf in a temporary folder (as root
# or not; no systemd needed). The array runs the fake-GPU path (SPLITKV_FAKE_GPUS), so no GPU
# is needed either. One array task is cancelled mid-run (scancel of that task), resume.sh
# resubmits what is unfinished, and the merge job's CSV must hold exactly the rows of a
# single-process sweep of the same grid: none lost, none duplicated.
#
#   tests/slurm/slurm_sweep_test.sh <splitkv binary> <scratch dir>
#
# Exit 0 pass, 1 fail, 77 skip (Slurm or munge missing, or they would not start; the reason
# is printed). ctest: label slurm (.ci/run runs it after the main tests).
set -uo pipefail

splitkv=$(realpath "${1:?usage: slurm_sweep_test.sh <splitkv binary> <scratch dir>}")
scratch=${2:?usage: slurm_sweep_test.sh <splitkv binary> <scratch dir>}
here=$(cd "$(dirname "$0")" && pwd)
grid=$here/slurm_grid.json
shards=3
start_s=$SECONDS

say() { echo "slurm test: [$((SECONDS - start_s))s] $*"; }
skip() { echo "SKIP: $*"; exit 77; }
fail() {
  echo "FAIL: $*"
  for log in "$tmp"/*.log "$work"/slurm/logs/*.log; do
    [ -s "$log" ] && { echo "--- $log"; tail -15 "$log"; }
  done
  exit 1
}

for tool in munged slurmctld slurmd sbatch squeue scancel scontrol sinfo; do
  command -v "$tool" >/dev/null 2>&1 || skip "$tool not found (apt-get install slurm-wlm munge)"
done

tmp=$(mktemp -d /tmp/splitkv-slurm.XXXXXX)   # short: the munge socket path must stay short
chmod 0700 "$tmp"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  done
  rm -rf "$tmp"
}
trap cleanup EXIT

# ---- munge: its own key, socket, pid, seed and log ------------------------------------------
mkdir -p "$tmp/munge"
chmod 0700 "$tmp/munge"
dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1024 count=1 status=none
chmod 0400 "$tmp/munge/munge.key"
socket=$tmp/munge/socket
munged --foreground --force --key-file="$tmp/munge/munge.key" --socket="$socket" \
  --pid-file="$tmp/munge/munged.pid" --seed-file="$tmp/munge/seed" --log-file="$tmp/munged.log" \
  >>"$tmp/munged.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -S "$socket" ] && break; sleep 0.1; done
[ -S "$socket" ] || skip "munged would not start: $(tail -3 "$tmp/munged.log" | tr '\n' ' ')"

# ---- slurm.conf: one node, this host, loopback, free ports ----------------------------------
free_port() {
  local port
  for _ in $(seq 50); do
    port=$((20000 + RANDOM % 20000))
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { echo "$port"; return; }
  done
  echo 0
}
user=$(id -un)
host=$(hostname -s 2>/dev/null || hostname)
node=splitkvnode
mkdir -p "$tmp/state" "$tmp/spool"
conf=$tmp/slurm.conf
cat >"$conf" <<EOF
ClusterName=splitkvtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
SlurmdParameters=config_overrides
MinJobAge=600
KillWait=5
InactiveLimit=0
NodeName=$node NodeAddr=127.0.0.1 NodeHostname=$host CPUs=4 State=UNKNOWN
PartitionName=splitkv Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$conf
slurmctld -D -c -f "$conf" >>"$tmp/slurmctld.log" 2>&1 &
pids+=($!)
slurmd -D -f "$conf" -N "$node" >>"$tmp/slurmd.log" 2>&1 &
pids+=($!)
state=""
for _ in $(seq 100); do
  state=$(sinfo -h -n "$node" -o %T 2>/dev/null)
  [[ "$state" == idle* ]] && break
  sleep 0.2
done
[[ "$state" == idle* ]] ||
  skip "slurm would not start (node state \"$state\"): $(tail -2 "$tmp/slurmctld.log" "$tmp/slurmd.log" 2>/dev/null | tr '\n' ' ')"
say "slurmctld + slurmd + munged up as $user in $((SECONDS - start_s))s"

# ---- the sweep: a single-process reference, then the array ------------------------------------
work=$(realpath -m "$scratch")
rm -rf "$work"
mkdir -p "$work"
unset CUDA_VISIBLE_DEVICES
export SPLITKV_FAKE_GPUS="NVIDIA H200"
SPLITKV_FAKE_POINT_US=0 "$splitkv" sweep --grid "$grid" --out "$work/reference.csv" 2>"$work/reference.log" ||
  fail "the single-process reference sweep failed: $(tail -1 "$work/reference.log")"
reference_rows=$(($(wc -l <"$work/reference.csv") - 1))

export SPLITKV_FAKE_POINT_US=25000   # 25 ms a point: each task runs about a second
"$splitkv" sweep --grid "$grid" --out "$work/merged.csv" --emit-slurm "$work/slurm" --shards "$shards" \
  --slurm-gres none >"$work/emit.log" 2>&1 || fail "--emit-slurm failed: $(cat "$work/emit.log")"
"$work/slurm/submit.sh" >"$work/submit.log" 2>&1 || fail "submit.sh failed: $(cat "$work/submit.log")"
cat "$work/submit.log"
array=$(head -1 "$work/slurm/jobs/array")
first_merge=$(head -1 "$work/slurm/jobs/merge")

# Cancel task 1 once it has written some rows, well before it could finish.
victim=1
rows_of() { local n; n=$({ wc -l <"$1"; } 2>/dev/null) || n=1; echo $((n > 0 ? n - 1 : 0)); }
for _ in $(seq 200); do
  (($(rows_of "$work/slurm/shard$victim.csv") >= 8)) && break
  sleep 0.05
done
rows_at_cancel=$(rows_of "$work/slurm/shard$victim.csv")
((rows_at_cancel >= 8)) || fail "task $victim never started writing rows"
scancel "${array}_$victim" || fail "scancel ${array}_$victim failed"
for _ in $(seq 150); do
  squeue -h -r -j "$array" -o %i 2>/dev/null | grep -qx "${array}_$victim" || break
  sleep 0.1
done
victim_rows=$(rows_of "$work/slurm/shard$victim.csv")
grep -qs '"state": "complete"' "$work/slurm/shard$victim.json" &&
  fail "task $victim completed before it was cancelled (grid too small for the sleep per point)"
say "cancelled task ${array}_$victim after $rows_at_cancel rows (it stopped at $victim_rows)"

"$work/slurm/resume.sh" >"$work/resume.log" 2>&1 || fail "resume.sh failed: $(cat "$work/resume.log")"
cat "$work/resume.log"
grep -q "tasks $victim\b" "$work/resume.log" || fail "resume.sh did not resubmit task $victim"
merge=$(tail -1 "$work/slurm/jobs/merge")
[ "$merge" != "$first_merge" ] || fail "resume.sh submitted no new merge job"

merge_state=""
for _ in $(seq 400); do
  merge_state=$(scontrol show job "$merge" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
  case $merge_state in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL) break ;; esac
  sleep 0.1
done
[ "$merge_state" = COMPLETED ] || fail "the merge job $merge ended as \"$merge_state\""

# ---- the check: every reference row once, nothing else -----------------------------------------
[ -s "$work/merged.csv" ] || fail "the merge job wrote no $work/merged.csv"
merged_rows=$(($(wc -l <"$work/merged.csv") - 1))
tail -n +2 "$work/reference.csv" | sort >"$work/reference.sorted"
tail -n +2 "$work/merged.csv" | sort >"$work/merged.sorted"
lost=$(comm -23 "$work/reference.sorted" "$work/merged.sorted" | wc -l)
extra=$(comm -13 "$work/reference.sorted" "$work/merged.sorted" | wc -l)
duplicated=$(uniq -d "$work/merged.sorted" | wc -l)
say "merged $merged_rows rows vs $reference_rows of the single-process sweep: $lost lost, $duplicated duplicated, $extra not in it"
((lost == 0 && duplicated == 0 && extra == 0 && merged_rows == reference_rows)) ||
  fail "the merged CSV differs from the single-process sweep"
say "PASS in $((SECONDS - start_s))s"

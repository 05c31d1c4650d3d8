#!/bin/bash
# tests/scheduler_check.sh MOELAB — docs/jobs.md's two recipes for running a sweep as jobs, run
# against the real schedulers: a toy grid's `mode=list` lines
#   1. through GNU parallel: `parallel -j 2 < jobs.txt`
#   2. through a Slurm job array: `sbatch --array=1-N scripts/point.sbatch jobs.txt` on a
#      single-node Slurm this script starts and stops itself: munged with a fresh key, slurmctld and
#      slurmd with their own slurm.conf, ports, state and spool folders, all in a temporary folder
#      (so a Slurm already on the machine is not touched)
# then `mode=report`, and the report must equal `mode=all`'s byte for byte once the timings are cut
# (tests/grid_compare.sh). A half whose scheduler is missing (not installed, not root, or Slurm
# does not come up within 30 s) prints why and is skipped; when both are skipped the script exits
# 77, which ctest reports as skipped. Run by ctest as scheduler_recipes.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
moelab=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
bindir=$(dirname "$moelab")
work=$(mktemp -d "${TMPDIR:-/tmp}/moelab-sched.XXXXXX")
chmod 700 "$work"
failures=0
ran=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
slurm_up=0
cleanup() {
  if [ "$slurm_up" = 1 ]; then
    SLURM_CONF="$work/slurm/slurm.conf" scontrol shutdown >/dev/null 2>&1
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      pgrep -f "$work/slurm/slurm.conf" >/dev/null || break
      sleep 0.5
    done
    pkill -f "$work/slurm/slurm.conf" 2>/dev/null
    munged -s -S "$work/slurm/munge.sock" >/dev/null 2>&1
  fi
  rm -rf "$work"
}
trap cleanup EXIT
. "$here/grid_compare.sh"  # strip_seconds, compare_reports
cd "$work" || exit 1

# The toy grid: Soft MoE learning ||x|| with n = 1 and 10 experts, two seeds (4 points, seconds).
grid=(softmoe-l2norm --preset toy --set steps=20 --set batch=64 --set log_every=5 --set seeds=0,1 --threads 1)
"$moelab" "${grid[@]}" --out A --set mode=all >A.log 2>&1 || { cat A.log; echo "FAIL: mode=all"; exit 1; }

# run_listed NAME RUNNER...: lists the grid into NAME/, runs the list file with RUNNER (given the
# file as its last argument), reports, and compares with A.
run_listed() {
  local name=$1
  shift
  "$moelab" "${grid[@]}" --out "$work/$name" --set mode=list >"$name.jobs" 2>"$name.err" ||
    { fail "$name: mode=list"; cat "$name.err"; return; }
  local points
  points=$(wc -l <"$name.jobs")
  [ "$points" -ge 4 ] || { fail "$name: mode=list listed $points points"; return; }
  "$@" "$work/$name.jobs" >"$name.log" 2>&1 || { fail "$name: the scheduler run failed"; tail -20 "$name.log"; return; }
  "$moelab" "${grid[@]}" --out "$work/$name" --set mode=list >"$name.again" 2>/dev/null
  [ -s "$name.again" ] && { fail "$name: points still missing after the scheduler ran"; cat "$name.again"; }
  "$moelab" "${grid[@]}" --out "$work/$name" --set mode=report >>"$name.log" 2>&1 || { fail "$name: mode=report"; return; }
  compare_reports A "$name" "$name"
  [ "$compared" -ge 2 ] || fail "$name: only $compared report files compared"
  echo "ok: $name: $points points, $compared report files equal to mode=all's"
  ran=$((ran + 1))
}

# 1. GNU parallel, as docs/jobs.md: the lines say `moelab`, found on the PATH.
if command -v parallel >/dev/null 2>&1; then
  run_parallel() { PATH="$bindir:$PATH" parallel --will-cite -j 2 <"$1"; }
  run_listed parallel run_parallel
else
  echo "skipped: GNU parallel is not installed (Debian: apt-get install parallel)"
fi

# 2. Slurm.
start_slurm() {
  local missing=() c
  for c in munged munge slurmctld slurmd sbatch scontrol sinfo; do
    command -v "$c" >/dev/null 2>&1 || missing+=("$c")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "skipped: Slurm: ${missing[*]} not found (Debian: apt-get install slurmctld slurmd slurm-client munge)"
    return 1
  fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "skipped: Slurm: starting slurmd needs root"
    return 1
  fi
  local s="$work/slurm" host mem port
  mkdir -p "$s/state" "$s/spool"
  head -c 1024 /dev/urandom >"$s/munge.key"
  chmod 600 "$s/munge.key"
  munged -f --key-file="$s/munge.key" --socket="$s/munge.sock" --pid-file="$s/munged.pid" \
    --log-file="$s/munged.log" --seed-file="$s/munged.seed" ||
    { echo "skipped: Slurm: munged did not start"; return 1; }
  slurm_up=1
  host=$(hostname -s)
  mem=$(awk '/MemTotal/ { print int($2 / 1024 / 2) }' /proc/meminfo)
  port=$((20000 + RANDOM % 20000))
  cat >"$s/slurm.conf" <<EOF
ClusterName=moelabtest
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$s/munge.sock
CredType=cred/munge
StateSaveLocation=$s/state
SlurmdSpoolDir=$s/spool
SlurmctldPidFile=$s/slurmctld.pid
SlurmdPidFile=$s/slurmd.pid
SlurmctldPort=$port
SlurmdPort=$((port + 1))
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
SlurmctldLogFile=$s/slurmctld.log
SlurmdLogFile=$s/slurmd.log
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=$host CPUs=$(nproc) RealMemory=$mem State=UNKNOWN
PartitionName=moelabtest Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF="$s/slurm.conf"
  slurmctld -f "$s/slurm.conf" -i && slurmd -f "$s/slurm.conf" ||
    { echo "skipped: Slurm: slurmctld or slurmd did not start"; tail -5 "$s"/*.log 2>/dev/null; return 1; }
  for _ in $(seq 60); do
    sinfo -h -o '%t' 2>/dev/null | grep -qx idle && return 0
    sleep 0.5
  done
  echo "skipped: Slurm: the node did not come up idle within 30 s"
  tail -5 "$s/slurmctld.log" "$s/slurmd.log" 2>/dev/null
  return 1
}
if start_slurm; then
  # docs/jobs.md's recipe with the repository's own scripts/point.sbatch; the test's own memory,
  # time limit and output folder override its #SBATCH lines, as sbatch options do.
  run_sbatch() {
    PATH="$bindir:$PATH" sbatch --wait --array=1-"$(wc -l <"$1")" --mem=512M --time=10 \
      --output="$work/slurm-%A_%a.out" "$repo/scripts/point.sbatch" "$1"
    local rc=$?
    [ $rc -eq 0 ] || cat "$work"/slurm-*.out
    return $rc
  }
  run_listed sbatch run_sbatch
fi

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
[ "$ran" -gt 0 ] || { echo "both schedulers skipped"; exit 77; }
echo "all checks passed ($ran scheduler(s))"

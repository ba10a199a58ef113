#!/usr/bin/env bash
# The trivial-job workload of issue 20 on Slurm, on this machine: the counterpart of
# `fairsched bench trivial-jobs` (crates/fairsched/src/bench/trivial_jobs.rs), for
# BENCHMARKS.md "Against Slurm (issue 20)".
#
# NEEDS ROOT AND APT (Debian): it installs Debian's `slurm-wlm` and `munge` when they are
# missing (`apt-get install slurm-wlm munge`; on a machine with systemd that also enables
# their services, which this script does not use), then starts its own daemons in a new
# directory (--dir): a munged on its own socket (as user munge), slurmctld and 8 slurmd
# (nodes n1..n8 of 8 CPUs: 64 slots, as fairsched's 8 agents × 8 cpus) on 127.0.0.1 with
# deploy/slurm/slurm.conf (ports 16817 and 16901-16908). Every daemon it started is stopped
# by its PID when it ends, also on failure or Ctrl-C. Slurm's own services, if any, are not
# touched.
#
# Phases, in fairsched's order; every job is `sbatch --wrap true` (1 CPU, Slurm's default):
#   idle_latency       one job at a time on the idle cluster: from just before `sbatch` until
#                      `squeue -j ID` first shows it other than PENDING (polled back to back,
#                      each poll a squeue process), and until it shows COMPLETED. Before each
#                      submission a random pause of 0 to --pause s (default 3): slurmctld
#                      starts such a job at its next scheduling pass, which came every ~3 s in
#                      our runs (its log's "sched: Allocate" lines), so the pauses spread the
#                      submissions over that cycle, as fairsched's run spreads them over its
#                      200 ms fair-share period. (With pauses of 0-0.2 s every submission came
#                      just after a pass and waited ~2.8 s.)
#   one_after_another  N `sbatch` calls one after another (each waits for its reply); then
#                      until `squeue` lists none of them unfinished (polled every --poll s).
#   one_operation      one `sbatch --array=1-N`, until no task is unfinished.
#   with_backlog       M `sbatch --hold` jobs first (they wait, held), then one_after_another
#                      again; the held jobs are cancelled afterwards.
# Rates: submissions/s = N / (first sbatch to last reply); jobs/s = jobs completed / (first
# sbatch until none unfinished). Output: a table, and with --json the same as JSON (also
# written to DIR/results.json).
#
# Usage: scripts/slurm-trivial-jobs.sh [--operations N] [--jobs N] [--backlog M]
#          [--latency-samples S] [--pause SECONDS] [--phases a,b,...] [--poll SECONDS]
#          [--single-node]
#          [--dir DIR] [--keep-dir] [--json]
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

OPERATIONS=2000
JOBS=10000
BACKLOG=1000
SAMPLES=50
PHASES=idle_latency,one_after_another,one_operation,with_backlog
POLL=0.1
PAUSE=3
SINGLE_NODE=0
DIR=
KEEP=0
JSON=0
TIMEOUT_S=1800

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --operations) OPERATIONS=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --backlog) BACKLOG=$2; shift 2 ;;
    --latency-samples) SAMPLES=$2; shift 2 ;;
    --phases) PHASES=$2; shift 2 ;;
    --poll) POLL=$2; shift 2 ;;
    --pause) PAUSE=$2; shift 2 ;;
    --single-node) SINGLE_NODE=1; shift ;;
    --dir) DIR=$2; shift 2 ;;
    --keep-dir) KEEP=1; shift ;;
    --json) JSON=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown option $1 (--help lists them)" >&2; exit 2 ;;
  esac
done

if [ "$(id -u)" -ne 0 ]; then
  echo "this script needs root: it installs slurm-wlm and munge with apt and runs slurmd, which starts jobs as their users (sudo $0 ...)" >&2
  exit 1
fi
if [ "${BASH_VERSINFO[0]}" -lt 5 ]; then
  echo "bash 5 or newer is needed (\$EPOCHREALTIME)" >&2
  exit 1
fi
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
  echo "== installing Debian's slurm-wlm and munge" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge >&2
fi

log() { echo "[slurm-trivial-jobs] $*" >&2; }

if [ -z "$DIR" ]; then
  DIR=$(mktemp -d /tmp/slurm-trivial-jobs.XXXXXX)
else
  mkdir -p "$DIR"
fi
# munged (user munge) must reach its directory inside.
chmod 0755 "$DIR"
CONF=$DIR/slurm.conf
export SLURM_CONF=$CONF
HOST=$(hostname -s)
PIDS=()       # every daemon started, stopped in reverse order
MUNGE_PID=

stop_all() {
  local status=$?
  trap - EXIT INT TERM
  local i pid
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    pid=${PIDS[i]}
    kill "$pid" 2>/dev/null || continue
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      log "pid $pid did not stop within 10 s of SIGTERM: killing it"
      kill -9 "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
  done
  if [ "$KEEP" = 1 ] || [ "$status" -ne 0 ]; then
    log "the run's files (configuration, logs) are in $DIR"
  else
    rm -rf "$DIR"
  fi
  exit "$status"
}
trap stop_all EXIT
trap 'exit 130' INT TERM

# ---- munge: its own key, socket and files in DIR/munge --------------------------------------
install -d -o munge -g munge -m 0755 "$DIR/munge"
dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
chown munge:munge "$DIR/munge/munge.key"
chmod 0400 "$DIR/munge/munge.key"
SOCKET=$DIR/munge/munge.socket
setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged --foreground \
  --socket="$SOCKET" --key-file="$DIR/munge/munge.key" --pid-file="$DIR/munge/munged.pid" \
  --seed-file="$DIR/munge/munged.seed" --log-file="$DIR/munge/munged.log" \
  >"$DIR/munged.out" 2>&1 &
MUNGE_PID=$!
PIDS+=("$MUNGE_PID")
for _ in $(seq 100); do
  munge -n --socket="$SOCKET" 2>/dev/null | unmunge --socket="$SOCKET" >/dev/null 2>&1 && break
  kill -0 "$MUNGE_PID" 2>/dev/null || { cat "$DIR/munged.out" >&2; echo "munged did not start (above)" >&2; exit 1; }
  sleep 0.1
done

# ---- slurm.conf from deploy/slurm/slurm.conf -------------------------------------------------
if [ "$SINGLE_NODE" = 1 ]; then
  NODES="NodeName=n1 NodeHostname=$HOST NodeAddr=127.0.0.1 Port=16901 CPUs=64 RealMemory=131072 State=UNKNOWN"
  NODE_NAMES=(n1)
else
  NODES="NodeName=n[1-8] NodeHostname=$HOST NodeAddr=127.0.0.1 Port=[16901-16908] CPUs=8 RealMemory=16384 State=UNKNOWN"
  NODE_NAMES=(n1 n2 n3 n4 n5 n6 n7 n8)
fi
sed -e "s|@DIR@|$DIR|g" -e "s|@HOST@|$HOST|g" -e "s|@NODES@|$NODES|" \
  "$REPO/deploy/slurm/slurm.conf" >"$CONF"
mkdir -p "$DIR/state" "$DIR/out"
for n in "${NODE_NAMES[@]}"; do mkdir -p "$DIR/spool/$n"; done

slurmctld -D -f "$CONF" >"$DIR/slurmctld.out" 2>&1 &
PIDS+=("$!")
CTLD_PID=$!
for _ in $(seq 100); do
  scontrol ping 2>/dev/null | grep -q UP && break
  kill -0 "$CTLD_PID" 2>/dev/null || { tail -20 "$DIR/slurmctld.log" >&2; echo "slurmctld exited (its log above)" >&2; exit 1; }
  sleep 0.2
done
for n in "${NODE_NAMES[@]}"; do
  slurmd -D -f "$CONF" -N "$n" >"$DIR/slurmd-$n.out" 2>&1 &
  PIDS+=("$!")
done
for _ in $(seq 300); do
  [ "$(sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)" -eq "${#NODE_NAMES[@]}" ] && break
  sleep 0.2
done
if [ "$(sinfo -h -N -t idle -o %N | sort -u | wc -l)" -ne "${#NODE_NAMES[@]}" ]; then
  sinfo -N -l >&2
  echo "not every node became idle within 60 s: see $DIR/slurmd-*.log and slurmctld.log (with one slurmd of 64 CPUs instead: --single-node)" >&2
  exit 1
fi
log "slurm $(sinfo -V | awk '{print $2}') up: ${#NODE_NAMES[@]} node(s), $(sinfo -h -o %C | awk -F/ '{print $4}') CPUs, files in $DIR"

# ---- helpers -----------------------------------------------------------------------------------
cd "$DIR/out"  # jobs write their slurm-ID.out here (Slurm's default output file)
UNFINISHED=PENDING,RUNNING,COMPLETING,CONFIGURING,SUSPENDED,REQUEUED,RESIZING,SIGNALING,STAGE_OUT

secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f", b - a }'; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b - a) * 1000 }'; }
div() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }'; }
# p50 p99 max of the numbers in file $1 (index ceil(n q), as fairsched's report).
pct() {
  sort -g "$1" | awk '{ v[NR] = $1 } END {
    if (NR == 0) { print "null null null"; exit }
    i50 = int(NR * 0.5); if (i50 < NR * 0.5) i50++; if (i50 < 1) i50 = 1
    i99 = int(NR * 0.99); if (i99 < NR * 0.99) i99++; if (i99 < 1) i99 = 1
    printf "%.1f %.1f %.1f\n", v[i50], v[i99], v[NR] }'
}
# Waits until no job named $1 is unfinished; echoes the time it saw that.
wait_done() {
  local name=$1 start=$2
  while [ -n "$(squeue -h -n "$name" -t "$UNFINISHED" -o %i | head -1)" ]; do
    if [ "$(secs "$start" "$EPOCHREALTIME" | cut -d. -f1)" -ge "$TIMEOUT_S" ]; then
      echo "jobs named $name were still unfinished after $TIMEOUT_S s" >&2
      exit 1
    fi
    sleep "$POLL"
  done
  echo "$EPOCHREALTIME"
}
# Jobs named $1 that completed; fails naming any that ended otherwise.
completed() {
  local name=$1 states
  states=$(squeue -h -n "$name" -t all -o %T | sort | uniq -c)
  if echo "$states" | grep -v -q -E '^ *[0-9]+ COMPLETED$|^$'; then
    echo "jobs named $name did not all complete: $states" >&2
    exit 1
  fi
  echo "$states" | awk '$2 == "COMPLETED" { n += $1 } END { print n + 0 }'
}

RESULTS=()
TABLE=()
# record NAME OPS JOBS COMPLETED SUBMIT_S DONE_S REPLIES_FILE [extra JSON]
record() {
  local name=$1 ops=$2 jobs=$3 done_jobs=$4 submit_s=$5 done_s=$6 replies=$7 extra=${8:-}
  local sps jps r50 r99 rmax
  if [ "$done_jobs" -lt "$jobs" ]; then
    log "warning: $name: squeue lists $done_jobs of its $jobs jobs as completed; the others are no longer listed (Slurm forgets a finished job MinJobAge = 300 s after its end), so jobs/s counts only the listed ones"
  fi
  sps=$(div "$ops" "$submit_s")
  jps=$(div "$done_jobs" "$done_s")
  read -r r50 r99 rmax < <(pct "$replies")
  RESULTS+=("{\"name\": \"$name\", \"operations\": $ops, \"jobs\": $jobs, \"jobs_completed\": $done_jobs, \"submit_s\": $submit_s, \"submissions_per_s\": $sps, \"completed_s\": $done_s, \"jobs_per_s\": $jps, \"submit_reply_ms\": {\"p50\": $r50, \"p99\": $r99, \"max\": $rmax}$extra}")
  submit_s=$(printf '%.2f' "$submit_s"); sps=$(printf '%.1f' "$sps"); jps=$(printf '%.1f' "$jps")
  if [ "$name" = idle_latency ]; then sps=-; jps=-; submit_s=-; fi
  TABLE+=("$(printf '%-18s %6s %7s %9s %10s %10.2f %9s %10s %10s' "$name" "$ops" "$done_jobs" \
    "$submit_s" "$sps" "$done_s" "$jps" "$r50" "$r99")")
  log "$name: $ops submissions, $done_jobs jobs completed in $done_s s"
}

# N one-job submissions one after another, named $1; echoes "submit_s done_s completed".
one_after_another() {
  local name=$1 n=$2 replies=$3 t0 t1 ts tdone i done_jobs
  : >"$replies"
  t0=$EPOCHREALTIME
  for ((i = 1; i <= n; i++)); do
    ts=$EPOCHREALTIME
    sbatch --parsable -J "$name" --wrap true >/dev/null
    ms "$ts" "$EPOCHREALTIME" >>"$replies"
    echo >>"$replies"
    if ((i % 200 == 0)); then log "$name: $i of $n submitted"; fi
  done
  t1=$EPOCHREALTIME
  tdone=$(wait_done "$name" "$t0")
  done_jobs=$(completed "$name")
  echo "$(secs "$t0" "$t1") $(secs "$t0" "$tdone") $done_jobs"
}

phase_idle_latency() {
  local replies=$DIR/latency-replies.ms starts=$DIR/latency-starts.ms ends=$DIR/latency-ends.ms
  local polls=0 poll_s=0 t0 t1 tstart tend id st i t_first
  : >"$replies"; : >"$starts"; : >"$ends"
  t_first=$EPOCHREALTIME
  for ((i = 1; i <= SAMPLES; i++)); do
    sleep "$(awk -v r="$RANDOM" -v p="$PAUSE" 'BEGIN { printf "%.3f", r / 32767 * p }')"
    t0=$EPOCHREALTIME
    id=$(sbatch --parsable -J tj-latency --wrap true)
    t1=$EPOCHREALTIME
    echo "$(ms "$t0" "$t1")" >>"$replies"
    tstart=
    while :; do
      st=$(squeue -h -j "$id" -t all -o %T 2>/dev/null || true)
      polls=$((polls + 1))
      case "$st" in
        PENDING|"") ;;
        *) [ -z "$tstart" ] && tstart=$EPOCHREALTIME ;;
      esac
      case "$st" in
        COMPLETED) tend=$EPOCHREALTIME; break ;;
        FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|PREEMPTED|DEADLINE)
          echo "job $id ended $st" >&2; exit 1 ;;
      esac
      if [ "$(secs "$t0" "$EPOCHREALTIME" | cut -d. -f1)" -ge 60 ]; then
        echo "job $id did not complete within 60 s (state ${st:-none})" >&2; exit 1
      fi
    done
    echo "$(ms "$t0" "$tstart")" >>"$starts"
    echo "$(ms "$t0" "$tend")" >>"$ends"
  done
  local tdone=$EPOCHREALTIME s50 s99 smax e50 e99 emax poll_ms done_jobs
  done_jobs=$(completed tj-latency)
  poll_ms=$(awk -v s="$(secs "$t_first" "$tdone")" -v p="$polls" 'BEGIN { printf "%.1f", s * 1000 / p }')
  read -r s50 s99 smax < <(pct "$starts")
  read -r e50 e99 emax < <(pct "$ends")
  record idle_latency "$SAMPLES" "$SAMPLES" "$done_jobs" 0 "$(secs "$t_first" "$tdone")" "$replies" \
    ", \"submit_to_start_ms\": {\"p50\": $s50, \"p99\": $s99, \"max\": $smax}, \"submit_to_completed_ms\": {\"p50\": $e50, \"p99\": $e99, \"max\": $emax}, \"mean_ms_between_polls\": $poll_ms, \"max_pause_s\": $PAUSE"
  LATENCY_LINE="idle_latency: submit to start (squeue shows it no longer PENDING) p50 $s50 ms, p99 $s99 ms, max $smax ms; to COMPLETED p50 $e50 ms, p99 $e99 ms ($SAMPLES submissions after random pauses of 0-$PAUSE s; a poll every $poll_ms ms on average)"
  log "$LATENCY_LINE"
}

phase_one_after_another() {
  local replies=$DIR/sequential-replies.ms submit_s done_s done_jobs out
  out=$(one_after_another tj-sequential "$OPERATIONS" "$replies")
  read -r submit_s done_s done_jobs <<<"$out"
  record one_after_another "$OPERATIONS" "$OPERATIONS" "$done_jobs" "$submit_s" "$done_s" "$replies"
}

phase_one_operation() {
  local replies=$DIR/array-replies.ms t0 t1 tdone done_jobs
  t0=$EPOCHREALTIME
  sbatch --parsable -J tj-array --array="1-$JOBS" --wrap true >/dev/null
  t1=$EPOCHREALTIME
  ms "$t0" "$t1" >"$replies"; echo >>"$replies"
  tdone=$(wait_done tj-array "$t0")
  done_jobs=$(completed tj-array)
  record one_operation 1 "$JOBS" "$done_jobs" "$(secs "$t0" "$t1")" "$(secs "$t0" "$tdone")" "$replies"
}

phase_with_backlog() {
  local replies=$DIR/backlog-replies.ms t0 i held submit_s done_s done_jobs backlog_s out
  t0=$EPOCHREALTIME
  for ((i = 1; i <= BACKLOG; i++)); do
    sbatch --parsable -J held --hold --wrap true >/dev/null
  done
  backlog_s=$(secs "$t0" "$EPOCHREALTIME")
  held=$(squeue -h -n held -t PENDING -o %i | wc -l)
  [ "$held" -eq "$BACKLOG" ] || { echo "expected $BACKLOG held jobs pending, squeue lists $held" >&2; exit 1; }
  log "with_backlog: $BACKLOG held jobs wait (submitted in $backlog_s s)"
  out=$(one_after_another tj-backlog "$OPERATIONS" "$replies")
  read -r submit_s done_s done_jobs <<<"$out"
  held=$(squeue -h -n held -t PENDING -o %i | wc -l)
  [ "$held" -eq "$BACKLOG" ] || { echo "expected $BACKLOG held jobs still pending, squeue lists $held" >&2; exit 1; }
  record with_backlog "$OPERATIONS" "$OPERATIONS" "$done_jobs" "$submit_s" "$done_s" "$replies" \
    ", \"backlog_operations\": $BACKLOG, \"backlog_submit_s\": $backlog_s"
  BACKLOG_LINE="with_backlog: $BACKLOG jobs waited held (sbatch --hold), submitted in $(printf %.1f "$backlog_s") s beforehand"
  scancel -n held
}

LATENCY_LINE=
BACKLOG_LINE=
IFS=, read -r -a PHASE_LIST <<<"$PHASES"
for phase in "${PHASE_LIST[@]}"; do
  case "$phase" in
    idle_latency|one_after_another|one_operation|with_backlog) log "$phase: starting"; "phase_$phase" ;;
    *) echo "unknown phase $phase (idle_latency, one_after_another, one_operation, with_backlog)" >&2; exit 2 ;;
  esac
done

MACHINE="$(nproc) cpus ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
{
  printf '{\n  "system": "slurm %s",\n  "nodes": %d,\n  "slots": %s,\n  "machine": "%s",\n  "phases": [\n' \
    "$(sinfo -V | awk '{print $2}')" "${#NODE_NAMES[@]}" "$(sinfo -h -o %C | awk -F/ '{print $4}')" "$MACHINE"
  for ((i = 0; i < ${#RESULTS[@]}; i++)); do
    sep=,; [ "$i" -eq $((${#RESULTS[@]} - 1)) ] && sep=
    printf '    %s%s\n' "${RESULTS[i]}" "$sep"
  done
  printf '  ]\n}\n'
} >"$DIR/results.json"

if [ "$JSON" = 1 ]; then
  cat "$DIR/results.json"
else
  echo "slurm $(sinfo -V | awk '{print $2}'): ${#NODE_NAMES[@]} slurmd, $(sinfo -h -o %C | awk -F/ '{print $4}') CPUs on 127.0.0.1; $MACHINE"
  echo "every job: sbatch --wrap true (1 CPU); slurm.conf: $CONF (from deploy/slurm/slurm.conf)"
  echo
  printf '%-18s %6s %7s %9s %10s %10s %9s %10s %10s\n' phase ops jobs "submit s" "submits/s" "done s" "jobs/s" "reply p50" "reply p99"
  printf '%s\n' "${TABLE[@]}"
  [ -n "$LATENCY_LINE" ] && printf '\n%s\n' "$LATENCY_LINE"
  [ -n "$BACKLOG_LINE" ] && printf '%s\n' "$BACKLOG_LINE"
  printf '\nsubmit s: first sbatch to last reply; done s: first sbatch until none unfinished (squeue every %s s); jobs/s: jobs completed / done s; reply: one sbatch process, ms\n' "$POLL"
fi

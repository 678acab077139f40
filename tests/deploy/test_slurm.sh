#!/usr/bin/env bash
# tests/deploy/test_slurm.sh: runs the Slurm pilot (deploy/slurm/fusionbench-worker.sbatch)
# on a real one-node Slurm cluster built in a temp folder, against a real
# FusionBench (PostgreSQL, fusionbench-server).
#
#   1. Installs slurm-wlm and munge with apt-get when they are missing (root only).
#   2. Starts munged, slurmctld and slurmd on this machine, every file of theirs in
#      the temp folder (ports chosen free, 127.0.0.1 only, no cgroups, no GPU).
#   3. Starts a FusionBench server on a fresh database: on FB_TEST_DATABASE_URL's
#      cluster when it is set (ctest), else on a throwaway cluster (scripts/pg.sh).
#   4. Checks the script refuses to start without DATABASE_URL.
#   5. Submits the shipped script as a 2-task job array of CPU pilots
#      (command-line options override its #SBATCH lines: --gres=none, 1 CPU) and
#      waits until both run and are registered idle.
#   6. Submits one long job; once it is timing, a "blocker" job (to keep the
#      other pilot busy for a few seconds) and 20 small ones; then `scancel`s the
#      pilot holding the long job: the job must be released (seen back in the
#      queue, its attempt not counted) and finished by the other pilot; all 22
#      jobs must succeed.
#   7. The other pilot must exit 0 by itself once idle (--exit-when-idle); a
#      third pilot with a 1-minute time limit must get its --signal=B:TERM@20 from
#      Slurm and exit 0 before the limit (COMPLETED, not TIMEOUT); a fourth must
#      drain and exit 0 on `scancel --batch --signal=TERM` (the README's advice;
#      that `scancel --signal=TERM` without --batch does not reach it is logged).
# Prints the time each phase took and the total.
#
# Exit 0: pass; 77: skipped (the reason is printed: not root, or Slurm cannot be
# installed or started here); anything else: failure.
# Env: FB_BIN_DIR (the build folder, default <repo>/build), FB_TEST_DATABASE_URL
#      (optional), FB_KEEP_TMP=1 keeps the temp folder (logs, Slurm's files).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
script="$root/deploy/slurm/fusionbench-worker.sbatch"
api="$here/slurm/fbapi.py"
bindir=${FB_BIN_DIR:-$root/build}

T0=$EPOCHREALTIME
PHASES=()
phase_t0=
phase_name=

log() { echo "[$(date +%H:%M:%S)] test_slurm: $*"; }
skip() {
    echo "SKIPPED: test_slurm: $*"
    exit 77
}
die() {
    echo "FAIL: test_slurm: $*"
    exit 1
}
elapsed() { # seconds since $1 ($EPOCHREALTIME), one decimal
    awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'
}
phase() { # ends the current phase (if any) and starts the next one, $1
    if [ -n "$phase_name" ]; then
        PHASES+=("$(printf '%-40s %6s s' "$phase_name" "$(elapsed "$phase_t0")")")
        log "phase '$phase_name' took $(elapsed "$phase_t0") s"
    fi
    phase_name=${1:-}
    phase_t0=$EPOCHREALTIME
    [ -z "$phase_name" ] || log "--- $phase_name"
}

[ "$(id -u)" = 0 ] || skip "needs root (to install Slurm and run slurmd); run as root"
[ -f "$script" ] || die "$script not found"
command -v python3 >/dev/null || skip "no python3"

find_bin() {
    local d
    for d in "$bindir" "$bindir/server" "$bindir/worker" "$bindir/bin"; do
        if [ -x "$d/$1" ] && [ -f "$d/$1" ]; then
            echo "$d/$1"
            return 0
        fi
    done
    die "$1 not found under $bindir (build it first)"
}
server_bin=$(find_bin fusionbench-server)
worker_bin=$(find_bin fusionbench-worker)

# Nothing of a surrounding Slurm job may leak into ours.
while read -r v; do unset "$v"; done < <(compgen -e | grep '^SLURM_' || true)
unset DATABASE_URL
if [ -z "${FB_TEST_DATABASE_URL:-}" ]; then
    compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || command -v pg_config >/dev/null ||
        skip "no FB_TEST_DATABASE_URL and no PostgreSQL server installed for scripts/pg.sh"
fi
command -v psql >/dev/null || skip "no psql"

# --- 1. packages ---------------------------------------------------------------
phase "install slurm-wlm, munge"
need_pkgs=()
missing() { # prog...: true when one of them is not on PATH
    local p
    for p in "$@"; do command -v "$p" >/dev/null || return 0; done
    return 1
}
! missing slurmctld slurmd sbatch squeue scancel scontrol sinfo || need_pkgs+=(slurm-wlm)
! missing munged mungekey munge unmunge || need_pkgs+=(munge)
if [ ${#need_pkgs[@]} -gt 0 ]; then
    command -v apt-get >/dev/null || skip "Slurm is not installed and there is no apt-get to install it"
    aptlog=$(mktemp)
    log "installing ${need_pkgs[*]} with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt=(apt-get -o DPkg::Lock::Timeout=300) # another test may be installing too
    if ! "${apt[@]}" install -y -q --no-install-recommends "${need_pkgs[@]}" >"$aptlog" 2>&1; then
        "${apt[@]}" update -q >>"$aptlog" 2>&1 || true
        if ! "${apt[@]}" install -y -q --no-install-recommends "${need_pkgs[@]}" >>"$aptlog" 2>&1; then
            tail -n 20 "$aptlog"
            rm -f "$aptlog"
            skip "apt-get install ${need_pkgs[*]} failed"
        fi
    fi
    rm -f "$aptlog"
fi
slurm_version=$(slurmctld -V 2>/dev/null || echo "slurm ?")
log "$slurm_version, $(munged --version 2>&1 | head -n 1)"

# --- the temp folder and the trap ------------------------------------------------
tmp=$(mktemp -d /tmp/fb-slurm-test.XXXXXX)
chmod 755 "$tmp" # the postgres user must reach $tmp/pg (scripts/pg.sh as root)
mark="FB_SLURM_TEST=$tmp" # in the environment of every Slurm process of ours
server_pid=
munged_pid=
ctld_pid=
slurmd_pid=
pg_dir=
admin_url=
dbname=

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Pids of every process whose environment holds $mark: our daemons, their
# slurmstepd's and the pilots (sbatch --export hands them the mark).
marked_pids() {
    local e pid
    for e in /proc/[0-9]*/environ; do
        pid=${e#/proc/}
        pid=${pid%/environ}
        [ "$pid" != "$$" ] || continue
        if { tr '\0' '\n' <"$e" | grep -qxF "$mark"; } 2>/dev/null; then
            echo "$pid"
        fi
    done
}

stop_pid() { # pid [seconds]: TERM, then KILL after the wait
    local pid=$1 n=$((${2:-10} * 10))
    [ -n "$pid" ] || return 0
    kill "$pid" 2>/dev/null || return 0
    while kill -0 "$pid" 2>/dev/null && [ "$n" -gt 0 ]; do
        sleep 0.1
        n=$((n - 1))
    done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

dump_logs() {
    local f
    for f in "$tmp"/slurm/slurmctld.log "$tmp"/slurm/slurmd.log "$tmp"/munge/munged.log \
        "$tmp"/server.log "$tmp"/jobs/*.out; do
        [ -f "$f" ] || continue
        echo "---- $f (last lines) ----"
        tail -n 25 "$f"
    done
}

cleanup() {
    local rc=$? pids n
    set +e
    trap - EXIT INT TERM
    if [ "$rc" != 0 ] && [ "$rc" != 77 ]; then
        dump_logs
    fi
    if [ -n "$ctld_pid" ] && kill -0 "$ctld_pid" 2>/dev/null; then
        scancel --full --quiet --user=root >/dev/null 2>&1 || true
        scancel --quiet --user=root >/dev/null 2>&1 || true
        n=100
        while [ "$n" -gt 0 ] && [ -n "$(squeue -h -o %i 2>/dev/null)" ]; do
            sleep 0.1
            n=$((n - 1))
        done
    fi
    stop_pid "$server_pid" 10
    stop_pid "$slurmd_pid" 10
    stop_pid "$ctld_pid" 10
    stop_pid "$munged_pid" 10
    # Whatever outlived the daemons (a slurmstepd, a pilot): ours by the mark only.
    pids=$(marked_pids)
    if [ -n "$pids" ]; then
        log "cleanup: killing leftover processes $(tr '\n' ' ' <<<"$pids")"
        # shellcheck disable=SC2086
        kill -9 $pids 2>/dev/null
    fi
    if [ -n "$dbname" ]; then
        psql -X -q -d "$admin_url" -c "DROP DATABASE IF EXISTS $dbname WITH (FORCE)" >/dev/null 2>&1 ||
            log "cleanup: could not drop database $dbname"
    fi
    if [ -n "$pg_dir" ]; then
        "$root/scripts/pg.sh" stop "$pg_dir" >/dev/null 2>&1
    fi
    if [ "${FB_KEEP_TMP:-0}" = 1 ]; then
        log "kept $tmp"
    else
        rm -rf "$tmp"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- 2. a one-node Slurm cluster --------------------------------------------------
phase "start munged, slurmctld, slurmd"
mkdir -p "$tmp/munge" "$tmp/slurm/state" "$tmp/slurm/spool" "$tmp/jobs"
chmod 700 "$tmp/munge"
mungekey --create --keyfile="$tmp/munge/munge.key" 2>/dev/null ||
    dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1 count=1024 status=none
chmod 600 "$tmp/munge/munge.key"
sock="$tmp/munge/munge.socket"
env "$mark" munged --foreground --force --socket="$sock" --key-file="$tmp/munge/munge.key" \
    --pid-file="$tmp/munge/munged.pid" --log-file="$tmp/munge/munged.log" \
    --seed-file="$tmp/munge/munged.seed" --num-threads=2 >"$tmp/munge/stdout.log" 2>&1 &
munged_pid=$!
for _ in $(seq 100); do
    munge -n -S "$sock" 2>/dev/null | unmunge -S "$sock" >/dev/null 2>&1 && break
    kill -0 "$munged_pid" 2>/dev/null || break
    sleep 0.1
done
if ! munge -n -S "$sock" 2>/dev/null | unmunge -S "$sock" >/dev/null 2>&1; then
    cat "$tmp/munge/stdout.log" "$tmp/munge/munged.log" 2>/dev/null | tail -n 20
    skip "munged does not start here"
fi

host=$(hostname -s)
ctld_port=$(free_port)
slurmd_port=$(free_port)
while [ "$slurmd_port" = "$ctld_port" ]; do slurmd_port=$(free_port); done
# The node as slurmd sees it (CPUs, sockets, cores, memory), under our name.
hw=$(slurmd -C | head -n 1 | sed -e 's/^NodeName=[^ ]* //' -e 's/ *UpTime=.*//')
mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$hw")
hw=${hw/RealMemory=$mem/RealMemory=$((mem * 9 / 10))}
ncpu=$(sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' <<<"$hw")
[ "${ncpu:-0}" -ge 2 ] || skip "this machine has ${ncpu:-?} CPU(s); the test runs two 1-CPU pilots at once"
: >"$tmp/slurm/plugstack.conf"
conf="$tmp/slurm/slurm.conf"
cat >"$conf" <<EOF
# written by tests/deploy/test_slurm.sh
ClusterName=fbtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$tmp/slurm/state
SlurmdSpoolDir=$tmp/slurm/spool
SlurmctldPidFile=$tmp/slurm/slurmctld.pid
SlurmdPidFile=$tmp/slurm/slurmd.pid
SlurmctldLogFile=$tmp/slurm/slurmctld.log
SlurmdLogFile=$tmp/slurm/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$tmp/slurm/plugstack.conf
# Containers have no usable cgroups: track processes by parentage, bind nothing.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$tmp/slurm/jobcomp.txt
MpiDefault=none
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
GresTypes=gpu
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=30
MinJobAge=600
InactiveLimit=0
NodeName=$host NodeAddr=127.0.0.1 NodeHostname=$host $hw State=UNKNOWN
PartitionName=fbtest Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$conf"
env "$mark" slurmctld -D -c -i -f "$conf" >"$tmp/slurm/slurmctld.stdout" 2>&1 &
ctld_pid=$!
env "$mark" slurmd -D -f "$conf" >"$tmp/slurm/slurmd.stdout" 2>&1 &
slurmd_pid=$!
node_state=
for _ in $(seq 120); do
    node_state=$(sinfo -h -n "$host" -o %T 2>/dev/null || true)
    [ "$node_state" = idle ] && break
    kill -0 "$ctld_pid" 2>/dev/null || break
    kill -0 "$slurmd_pid" 2>/dev/null || break
    sleep 0.5
done
if [ "$node_state" != idle ]; then
    for f in slurmctld.stdout slurmctld.log slurmd.stdout slurmd.log; do
        echo "---- $f ----"
        tail -n 15 "$tmp/slurm/$f" 2>/dev/null
    done
    sinfo -N -l 2>&1 | tail -n 3 || true
    skip "the one-node Slurm cluster did not come up (node state '${node_state:-none}')"
fi
log "node $host idle: $hw (slurmctld :$ctld_port, slurmd :$slurmd_port)"

# --- 3. FusionBench ---------------------------------------------------------------
phase "database and fusionbench-server"
if [ -n "${FB_TEST_DATABASE_URL:-}" ]; then
    base_url=$FB_TEST_DATABASE_URL
    admin_url=$(python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit((p.scheme, p.netloc, "/postgres", p.query, p.fragment)))' "$base_url")
    dbname="slurm_test_$$"
    psql -X -q -v ON_ERROR_STOP=1 -d "$admin_url" -c "CREATE DATABASE $dbname" >/dev/null ||
        die "CREATE DATABASE $dbname on FB_TEST_DATABASE_URL failed"
    db_url=$(python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit((p.scheme, p.netloc, "/" + sys.argv[2], p.query, p.fragment)))' "$base_url" "$dbname")
else
    pg_dir="$tmp/pg"
    out=$(FB_PG_FAST=1 "$root/scripts/pg.sh" start "$pg_dir" "$(free_port)") ||
        die "scripts/pg.sh start failed"
    db_url=$(tail -n 1 <<<"$out")
fi
http_port=$(free_port)
base="http://127.0.0.1:$http_port"
"$server_bin" --database-url "$db_url" --port "$http_port" --web-dir "$root/web" \
    >"$tmp/server.log" 2>&1 &
server_pid=$!
python3 "$api" ready "$base" 60 || die "fusionbench-server did not become ready"
log "server on $base, database $db_url"

# --- 4. the script's own checks ---------------------------------------------------
phase "script: DATABASE_URL checks"
set +e
msg=$(env -u DATABASE_URL HOME="$tmp/nohome" FUSIONBENCH_DEVICE=cpu FUSIONBENCH_BIN="$worker_bin" \
    bash "$script" 2>&1)
rc=$?
set -e
[ "$rc" = 2 ] || die "the script without DATABASE_URL exited $rc, want 2: $msg"
grep -q "DATABASE_URL is not set" <<<"$msg" || die "no clear message without DATABASE_URL: $msg"
log "ok: exit 2, '$(head -n 1 <<<"$msg")'"
# The URL file must be private; a private one is read (the bad device then stops it).
echo "$db_url" >"$tmp/url"
chmod 644 "$tmp/url"
for want in "readable by others" "FUSIONBENCH_DEVICE='gpu': expected cuda or cpu"; do
    set +e
    msg=$(env -u DATABASE_URL FUSIONBENCH_DATABASE_URL_FILE="$tmp/url" FUSIONBENCH_DEVICE=gpu \
        FUSIONBENCH_BIN="$worker_bin" bash "$script" 2>&1)
    rc=$?
    set -e
    if [ "$rc" != 2 ] || ! grep -qF "$want" <<<"$msg"; then
        die "URL file test: exit $rc, '$msg', want 2, '$want'"
    fi
    chmod 600 "$tmp/url"
done
log "ok: a URL file readable by others is refused, a private one is read"

# --- 5. two pilots ----------------------------------------------------------------
phase "2 pilots RUNNING and registered"
export FUSIONBENCH_DEVICE=cpu FUSIONBENCH_BIN="$worker_bin" FUSIONBENCH_EXIT_WHEN_IDLE=5 \
    FUSIONBENCH_DRAIN_GRACE_S=2 FUSIONBENCH_WORKER_ARGS="--heartbeat-ms 200 --poll-ms 200 --stale-s 10"
# Command-line options override the script's #SBATCH lines: no GPU here, 1 CPU each.
sbatch_cpu=(--gres=none --cpus-per-task=1 --chdir="$tmp/jobs")
array_id=$(sbatch --parsable "${sbatch_cpu[@]}" --array=1-2 \
    --export="ALL,DATABASE_URL=$db_url,$mark" "$script") || die "sbatch of the pilots failed"
array_id=${array_id%%;*}
log "submitted job array $array_id"
p1="${array_id}_1" p2="${array_id}_2"
w1="$host/slurm-$p1" w2="$host/slurm-$p2"
running=
for _ in $(seq 120); do
    running=$(squeue -h -j "$array_id" -t RUNNING -o %i | sort | tr '\n' ' ')
    [ "$running" = "$p1 $p2 " ] && break
    sleep 0.5
done
[ "$running" = "$p1 $p2 " ] || {
    squeue -j "$array_id" -o '%i %T %r' || true
    die "the pilots did not both start (running: '$running')"
}
python3 "$api" workers "$base" 60 "$w1" "$w2" >/dev/null || die "the pilots did not register"
log "pilots $p1 ($w1) and $p2 ($w2) running and idle"

# Where each pilot writes (the script's --output, relative to --chdir), and how it ended.
outfile() { scontrol show job "$1" | tr ' ' '\n' | sed -n 's/^StdOut=//p' | head -n 1; }
jobinfo() { scontrol show job "$1" | tr ' ' '\n' | grep -E '^(JobState|ExitCode)=' | tr '\n' ' '; }
out1=$(outfile "$p1")
out2=$(outfile "$p2")
case "$out1$out2" in "$tmp/jobs/fusionbench-worker-"*) ;; *) die "unexpected output files: $out1, $out2" ;; esac

# --- 6. jobs, and scancel of the pilot holding the long one ------------------------
phase "long job running on a pilot"
long=$(python3 "$api" submit "$base" '{"workload":"gemm_bias_gelu","warmup":1,"iterations":600}')
read -r holder attempt < <(python3 "$api" wait-timing "$base" "$long" 60) ||
    die "the long job $long was not seen timing"
case "$holder" in
"$w1") victim=$p1 other_job=$p2 victim_out=$out1 other_out=$out2 other=$w2 ;;
"$w2") victim=$p2 other_job=$p1 victim_out=$out2 other_out=$out1 other=$w1 ;;
*) die "the long job $long runs on '$holder', not on a pilot" ;;
esac
log "long job $long timing on $holder (attempt $attempt)"
# A blocker (~6 s on one core) keeps the other pilot busy while the long job is
# released, so that the job is seen back in the queue before it is taken over.
blocker=$(python3 "$api" submit "$base" '{"workload":"gemm_bias_gelu","warmup":1,"iterations":400}')
read -r bworker _ < <(python3 "$api" wait-timing "$base" "$blocker" 60) ||
    die "the blocker job $blocker was not seen timing"
[ "$bworker" = "$other" ] || die "the blocker job $blocker runs on '$bworker', want $other"
small=$(python3 "$api" submit "$base" \
    '{"workload":"gemm_bias_relu","params":{"m":64,"k":64,"n":64},"warmup":2,"iterations":20}' 20)
log "blocker job $blocker timing on $other; 20 small jobs queued: $small"

phase "scancel: long job released, taken over"
scancel "$victim" || die "scancel $victim failed"
log "scancel $victim (holder of job $long)"
if ! taken=$(python3 "$api" watch-release "$base" "$long" "$holder" "$attempt" 60); then
    die "job $long was not released to the other pilot"
fi
read -r new_worker seen <<<"$taken"
[ "$new_worker" = "$other" ] || die "job $long taken over by '$new_worker', want $other"
[ "$seen" = queued-seen ] || die "job $long was never seen queued after the release"
log "job $long back in the queue (attempt $((attempt - 1)), not counted), then taken over by $new_worker"
for _ in $(seq 100); do
    [ -z "$(squeue -h -j "$victim" -o %i)" ] && break
    sleep 0.1
done
[ -z "$(squeue -h -j "$victim" -o %i)" ] || die "the cancelled pilot $victim is still in squeue"
grep -q "stop signal: draining" "$victim_out" || die "$victim_out: the pilot never saw the stop signal"
grep -q "job $long: releasing it" "$victim_out" || die "$victim_out: the pilot did not release job $long"
grep -q "job $long attempt $attempt: released" "$victim_out" ||
    die "$victim_out: the pilot did not record the release of job $long"
grep -q "drained after" "$victim_out" || die "$victim_out: the pilot did not exit by itself after draining"
log "pilot $victim: stop signal, job $long released, drained and exited (not killed): $(jobinfo "$victim")"

phase "all 22 jobs succeed"
# shellcheck disable=SC2086
per=$(python3 "$api" wait-all "$base" 180 $long $blocker $small) || die "not all jobs succeeded"
read -r state worker att < <(python3 "$api" job "$base" "$long") || die "GET job $long failed"
[ "$state $worker $att" = "succeeded $other 1" ] ||
    die "long job $long: '$state $worker $att', want 'succeeded $other 1'"
log "22 jobs (long, blocker, 20 small) succeeded ($per); job $long: $state on $worker, attempt $att"

# --- 7. leaving: idle, scancel --batch --signal=TERM, the time limit ---------------
phase "idle exit, signal, time limit"
# Pilot 3: a 1-minute limit and --signal=B:TERM@20 (overriding the script's @120,
# with FUSIONBENCH_SIGNAL_LEAD_S to match).  It idles (nothing is queued) until
# Slurm's signal, which must reach the exec'd worker: it exits 0 before the limit.
# slurmctld checks every 30 s and signals once now + lead + 30 s >= the end: @20
# makes that true 10 s after the start (the worker is up by then; a signal due
# before the batch step runs is lost), so it comes 10 to 40 s after the start.
tl_id=$(FUSIONBENCH_EXIT_WHEN_IDLE=300 FUSIONBENCH_SIGNAL_LEAD_S=20 sbatch --parsable \
    "${sbatch_cpu[@]}" --time=1 --signal=B:TERM@20 \
    --export="ALL,DATABASE_URL=$db_url,$mark" "$script") || die "sbatch of the time-limit pilot failed"
tl_id=${tl_id%%;*}
# Pilot 4: stopped the way deploy/slurm/README.md says (scancel --batch --signal=TERM).
sg_id=$(FUSIONBENCH_EXIT_WHEN_IDLE=300 sbatch --parsable "${sbatch_cpu[@]}" \
    --export="ALL,DATABASE_URL=$db_url,$mark" "$script") || die "sbatch of the 4th pilot failed"
sg_id=${sg_id%%;*}
log "submitted pilots $tl_id (--time=1 --signal=B:TERM@20) and $sg_id (to be signalled)"
t7=$EPOCHREALTIME
gone() { [ -z "$(squeue -h -j "$1" -o %i)" ]; }
# Waits up to $2 seconds for Slurm job $1 to leave the queue; false if it stays.
wait_gone() {
    local _
    for _ in $(seq $(($2 * 2))); do
        gone "$1" && return 0
        sleep 0.5
    done
    gone "$1"
}
wait_gone "$other_job" 60 || die "pilot $other_job did not exit when idle"
idle_gone=$(elapsed "$t7")
awk -v t="$idle_gone" 'BEGIN { exit !(t < 5 + 30) }' ||
    die "pilot $other_job took $idle_gone s to leave, want < exit-when-idle (5 s) + 30 s"
info=$(jobinfo "$other_job")
[ "$info" = "JobState=COMPLETED ExitCode=0:0 " ] || die "pilot $other_job: '$info', want COMPLETED, 0:0"
grep -q -- "(--exit-when-idle); exiting" "$other_out" ||
    die "$other_out does not say the pilot exited for --exit-when-idle"
log "pilot $other_job left after $idle_gone s: $info, exited for --exit-when-idle"

wsg="$host/slurm-$sg_id"
python3 "$api" workers "$base" 60 "$wsg" >/dev/null || die "pilot $sg_id did not register"
sg_out=$(outfile "$sg_id")
# Without --batch, scancel --signal does not signal the batch step (man scancel):
# documented in the README, logged here.
scancel --signal=TERM "$sg_id" || die "scancel --signal=TERM $sg_id failed"
sleep 2
if grep -q "stop signal" "$sg_out"; then
    log "note: scancel --signal=TERM (no --batch) did reach the worker with this Slurm"
else
    log "ok: scancel --signal=TERM without --batch did not reach the worker (batch step not signalled)"
fi
scancel --batch --signal=TERM "$sg_id" || die "scancel --batch --signal=TERM $sg_id failed"
wait_gone "$sg_id" 30 || die "pilot $sg_id did not exit after scancel --batch --signal=TERM"
info=$(jobinfo "$sg_id")
[ "$info" = "JobState=COMPLETED ExitCode=0:0 " ] || die "pilot $sg_id: '$info', want COMPLETED, 0:0"
grep -q "drained after 0 job(s); exiting" "$sg_out" || die "$sg_out: the pilot did not drain and exit"
log "pilot $sg_id: scancel --batch --signal=TERM: drained and exited, $info"

wait_gone "$tl_id" 90 || die "the time-limit pilot $tl_id never left squeue"
tl_gone=$(elapsed "$t7")
tl_out=$(outfile "$tl_id")
info=$(jobinfo "$tl_id")
[ "$info" = "JobState=COMPLETED ExitCode=0:0 " ] ||
    die "time-limit pilot $tl_id: '$info', want COMPLETED, 0:0 (the worker should exit before the limit)"
grep -q "stop signal: draining" "$tl_out" || die "$tl_out: the pilot never saw Slurm's signal"
grep -q "drained after 0 job(s); exiting" "$tl_out" || die "$tl_out: the pilot did not drain and exit"
log "time-limit pilot $tl_id: got the B:TERM, drained and exited ${tl_gone} s after submission (limit 60 s): $info"
# jobcomp/filetxt records every finished Slurm job with its exit code.
if [ -f "$tmp/slurm/jobcomp.txt" ]; then
    log "Slurm's job completion records (jobcomp/filetxt):"
    awk '{ l = " "; for (i = 1; i <= NF; i++)
               if ($i ~ /^(JobId|JobState|TimeLimit|ArrayJobId|ArrayTaskId|ExitCode)=/) l = l " " $i
           print l }' "$tmp/slurm/jobcomp.txt"
fi

phase
echo "---- timings ----"
printf '  %s\n' "${PHASES[@]}"
printf '  %-40s %6s s\n' "total" "$(elapsed "$T0")"
echo "$slurm_version"
echo "PASS: test_slurm"

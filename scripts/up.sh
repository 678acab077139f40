#!/usr/bin/env bash
# up.sh: the embedded default.  Installs what is missing, builds, starts a private
# PostgreSQL (unless DATABASE_URL is set), the server and one worker, submits a
# demo suite (the ten fusion patterns) and shows its results as they finish; then
# keeps everything running until Ctrl-C / SIGTERM and stops it all cleanly.
#
# The worker is supervised as systemd's Restart=on-failure would: if it dies (a
# crash, SIGKILL, the OOM killer) it is restarted after a backoff (1 s doubling
# to 30 s) while the server and the database stay up; its job is requeued by the
# rescuer and runs again, once.  A worker that exits 0 (drained through the API)
# is not restarted.
#
# As root, the private cluster runs as the postgres user, which must reach its
# data folder: when a parent of FUSIONBENCH_HOME is closed to it (a clone under
# /root, mode 0700), the cluster lives in /var/lib/fusionbench/pg-<hash of
# FUSIONBENCH_HOME> instead and FUSIONBENCH_HOME/pg is a link to it.
#
# Environment:
#   DATABASE_URL                use this PostgreSQL instead of the private cluster
#   FUSIONBENCH_PORT            HTTP port of the server (default 8080)
#   FUSIONBENCH_HOME            data folder (default <repo>/.fusionbench): pg/, log/
#   FUSIONBENCH_PG_PORT         port of the private cluster (default: the one it
#                               used last time, else 55432, else a free one)
#   FUSIONBENCH_BUILD_DIR       build folder (default <repo>/build)
#   FUSIONBENCH_EXIT_AFTER_DEMO=1  exit once the demo's jobs are finished:
#                               0 when all succeeded, 1 otherwise (for tests)
#   FUSIONBENCH_DEMO_ITERATIONS timed iterations per variant of the demo (default 10)
#   FUSIONBENCH_STALE_S         the worker's stale timeout (default 30): a killed
#                               worker's job is requeued after this long
#   FUSIONBENCH_SKIP_DEPS=1     do not run scripts/deps.sh
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FB_HOME=${FUSIONBENCH_HOME:-$ROOT/.fusionbench}
BUILD=${FUSIONBENCH_BUILD_DIR:-$ROOT/build}
PORT=${FUSIONBENCH_PORT:-8080}
DEMO_ITERS=${FUSIONBENCH_DEMO_ITERATIONS:-10}
LOG_DIR=$FB_HOME/log
PG_DIR=$FB_HOME/pg
BASE=http://127.0.0.1:$PORT
WORKLOADS=(gemm_bias_relu gemm_bias_gelu mlp conv_bn_relu conv_relu_conv
           elementwise_chain softmax layernorm add_layernorm attention)

server_pid=""
worker_pid="" # the worker's supervisor (supervise_worker)
watch_pid=""
own_cluster=0

say() { echo "up.sh: $*" >&2; }
die() {
    say "error: $*"
    exit 1
}

is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }

# True when something accepts TCP connections on 127.0.0.1:$1.
port_busy() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Stops a child: SIGTERM, then SIGKILL after $2 seconds.
stop_pid() {
    local pid=$1 grace=$2 i
    [[ -n "$pid" ]] || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    for ((i = 0; i < grace * 10; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    [[ -z "$watch_pid" ]] || stop_pid "$watch_pid" 1
    # Worker first: it releases a running job while the database is still up.
    if [[ -n "$worker_pid" ]]; then
        say "stopping worker"
        stop_pid "$worker_pid" 20
    fi
    if [[ -n "$server_pid" ]]; then
        say "stopping server"
        stop_pid "$server_pid" 10
    fi
    if ((own_cluster)); then
        say "stopping the private PostgreSQL in $PG_DIR (data kept)"
        "$ROOT/scripts/pg.sh" stop "$PG_DIR" >/dev/null 2>&1 || say "pg.sh stop failed"
    fi
    exit "$rc"
}

build() {
    if [[ "${FUSIONBENCH_SKIP_DEPS:-0}" != "1" ]]; then
        "$ROOT/scripts/deps.sh" || die "installing packages failed (scripts/deps.sh)"
    fi
    say "building in $BUILD"
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$LOG_DIR/cmake.log" 2>&1 ||
        { tail -n 30 "$LOG_DIR/cmake.log" >&2; die "cmake configure failed (log: $LOG_DIR/cmake.log)"; }
    # Everything the closing help tells the user to run: the client too.
    cmake --build "$BUILD" -j"$(nproc)" --target fusionbench-server fusionbench-worker \
        fusionbench-run fusionbench >>"$LOG_DIR/cmake.log" 2>&1 ||
        { tail -n 30 "$LOG_DIR/cmake.log" >&2; die "build failed (log: $LOG_DIR/cmake.log)"; }
}

# The port of the private cluster: explicit, else last time's, else 55432 if free.
pg_port() {
    if [[ -n "${FUSIONBENCH_PG_PORT:-}" ]]; then
        echo "$FUSIONBENCH_PG_PORT"
    elif [[ -f "$PG_DIR/port" ]]; then
        cat "$PG_DIR/port"
    elif ! port_busy 55432; then
        echo 55432
    else
        free_port
    fi
}

# As root the cluster belongs to postgres, which needs to reach PG_DIR: when a
# parent folder is closed to it, the cluster goes under /var/lib/fusionbench and
# PG_DIR becomes a link there (pg.sh resolves it).
place_cluster() {
    local real
    ((EUID == 0)) || return 0
    id postgres >/dev/null 2>&1 || return 0
    [[ -L "$PG_DIR" ]] && return 0 # placed by an earlier run
    if runuser -u postgres -- test -x "$FB_HOME"; then
        return 0
    fi
    [[ -e "$PG_DIR" ]] && die "user postgres cannot reach $PG_DIR (a parent folder is closed to it); move it away or set FUSIONBENCH_HOME"
    real=/var/lib/fusionbench/pg-$(printf '%s' "$FB_HOME" | sha256sum | cut -c1-16)
    mkdir -p "$real" || die "cannot create $real"
    ln -s "$real" "$PG_DIR" || die "cannot link $PG_DIR to $real"
    say "user postgres cannot reach $FB_HOME (a parent folder is closed to it): the private PostgreSQL lives in $real ($PG_DIR links to it)"
}

start_database() {
    if [[ -n "${DATABASE_URL:-}" ]]; then
        DB_URL=$DATABASE_URL
        say "using DATABASE_URL"
        return
    fi
    local out port
    own_cluster=1
    place_cluster
    port=$(pg_port)
    if ! out=$("$ROOT/scripts/pg.sh" start "$PG_DIR" "$port" 2>"$LOG_DIR/pg-start.log"); then
        # Last time's port may belong to someone else now: take a free one.
        if [[ -n "${FUSIONBENCH_PG_PORT:-}" ]]; then
            tail -n 5 "$LOG_DIR/pg-start.log" >&2
            die "could not start the private PostgreSQL in $PG_DIR on port $port"
        fi
        say "port $port did not work for the private PostgreSQL (log: $LOG_DIR/pg-start.log)"
        port=$(free_port)
        say "retrying the private PostgreSQL on port $port"
        out=$("$ROOT/scripts/pg.sh" start "$PG_DIR" "$port") ||
            die "could not start the private PostgreSQL in $PG_DIR"
    fi
    DB_URL=$(tail -n 1 <<<"$out")
    say "private PostgreSQL in $PG_DIR: $DB_URL"
}

start_server() {
    "$BUILD/server/fusionbench-server" --database-url "$DB_URL" --port "$PORT" \
        --web-dir "$ROOT/web" >>"$LOG_DIR/server.log" 2>&1 &
    server_pid=$!
    local i
    for ((i = 0; i < 600; i++)); do
        if curl -fsS -o /dev/null "$BASE/readyz" 2>/dev/null; then
            say "server ready on $BASE (log: $LOG_DIR/server.log)"
            return
        fi
        if ! kill -0 "$server_pid" 2>/dev/null; then
            server_pid=""
            tail -n 20 "$LOG_DIR/server.log" >&2
            die "the server exited during start (log: $LOG_DIR/server.log)"
        fi
        sleep 0.1
    done
    die "the server did not become ready in 60 s (log: $LOG_DIR/server.log)"
}

# cuda when a GPU answers and this worker was built with CUDA; cpu otherwise.
worker_device() {
    local bin=$1
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 &&
        ldd "$bin" 2>/dev/null | grep -q 'libcuda'; then
        echo cuda
    else
        echo cpu
    fi
}

# Runs the worker and restarts it when it dies, until told to stop (SIGTERM,
# forwarded to the worker, which releases its job) or until it exits 0.
supervise_worker() {
    local bin=$1 dev=$2 id=$3 child=0 backoff=1 started rc stopping=0
    trap 'stopping=1; ((child)) && kill -TERM "$child" 2>/dev/null' TERM
    while true; do
        started=$SECONDS
        "$bin" --database-url "$DB_URL" --device "$dev" --id "$id" >>"$LOG_DIR/worker.log" 2>&1 &
        child=$!
        while true; do # wait returns early when the trap runs: wait again
            rc=0
            wait "$child" || rc=$? # (set -e: a failing wait must not end the supervisor)
            kill -0 "$child" 2>/dev/null || break
        done
        child=0
        ((stopping)) && exit 0
        if ((rc == 0)); then
            # Ctrl-C at a terminal reaches the worker and up.sh together, and
            # up.sh's stop (SIGTERM here) follows within its second's look at
            # the server; a drain through the API sends none
            sleep 2 &
            wait $! || true
            ((stopping)) && exit 0
            say "the worker exited cleanly (drained?); not restarting it"
            exit 0
        fi
        ((SECONDS - started >= 60)) && backoff=1
        say "the worker died ($( ((rc > 128)) && echo "signal $((rc - 128))" || echo "exit status $rc")); restarting it in $backoff s (log: $LOG_DIR/worker.log)"
        sleep "$backoff" &
        wait $! || true
        ((stopping)) && exit 0
        backoff=$((backoff * 2 > 30 ? 30 : backoff * 2))
    done
}

# Prints the started_at of worker $1 as GET /workers says, or nothing.
worker_started_at() {
    curl -fsS "$BASE/api/v1/workers" 2>/dev/null | python3 -c '
import json, sys
for w in json.load(sys.stdin)["items"]:
    if w["id"] == sys.argv[1] and w["state"] in ("idle", "busy"):
        print(w["started_at"])
' "$1" || true
}

start_worker() {
    local bin=$BUILD/worker/fusionbench-worker dev id before now
    dev=$(worker_device "$bin")
    id="${HOSTNAME:-$(uname -n)}/${dev}0"
    # A row of an earlier run may still look alive (a worker that could not say
    # "stopped"): wait for a registration newer than it.
    before=$(worker_started_at "$id")
    supervise_worker "$bin" "$dev" "$id" &
    worker_pid=$!
    # Wait for our worker to be live: the demo's jobs then default to its device.
    local i
    for ((i = 0; i < 300; i++)); do
        now=$(worker_started_at "$id")
        if [[ -n "$now" && "$now" != "$before" ]]; then
            say "worker started on $dev (log: $LOG_DIR/worker.log)"
            return
        fi
        if ! kill -0 "$worker_pid" 2>/dev/null; then
            worker_pid=""
            tail -n 20 "$LOG_DIR/worker.log" >&2
            die "the worker exited during start (log: $LOG_DIR/worker.log)"
        fi
        sleep 0.1
    done
    die "the worker did not register in 30 s (log: $LOG_DIR/worker.log)"
}

# Submits the demo as one suite (one job per workload), so that it lands on the
# dashboard's overview; prints the suite id, then the job ids, one a line.
submit_demo() {
    local body out names
    names=$(printf '"%s",' "${WORKLOADS[@]}")
    body=$(printf '{"name":"demo: the ten fusion patterns (up.sh)","workloads":[%s],"variants":["eager","fused"],"warmup":3,"iterations":%s,"labels":{"demo":"up"}}' \
        "${names%,}" "$DEMO_ITERS")
    out=$(curl -sS -X POST -H 'Content-Type: application/json' --data "$body" \
        -w '\n%{http_code}' "$BASE/api/v1/suites") || die "POST /api/v1/suites failed"
    if [[ "$(tail -n 1 <<<"$out")" != "201" ]]; then
        die "submitting the demo suite failed: $(head -n -1 <<<"$out")"
    fi
    head -n -1 <<<"$out" | python3 -c '
import json, sys
s = json.load(sys.stdin)
print(s["id"])
for row in s["rows"]:
    print(row["job_id"])'
}

# Polls the demo's jobs and prints a line as each finishes, then a summary.
# Exit status 0 when every job succeeded.
watch_demo() {
    python3 - "$BASE" "$@" <<'PY'
import json, math, sys, time, urllib.request

base, ids = sys.argv[1], [int(x) for x in sys.argv[2:]]
seen = {}

def jobs():
    url = base + "/api/v1/jobs?label=demo:up&limit=200"
    with urllib.request.urlopen(url, timeout=10) as r:
        items = json.load(r)["items"]
    return {j["id"]: j for j in items if j["id"] in ids}

def ms(v):
    return "%9.3f" % v if isinstance(v, (int, float)) else "%9s" % "-"

def line(j):
    spec, res = j.get("spec") or {}, j.get("result") or {}
    med = {v["name"]: (v.get("latency_ms") or {}).get("median") for v in res.get("variants", [])}
    cmp_ = res.get("comparison") or {}
    sp = (cmp_.get("speedup") or {}).get("fused")
    ci = (cmp_.get("speedup_ci95") or {}).get("fused")
    change = {"faster": "faster", "slower": "slower", "no_difference": "no difference"}.get(
        (cmp_.get("change") or {}).get("fused"), "")
    if any(v.get("unstable") for v in res.get("variants", [])):
        change += ", unstable"
    err = (j.get("error") or {}).get("message", "")
    sp_s = "%6.2fx" % sp if isinstance(sp, (int, float)) else "%7s" % "-"
    ci_s = "[%.2f, %.2f]" % tuple(ci) if isinstance(ci, list) and len(ci) == 2 else ""
    return "  %-18s %-9s eager %s ms  fused %s ms  speedup %s %-14s %s%s" % (
        spec.get("workload", "?"), j["state"], ms(med.get("eager")), ms(med.get("fused")),
        sp_s, ci_s, change, (" " + err) if err else "")

print("  %-18s %-9s %s" % ("workload", "state", "results as they finish (medians; the "
                                               "speedup's 95% interval and verdict)"), flush=True)
done = {}
while len(done) < len(ids):
    try:
        cur = jobs()
    except Exception as e:  # the server may be busy; try again
        print("  (poll failed: %s)" % e, flush=True)
        time.sleep(2)
        continue
    for i in ids:
        j = cur.get(i)
        if j and j["state"] in ("succeeded", "failed", "canceled") and i not in done:
            done[i] = j
            print(line(j), flush=True)
        elif j and j["state"] == "running" and seen.get(i) != "running":
            print("  %-18s running" % j["spec"]["workload"], flush=True)
        if j:
            seen[i] = j["state"]
    time.sleep(1)

ok = sum(1 for j in done.values() if j["state"] == "succeeded")
sps = [((j.get("result") or {}).get("comparison") or {}).get("speedup", {}).get("fused")
       for j in done.values()]
sps = [s for s in sps if isinstance(s, (int, float)) and s > 0]
geo = math.exp(sum(math.log(s) for s in sps) / len(sps)) if sps else 0.0
print("demo: %d of %d jobs succeeded; fused speedup geometric mean %s" %
      (ok, len(ids), ("%.2fx" % geo) if sps else "-"), flush=True)
sys.exit(0 if ok == len(ids) else 1)
PY
}

print_help() {
    cat <<EOF

FusionBench is up.
  dashboard   $BASE/   (the overview: the demo suite's speedups, kernels and
              memory as its jobs finish; this suite: $BASE/#/suites/$1)
  client      export PATH=$BUILD/client:\$PATH FUSIONBENCH_URL=$BASE
  jobs        fusionbench jobs
  submit      fusionbench submit softmax --iterations 20 --wait
  suite       fusionbench suite show $1
  workers     fusionbench workers
  models      fusionbench model list
  api         curl -s '$BASE/api/v1/jobs?label=demo:up'
  metrics     curl -s $BASE/metrics
  logs        $LOG_DIR/
  local run   $BUILD/worker/fusionbench-run softmax
Ctrl-C stops the worker, the server and the private PostgreSQL (data is kept).

EOF
}

# Waits for a signal; a server that dies ends the script with an error.  The
# worker's supervisor ends only when the worker exited 0 (drained): the server
# and the database stay up.
idle() {
    while true; do
        sleep 1 &
        wait $! || true
        if ! kill -0 "$server_pid" 2>/dev/null; then
            local rc=0
            wait "$server_pid" 2>/dev/null || rc=$?
            server_pid=""
            # Ctrl-C at a terminal signals the whole process group: the server
            # can stop, cleanly, before this shell's INT trap runs
            ((rc == 0)) && exit 130
            die "the server stopped (exit status $rc; log: $LOG_DIR/server.log)"
        fi
        if [[ -n "$worker_pid" ]] && ! kill -0 "$worker_pid" 2>/dev/null; then
            wait "$worker_pid" 2>/dev/null || true
            worker_pid=""
            say "no worker now: jobs wait in the queue (start one, or Ctrl-C and run up.sh again)"
        fi
    done
}

main() {
    is_uint "$PORT" && ((PORT >= 1 && PORT <= 65535)) || die "FUSIONBENCH_PORT '$PORT' is not a port number"
    is_uint "$DEMO_ITERS" && ((DEMO_ITERS >= 1)) || die "FUSIONBENCH_DEMO_ITERATIONS '$DEMO_ITERS' is not a positive integer"
    port_busy "$PORT" && die "port $PORT is already in use (another FusionBench?); set FUSIONBENCH_PORT to a free port"
    mkdir -p "$LOG_DIR"
    trap cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    build
    start_database
    start_server
    start_worker
    local ids suite
    mapfile -t ids < <(submit_demo)
    ((${#ids[@]} == ${#WORKLOADS[@]} + 1)) || die "submitting the demo failed"
    suite=${ids[0]}
    ids=("${ids[@]:1}")
    say "submitted the demo suite $suite: ${#ids[@]} jobs (label demo:up), ids ${ids[*]}"
    print_help "$suite"
    # In the background so that a signal interrupts the wait at once.
    local demo_rc=0
    watch_demo "${ids[@]}" &
    watch_pid=$!
    wait "$watch_pid" || demo_rc=$?
    watch_pid=""
    if [[ "${FUSIONBENCH_EXIT_AFTER_DEMO:-0}" == "1" ]]; then
        exit "$demo_rc"
    fi
    say "running; Ctrl-C to stop"
    idle
}

main "$@"

#!/usr/bin/env bash
# bench/submit.sh: job submissions per second on loopback, end to end.
#
# Starts a throwaway PostgreSQL (scripts/pg.sh) in a temp folder, registers a
# worker, starts fusionbench-server, drives POST /api/v1/jobs with wrk and
# bench/submit.lua, checks that every answer was 201 Created and that the jobs
# table holds at least as many rows as wrk counted 201s, then stops everything
# it started.  Exit 0 only when the checks hold.
#
#   bench/submit.sh [BIN_DIR]          BIN_DIR: a CMake build folder (default build)
# Also prints the server's group commits (fusionbench_submit_* in /metrics): how
# many jobs shared each durable commit.
# Env: SUBMIT_DURATION (10s), SUBMIT_CONNECTIONS (32), SUBMIT_WRK_THREADS (1),
#      SUBMIT_SERVER_THREADS (server default when unset), SUBMIT_PG_PORT (55470),
#      SUBMIT_HTTP_PORT (18470), FB_PG_FAST=1 (fsync off: the no-durability bound),
#      SUBMIT_AUTH=1: the server runs with --auth and every request carries a user's
#      API token (the jobs get an owner, as on a lab's server); the token's rate
#      limit is set past reach (--submit-rate 1e9), so it is checked but never hit.
#
# Why the worker is registered by SQL and not run: a live worker would claim the
# submitted jobs and run them on the same two cores that serve the requests, so
# the figure would measure benchmarks, not submissions.  The row is what
# db_worker_register writes (docs/API.md's workload fields), and its heartbeat is kept
# fresh by a loop so the server's catalog counts it as live.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(realpath -m "${1:-$root/build}")
server="$bin/server/fusionbench-server"
duration=${SUBMIT_DURATION:-10s}
conns=${SUBMIT_CONNECTIONS:-32}
wrk_threads=${SUBMIT_WRK_THREADS:-1}
pg_port=${SUBMIT_PG_PORT:-55470}
http_port=${SUBMIT_HTTP_PORT:-18470}
worker_id=bench/noop0

die() {
    echo "submit.sh: $*" >&2
    exit 1
}
[ -x "$server" ] || die "$server not built (cmake --build $bin --target fusionbench-server)"
command -v wrk >/dev/null || die "wrk not found (apt-get install wrk)"
command -v curl >/dev/null || die "curl not found"
psql_bin=$(command -v psql || ls /usr/lib/postgresql/*/bin/psql 2>/dev/null | tail -n 1)
[ -n "$psql_bin" ] || die "psql not found"

tmp=$(mktemp -d /tmp/fb-submit.XXXXXX)
chmod 755 "$tmp" # the postgres user must reach the cluster folder inside
server_pid="" beat_pid=""
cleanup() {
    set +e # every step runs, whatever the one before it returned
    for pid in $beat_pid $server_pid; do
        kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    done
    "$root/scripts/pg.sh" stop "$tmp/pg" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT

url=$("$root/scripts/pg.sh" start "$tmp/pg" "$pg_port" | tail -n 1)
sql() { "$psql_bin" -X -q -v ON_ERROR_STOP=1 -tA -d "$url" -c "$1"; }

# The server migrates at start; wait for it before registering the worker.
server_args=(--database-url "$url" --port "$http_port" --bind 127.0.0.1)
[ -n "${SUBMIT_SERVER_THREADS:-}" ] && server_args+=(--threads "$SUBMIT_SERVER_THREADS")
[ "${SUBMIT_AUTH:-0}" = 1 ] && server_args+=(--auth --submit-rate 1e9)
FUSIONBENCH_LOG=warn "$server" "${server_args[@]}" >"$tmp/server.log" 2>&1 &
server_pid=$!
base="http://127.0.0.1:$http_port"
for _ in $(seq 100); do
    curl -sf "$base/readyz" >/dev/null 2>&1 && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$tmp/server.log" >&2; die "server exited"; }
    sleep 0.1
done
curl -sf "$base/readyz" >/dev/null || die "server not ready (log: $(cat "$tmp/server.log"))"

workload='{"name":"gemm_bias_relu","engine":"native","domain":"pattern",
  "description":"GEMM + bias + ReLU","default_batch_size":1,"devices":["cpu"],
  "dtypes":["float32"],"variants":["eager","fused"]}'
sql "INSERT INTO workers (id, host, device, engines, workloads)
     VALUES ('$worker_id', 'bench', '{\"kind\":\"cpu\",\"name\":\"bench\"}',
             '[\"native\"]', jsonb_build_array('$workload'::jsonb))"
(while sleep 2; do sql "UPDATE workers SET last_heartbeat = now() WHERE id = '$worker_id'" ||
    exit 0; done) &
beat_pid=$!

auth=()
if [ "${SUBMIT_AUTH:-0}" = 1 ]; then
    FUSIONBENCH_LOG=warn "$server" --database-url "$url" user add bench --role user 2>/dev/null
    FB_SUBMIT_TOKEN=$(FUSIONBENCH_LOG=warn "$server" --database-url "$url" token create bench 2>/dev/null)
    export FB_SUBMIT_TOKEN
    auth=(-H "Authorization: Bearer $FB_SUBMIT_TOKEN")
fi

# One request by hand first: a harness that only ever sees errors must stop here.
code=$(curl -s -o "$tmp/first.json" -w '%{http_code}' -H 'Content-Type: application/json' \
    "${auth[@]}" --data '{"workload":"gemm_bias_relu"}' "$base/api/v1/jobs")
[ "$code" = 201 ] || die "first POST answered $code: $(cat "$tmp/first.json")"
before=$(sql "SELECT count(*) FROM jobs")

echo "wrk -t$wrk_threads -c$conns -d$duration -s bench/submit.lua $base/api/v1/jobs" \
    "(PostgreSQL fsync $([ "${FB_PG_FAST:-0}" = 1 ] && echo off || echo on);" \
    "authentication $([ "${SUBMIT_AUTH:-0}" = 1 ] && echo on || echo off))"
wrk -t"$wrk_threads" -c"$conns" -d"$duration" --latency -s "$root/bench/submit.lua" \
    "$base/api/v1/jobs" | tee "$tmp/wrk.out"
after=$(sql "SELECT count(*) FROM jobs")
# The server's group commits (srv_submit): jobs per commit under this load.
metrics=$(curl -sf "$base/metrics" || true)
commits=$(awk '/^fusionbench_submit_batches_total / {print $2}' <<<"$metrics")
committed=$(awk '/^fusionbench_submit_jobs_total / {print $2}' <<<"$metrics")

rps=$(awk '/^Requests\/sec:/ {print $2}' "$tmp/wrk.out")
created=$(awk '/^created_201/ {print $2}' "$tmp/wrk.out")
bad=$(awk '/^not_201/ {print $2}' "$tmp/wrk.out")
non2xx=$(awk '/Non-2xx or 3xx responses:/ {print $NF}' "$tmp/wrk.out")
errors=$(grep -c '^  Socket errors' "$tmp/wrk.out" || true)
echo "submits/s $rps; 201s $created; other statuses $bad; wrk non-2xx ${non2xx:-0};" \
    "socket error lines $errors; jobs inserted $((after - before))"
if [ -n "$commits" ] && [ "$commits" -gt 0 ]; then
    echo "group commits $commits for $committed jobs ($(awk -v j="$committed" -v b="$commits" \
        'BEGIN {printf "%.1f", j / b}') jobs per commit)"
fi
[ "${bad:-1}" = 0 ] && [ -z "$non2xx" ] || die "some answers were not 201"
[ "$((after - before))" -ge "$created" ] || die "fewer jobs in the table than 201s"
if [ "${SUBMIT_AUTH:-0}" = 1 ]; then
    owned=$(sql "SELECT count(*) FROM jobs j JOIN users u ON u.id = j.owner_id WHERE u.name = 'bench'")
    echo "jobs owned by the token's user: $owned"
    [ "$owned" = "$after" ] || die "$((after - owned)) jobs without the token's owner"
fi

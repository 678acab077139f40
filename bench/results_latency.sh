#!/usr/bin/env bash
# bench/results_latency.sh: a throwaway PostgreSQL (scripts/pg.sh) and a server,
# 100,000 seeded results, then GET /api/v1/results latency (bench/results_latency.py).
#
#   bench/results_latency.sh [BUILD_DIR] [results_latency.py options: --results N --requests N]
# Env: RESULTS_PG_PORT (55476), FB_PG_FAST=1 (fsync off: seeding goes faster).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build"
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then
    build=$1
    shift
fi
server="$build/server/fusionbench-server"
[ -x "$server" ] || { echo "results_latency.sh: $server not built" >&2; exit 1; }

tmp=$(mktemp -d /tmp/fb-results.XXXXXX)
chmod 755 "$tmp"
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    "$root/scripts/pg.sh" stop "$tmp/pg" >/dev/null 2>&1
    rm -rf "$tmp"
}
trap cleanup EXIT

url=$("$root/scripts/pg.sh" start "$tmp/pg" "${RESULTS_PG_PORT:-55476}" 2>/dev/null | tail -n 1)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
FUSIONBENCH_LOG=warn "$server" --database-url "$url" --port "$port" --web-dir "$root/web" &
pid=$!
for _ in $(seq 100); do
    curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
    sleep 0.1
done
python3 "$root/bench/results_latency.py" --database-url "$url" --server "http://127.0.0.1:$port" "$@"

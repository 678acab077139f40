#!/usr/bin/env bash
# bench/queue.sh: runs bench/queue_claims against a throwaway PostgreSQL
# (scripts/pg.sh) in a temp folder, then stops and removes the cluster.
#
#   bench/queue.sh [BUILD_DIR] [queue_claims options: --jobs N --workers W]
# Env: QUEUE_PG_PORT (55475), FB_PG_FAST=1 (fsync off: the no-durability bound).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build"
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then
    build=$1
    shift
fi
bin="$build/bench/queue_claims"
[ -x "$bin" ] || { echo "queue.sh: $bin not built (cmake --build $build --target queue_claims)" >&2; exit 1; }

tmp=$(mktemp -d /tmp/fb-queue.XXXXXX)
chmod 755 "$tmp" # the postgres user must reach the cluster folder inside
cleanup() {
    "$root/scripts/pg.sh" stop "$tmp/pg" >/dev/null 2>&1
    rm -rf "$tmp"
}
trap cleanup EXIT

url=$("$root/scripts/pg.sh" start "$tmp/pg" "${QUEUE_PG_PORT:-55475}" 2>/dev/null | tail -n 1)
echo "queue_claims $* (PostgreSQL fsync $([ "${FB_PG_FAST:-0}" = 1 ] && echo off || echo on))"
FUSIONBENCH_LOG=warn "$bin" --database-url "$url" "$@"

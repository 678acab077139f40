#!/usr/bin/env bash
# bench/soak.sh: the soak (bench/soak.py) on a throwaway PostgreSQL
# cluster of its own (scripts/pg.sh, fast mode: a test cluster), with the
# binaries of BUILD_DIR (default build/).
#
#   bench/soak.sh [--seconds 1800] [--every 60] > soak.md
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export FB_BIN_DIR=${FB_BIN_DIR:-$root/build}
[ -x "$FB_BIN_DIR/server/fusionbench-server" ] ||
    { echo "soak.sh: build first (cmake --build build)" >&2; exit 1; }
pg=$(mktemp -d /tmp/fb-soak-pg.XXXXXX)
chmod 755 "$pg" # pg.sh hands it to the postgres user when run as root
trap '"$root/scripts/pg.sh" stop "$pg/c" >/dev/null 2>&1 || true; rm -rf "$pg"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
FB_TEST_DATABASE_URL=$(FB_PG_FAST=1 "$root/scripts/pg.sh" start "$pg/c" "$port" | tail -n 1)
export FB_TEST_DATABASE_URL
python3 "$root/bench/soak.py" "$@"

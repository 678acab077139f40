#!/usr/bin/env bash
# chaos.sh: the long chaos run: tests/chaos/chaos.py with 1,000 jobs
# and 50 faults of every kind (400 in all) on a cluster of network namespaces,
# with its figures as a markdown table on stdout (docs/RELIABILITY.md).
# ./scripts/test.sh runs the short one (200 jobs, 32 faults) as ctest's
# chaos.test_chaos.
#
#   sudo bench/chaos.sh                      seed chosen and printed
#   bench/chaos.sh --seed 42                 replay a schedule
#   bench/chaos.sh --jobs 400 --faults-per-kind 20
#
# Needs root (namespaces), iproute2, PostgreSQL's server binaries and
# libfaketime (scripts/deps.sh --test installs them); builds build/ first.
# Logs, the schedule and figures.json stay in bench-chaos-out/ (its old
# contents are removed).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
OUT=$ROOT/bench-chaos-out
if ! { cmake -S "$ROOT" -B "$ROOT/build" >/dev/null &&
    cmake --build "$ROOT/build" -j"$(nproc)" --target fusionbench-server fusionbench-worker \
        >/dev/null; }; then
    echo "chaos.sh: build failed (cmake --build build)" >&2
    exit 1
fi
rm -rf "$OUT"
mkdir -p "$OUT"
echo "$(nproc) CPU(s), $(date -u +%Y-%m-%dT%H:%MZ), git $(git rev-parse --short=12 HEAD)"
FB_BIN_DIR=$ROOT/build FB_SOURCE_DIR=$ROOT exec python3 "$ROOT/tests/chaos/chaos.py" \
    --jobs 1000 --faults-per-kind 50 --out "$OUT" "$@"

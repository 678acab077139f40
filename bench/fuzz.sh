#!/usr/bin/env bash
# fuzz.sh: the long fuzzing run: every target of tests/fuzz/ for
# FUZZ_SECONDS (default 600) each, growing the corpus kept in the tree, with
# the executions, the coverage and the corpus growth reported per target as a
# markdown table on stdout.  scripts/test.sh keeps its 20-second smoke.
#
#   bench/fuzz.sh [TARGET...]            default: every tests/fuzz/fuzz_*.c
#   FUZZ_SECONDS=60 bench/fuzz.sh fuzz_query
#
# Then the API: schemathesis against a live server (tests/e2e/test_schemathesis.py
# with FUZZ_API_EXAMPLES examples per operation, default 1000; 0 skips it) on a
# throwaway PostgreSQL cluster (scripts/pg.sh), the server built in build/.
#
# New inputs libFuzzer finds that add coverage are merged (-merge=1, so only
# the ones that add coverage) into tests/fuzz/corpus/<name>/: commit them.  A
# crash stops that target; its input is left as bench-fuzz-out/crash-* and the
# script exits 1 after the table.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
SECONDS_PER=${FUZZ_SECONDS:-600}
OUT=$ROOT/bench-fuzz-out
BUILD=$ROOT/build-fuzz
mkdir -p "$OUT"

targets=("$@")
if ((${#targets[@]} == 0)); then
    for src in tests/fuzz/fuzz_*.c; do targets+=("$(basename "$src" .c)"); done
fi
command -v clang >/dev/null || {
    echo "fuzz.sh: clang not found (apt-get install clang)" >&2
    exit 1
}
if ! { CC=clang cmake -S "$ROOT" -B "$BUILD" -DFB_FUZZ=ON -DFB_SERVICE=OFF -DFB_CUDA=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build "$BUILD" -j"$(nproc)" \
    --target "${targets[@]}"; } >"$OUT/build.log" 2>&1; then
    tail -40 "$OUT/build.log" >&2
    echo "fuzz.sh: build failed" >&2
    exit 1
fi

status=0
echo "$SECONDS_PER s per target on $(nproc) CPU(s), $(date -u +%Y-%m-%dT%H:%MZ), git $(git rev-parse --short=12 HEAD)"
echo
echo "| target | executions | exec/s | coverage (edges) | features | corpus before → after | result |"
echo "|---|---:|---:|---:|---:|---|---|"
for name in "${targets[@]}"; do
    bin=$(find "$BUILD" -type f -name "$name" -perm -u+x | head -n 1)
    corpus=$ROOT/tests/fuzz/corpus/${name#fuzz_}
    mkdir -p "$corpus"
    work=$OUT/work-$name
    rm -rf "$work"
    mkdir -p "$work"
    before=$(find "$corpus" -type f | wc -l)
    log=$OUT/$name.log
    timeout $((SECONDS_PER + 120)) "$bin" -max_total_time="$SECONDS_PER" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$OUT/" "$work" "$corpus" \
        >"$log" 2>&1
    rc=$?
    result=ok
    if ((rc != 0)); then
        result="FAILED (exit $rc, see $log)"
        status=1
    fi
    # keep only the new inputs that add coverage
    "$bin" -merge=1 "$corpus" "$work" >"$OUT/$name-merge.log" 2>&1 || true
    after=$(find "$corpus" -type f | wc -l)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
    ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
    echo "| $name | ${execs:-?} | ${rate:-?} | ${cov:-?} | ${ft:-?} | $before → $after | $result |"
done

API_EXAMPLES=${FUZZ_API_EXAMPLES:-1000}
if ((API_EXAMPLES > 0)) && (($# == 0)); then
    echo
    pgdir=$(mktemp -d /tmp/fb-fuzz-pg.XXXXXX)
    chmod 755 "$pgdir"
    port=$((20000 + RANDOM % 20000))
    if ! { cmake -S "$ROOT" -B "$ROOT/build" && cmake --build "$ROOT/build" -j"$(nproc)" \
        --target fusionbench-server; } >"$OUT/api-build.log" 2>&1; then
        echo "fuzz.sh: building the server failed (see $OUT/api-build.log)" >&2
        status=1
    elif ! FB_PG_FAST=1 scripts/pg.sh start "$pgdir/pg" "$port" >"$OUT/api-pg.log" 2>&1; then
        echo "fuzz.sh: no PostgreSQL for the API run (see $OUT/api-pg.log)" >&2
        status=1
    else
        t0=$SECONDS
        FB_TEST_DATABASE_URL=$(scripts/pg.sh url "$pgdir/pg") FB_BIN_DIR=$ROOT/build \
            FB_SOURCE_DIR=$ROOT FB_SCHEMATHESIS_EXAMPLES=$API_EXAMPLES \
            FB_SCHEMATHESIS_TIMEOUT=7200 python3 tests/e2e/test_schemathesis.py \
            >"$OUT/api.log" 2>&1
        rc=$?
        cases=$(grep -oE '[0-9]+ generated, .*' "$OUT/api.log" | tail -1)
        seed=$(grep -oE 'seed [0-9]+' "$OUT/api.log" | head -1)
        echo "API (schemathesis, $API_EXAMPLES examples per operation, $seed, $((SECONDS - t0)) s):" \
            "${cases:-no count} -- $([ $rc = 0 ] && echo ok || echo "FAILED, see $OUT/api.log")"
        ((rc == 0)) || status=1
        scripts/pg.sh stop "$pgdir/pg" >/dev/null 2>&1
    fi
    rm -rf "$pgdir"
fi
exit $status

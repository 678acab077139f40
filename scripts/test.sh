#!/usr/bin/env bash
# test.sh: every test, one command.
#
#   scripts/test.sh          the default tier: everything below but the tests
#                            labelled "full" (docs/TESTING.md gives its time on
#                            a 2-vCPU VM)
#   scripts/test.sh --full   everything: adds the full tier (every model's
#                            PyTorch parity, the inductor ladder's every rung
#                            and on real models, Inductor's fusions undone on
#                            real compiles, the longer chaos run, docker compose
#                            and Slurm for real); CI runs its tests labelled ci,
#                            then deploy, as time allows
#
#   1. packages (scripts/deps.sh --test) and the project's Python environment
#      (scripts/venv.sh: PyTorch & co. from PyPI, once per machine)
#   2. build in build/ and run ctest (unit, integration, e2e, inductor, models,
#      browser) against a throwaway PostgreSQL cluster (FB_PG_FAST=1, temp
#      folder, free port)
#   3. ASan+UBSan build in build-asan/ and ctest -L 'unit|integration' there
#   4. fuzz smoke: clang build of tests/fuzz/ (FB_FUZZ=ON), each target ~20 s
#   5. clang-format --dry-run --Werror on every tracked .c/.h/.cu
#   6. GPU tests (ctest label "gpu"): run when a GPU answers, else listed as skipped
#   7. the GPU bundle (scripts/gpu-bundle.sh, build-gpu/ and .gpu-bundle/) and
#      scripts/gpu-check.sh --dry-run over it; a stale bundle must be refused
#
# The last line is "N passed, N failed, N skipped": ctest tests counted from
# ctest's summary, every other stage counted as one test.  Exit status 1 when
# anything failed.
#
# Each stage's time is printed at the end.
#
# Environment: FB_TEST_JOBS (ctest -j, default 2), FB_FUZZ_SECONDS (default 20),
# FB_TEST_SKIP_ASAN=1 / FB_TEST_SKIP_FUZZ=1 to leave those stages out (counted
# as skipped), FB_TEST_KEEP=1 keeps the temp folder, FB_TEST_ONLY_FULL=1 (with
# --full) runs the full tier's tests alone (so nothing runs twice after a
# default run), FB_TEST_LABEL=REGEX keeps only the tests with a label matching
# it (CI's later passes: FB_TEST_ONLY_FULL=1 FB_TEST_LABEL=ci, what left the
# default tier for its time; then FB_TEST_LABEL=deploy, docker compose and
# Slurm).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
JOBS=${FB_TEST_JOBS:-2}
FUZZ_SECONDS=${FB_FUZZ_SECONDS:-20}
NCPU=$(nproc)
((NCPU > 2)) && NCPU_BUILD=$NCPU || NCPU_BUILD=2

FULL=0
ONLY_FULL=0
case "${1:-}" in
"") ;;
--full) FULL=1 ;;
-h | --help)
    sed -n '2,39p' "$0"
    exit 0
    ;;
*)
    echo "usage: $0 [--full]" >&2
    exit 2
    ;;
esac
if [[ "${FB_TEST_ONLY_FULL:-0}" == "1" ]]; then
    ((FULL)) || { echo "FB_TEST_ONLY_FULL=1 needs --full" >&2; exit 2; }
    ONLY_FULL=1
fi
# ctest's label filters for this tier (GPU tests have their own stage).
if ((ONLY_FULL)); then
    CTEST_TIER=(-L full -LE gpu)
elif ((FULL)); then
    CTEST_TIER=(-LE gpu)
else
    CTEST_TIER=(-LE 'gpu|full')
fi
if [[ -n "${FB_TEST_LABEL:-}" ]]; then # and a label of these (ctest ANDs its -L)
    CTEST_TIER+=(-L "$FB_TEST_LABEL")
fi

PASSED=0
FAILED=0
SKIPPED=0
FAILED_NAMES=()
STAGE_NAMES=()
STAGE_SECS=()
TMP=""
PG_DIR=""

stage() { printf '\n==== %s ====\n' "$*"; }

# Runs a stage function and records how long it took.
timed() {
    local name=$1 t0=$SECONDS
    shift
    "$@"
    local rc=$?
    STAGE_NAMES+=("$name")
    STAGE_SECS+=($((SECONDS - t0)))
    return $rc
}

print_times() {
    local i
    echo
    echo "stage times:"
    for i in "${!STAGE_NAMES[@]}"; do
        printf '  %-28s %5d s\n' "${STAGE_NAMES[$i]}" "${STAGE_SECS[$i]}"
    done
}
pass() {
    PASSED=$((PASSED + 1))
    echo "PASS: $1"
}
fail() {
    FAILED=$((FAILED + 1))
    FAILED_NAMES+=("$1")
    echo "FAIL: $1"
}
skip() {
    SKIPPED=$((SKIPPED + 1))
    echo "SKIPPED: $1"
}

cleanup() {
    if [[ -n "$PG_DIR" ]]; then
        "$ROOT/scripts/pg.sh" stop "$PG_DIR" >/dev/null 2>&1 || true
    fi
    if [[ -n "$TMP" && "${FB_TEST_KEEP:-0}" != "1" ]]; then
        rm -rf "$TMP"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Adds a ctest run's counts, read from its log, to the totals.  Skipped tests
# (exit 77) and tests that did not run are listed by ctest under "did not run".
count_ctest() {
    local log=$1 what=$2 total failed skipped
    total=$(grep -Eo 'tests? failed out of [0-9]+' "$log" | tail -n 1 | grep -Eo '[0-9]+$')
    failed=$(grep -Eo '[0-9]+ tests? failed out of' "$log" | tail -n 1 | grep -Eo '^[0-9]+')
    if [[ -z "$total" ]]; then
        if grep -q 'No tests were found' "$log"; then
            echo "$what: no tests found"
            return 0
        fi
        fail "$what (ctest gave no summary)"
        return 0
    fi
    skipped=$(sed -n '/The following tests did not run:/,/^$/p' "$log" |
        grep -cE '^[[:space:]]+[0-9]+ - .*\((Skipped|Disabled)\)')
    local notrun
    notrun=$(sed -n '/The following tests did not run:/,/^$/p' "$log" |
        grep -cE '^[[:space:]]+[0-9]+ - ' || true)
    # "Not Run" tests (missing executables) already count as failed in ctest's summary.
    PASSED=$((PASSED + total - failed - skipped))
    FAILED=$((FAILED + failed))
    SKIPPED=$((SKIPPED + skipped))
    echo "$what: $((total - failed - skipped)) passed, $failed failed, $skipped skipped (of $total; $notrun did not run)"
    if ((failed > 0)); then
        FAILED_NAMES+=($(sed -n '/The following tests FAILED:/,/^$/p' "$log" |
            sed -n 's/^[[:space:]]*[0-9]* - \([^ ]*\) .*/\1/p'))
    fi
}

run_deps() {
    stage "packages"
    if ! "$ROOT/scripts/deps.sh" --test; then
        echo "scripts/deps.sh failed: cannot go on" >&2
        fail "deps"
        finish
    fi
}

# The project's Python environment (PyTorch, torchvision, transformers, timm,
# Playwright; outside the clone, keyed by scripts/requirements.txt's hash): the
# inductor runner's tests, the model zoo's PyTorch parity tests and the browser
# tests run in it.  Built once per machine; later runs reuse it.
python_env() {
    stage "python environment (scripts/venv.sh)"
    local py
    if py=$("$ROOT/scripts/venv.sh") && "$py" -c 'import torch, torchvision, transformers, playwright'; then
        echo "python: $py"
        pass "python environment"
        return
    fi
    fail "python environment"
}

build_main() {
    stage "build (build/)"
    if cmake -S "$ROOT" -B "$ROOT/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$TMP/build.log" 2>&1 &&
        cmake --build "$ROOT/build" -j"$NCPU_BUILD" >>"$TMP/build.log" 2>&1; then
        pass "build"
        return 0
    fi
    tail -n 60 "$TMP/build.log"
    fail "build"
    return 1
}

start_cluster() {
    stage "throwaway PostgreSQL"
    PG_DIR=$TMP/pg
    local out
    if out=$(FB_PG_FAST=1 "$ROOT/scripts/pg.sh" start "$PG_DIR" "$(free_port)"); then
        export FB_TEST_DATABASE_URL
        FB_TEST_DATABASE_URL=$(tail -n 1 <<<"$out")
        echo "FB_TEST_DATABASE_URL=$FB_TEST_DATABASE_URL"
        return 0
    fi
    PG_DIR=""
    fail "postgresql cluster"
    return 1
}

ctest_main() {
    local what="unit, integration, e2e, inductor, models, browser, deploy; default tier"
    ((FULL)) && what="every label, full tier included"
    ((ONLY_FULL)) && what="the full tier alone"
    [[ -n "${FB_TEST_LABEL:-}" ]] && what+=", labels matching ${FB_TEST_LABEL}"
    stage "ctest ($what): build/"
    # GPU tests (label gpu) have their own stage below.
    ctest --test-dir "$ROOT/build" --output-on-failure -j"$JOBS" "${CTEST_TIER[@]}" \
        --timeout 2400 2>&1 | tee "$TMP/ctest.log"
    count_ctest "$TMP/ctest.log" "ctest"
}

asan_stage() {
    stage "ASan+UBSan (build-asan/): ctest -L 'unit|integration'"
    if [[ "${FB_TEST_SKIP_ASAN:-0}" == "1" ]]; then
        skip "asan (FB_TEST_SKIP_ASAN=1)"
        return
    fi
    # CUDA off: ASan and the CUDA runtime do not mix (and a machine without the
    # driver cannot even load binaries linked to libcuda); GPU code is tested on GPUs.
    if ! { cmake -S "$ROOT" -B "$ROOT/build-asan" -DFB_SANITIZE=ON -DFB_CUDA=OFF \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
        cmake --build "$ROOT/build-asan" -j"$NCPU_BUILD"; } >"$TMP/asan-build.log" 2>&1; then
        tail -n 60 "$TMP/asan-build.log"
        fail "asan build"
        return
    fi
    pass "asan build"
    ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1} \
        UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
        ctest --test-dir "$ROOT/build-asan" --output-on-failure -j"$JOBS" -L 'unit|integration' \
        -LE gpu --timeout 1500 2>&1 | tee "$TMP/ctest-asan.log"
    count_ctest "$TMP/ctest-asan.log" "ctest (asan)"
}

fuzz_stage() {
    stage "fuzz smoke (build-fuzz/, ${FUZZ_SECONDS} s per target)"
    if [[ "${FB_TEST_SKIP_FUZZ:-0}" == "1" ]]; then
        skip "fuzz (FB_TEST_SKIP_FUZZ=1)"
        return
    fi
    local targets=() src name
    for src in "$ROOT"/tests/fuzz/fuzz_*.c; do
        [[ -f "$src" ]] && targets+=("$(basename "$src" .c)")
    done
    if ((${#targets[@]} == 0)); then
        echo "no fuzz targets in tests/fuzz/"
        return
    fi
    if ! { CC=clang cmake -S "$ROOT" -B "$ROOT/build-fuzz" -DFB_FUZZ=ON -DFB_SERVICE=OFF \
        -DFB_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
        cmake --build "$ROOT/build-fuzz" -j"$NCPU_BUILD" --target "${targets[@]}"; } \
        >"$TMP/fuzz-build.log" 2>&1; then
        tail -n 60 "$TMP/fuzz-build.log"
        fail "fuzz build"
        return
    fi
    pass "fuzz build"
    for name in "${targets[@]}"; do
        fuzz_one "$name"
    done
}

# Runs one fuzz target on a scratch copy of its corpus (libFuzzer writes new
# inputs into its first corpus folder; the tree's corpus stays untouched).
fuzz_one() {
    local name=$1 bin seeds work
    bin=$(find "$ROOT/build-fuzz" -type f -name "$name" -perm -u+x | head -n 1)
    if [[ -z "$bin" ]]; then
        fail "fuzz $name (no binary)"
        return
    fi
    work=$TMP/corpus-$name
    mkdir -p "$work"
    seeds=()
    for d in "$ROOT/tests/fuzz/corpus/${name#fuzz_}" "$ROOT/tests/fuzz/corpus/$name"; do
        [[ -d "$d" ]] && seeds+=("$d")
    done
    echo "fuzz $name: corpus ${seeds[*]:-(none)}"
    if timeout $((FUZZ_SECONDS + 60)) "$bin" -max_total_time="$FUZZ_SECONDS" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$TMP/" "$work" "${seeds[@]}" \
        >"$TMP/fuzz-$name.log" 2>&1; then
        grep -E '^stat::number_of_executed_units' "$TMP/fuzz-$name.log" || true
        pass "fuzz $name"
    else
        tail -n 40 "$TMP/fuzz-$name.log"
        fail "fuzz $name"
    fi
}

format_stage() {
    stage "clang-format --dry-run --Werror (tracked .c/.h/.cu)"
    local files=()
    if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
        mapfile -t files < <(git -C "$ROOT" ls-files '*.c' '*.h' '*.cu')
    else # not a git checkout (a source tarball): every source file but build output
        mapfile -t files < <(find "$ROOT" -path "$ROOT/build*" -prune -o -path "$ROOT/.*" -prune \
            -o -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) -print)
    fi
    if ((${#files[@]} == 0)); then
        pass "clang-format (no files)"
        return
    fi
    if clang-format --dry-run --Werror "${files[@]}" >"$TMP/format.log" 2>&1; then
        pass "clang-format (${#files[@]} files)"
    else
        head -n 60 "$TMP/format.log"
        grep -oE '^[^:]+\.(c|h|cu):' "$TMP/format.log" | sort -u | sed 's/:$//; s/^/  needs clang-format: /'
        fail "clang-format"
    fi
}

gpu_stage() {
    stage "GPU tests"
    local list
    list=$(ctest --test-dir "$ROOT/build" -N -L gpu 2>/dev/null | sed -n 's/^ *Test *#[0-9]*: //p')
    local n
    n=$(grep -c . <<<"$list")
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
        if ((n == 0)); then
            echo "GPU present; no GPU tests registered (0)"
            return
        fi
        ctest --test-dir "$ROOT/build" --output-on-failure -L gpu --timeout 1500 2>&1 |
            tee "$TMP/ctest-gpu.log"
        count_ctest "$TMP/ctest-gpu.log" "ctest (gpu)"
        return
    fi
    if ((n == 0)); then
        echo "SKIPPED (no GPU): none registered (0 GPU tests)"
        return
    fi
    echo "SKIPPED (no GPU): $(tr '\n' ' ' <<<"$list")"
    SKIPPED=$((SKIPPED + n))
}

# The GPU bundle (scripts/gpu-bundle.sh: the GPU-side binaries built here, with
# the libraries a GPU image lacks) and scripts/gpu-check.sh --dry-run, which
# walks every stage of the one GPU run here: libraries resolve, command lines
# parse, caps fit the budget.  A stale bundle must be refused.
gpu_dry_stage() {
    stage "GPU bundle and the GPU check's dry run"
    if [[ ! -x /usr/local/cuda/bin/nvcc ]] && ! command -v nvcc >/dev/null 2>&1; then
        skip "gpu bundle (no CUDA toolkit)"
        return
    fi
    if ! "$ROOT/scripts/gpu-bundle.sh" >"$TMP/gpu-bundle.log" 2>&1; then
        tail -n 40 "$TMP/gpu-bundle.log"
        fail "gpu bundle"
        return
    fi
    tail -n 2 "$TMP/gpu-bundle.log"
    pass "gpu bundle"
    local out=$TMP/gpu-dry n_ok n_all
    if ! "$ROOT/scripts/gpu-check.sh" --dry-run --out "$out" >"$TMP/gpu-dry.log" 2>&1; then
        tail -n 40 "$TMP/gpu-dry.log"
        fail "gpu-check --dry-run"
    else
        n_all=$(grep -c . "$out/raw.jsonl")
        n_ok=$(grep -cE '"status": "(ok|not run \(dry run\))"' "$out/raw.jsonl")
        if ((n_all >= 40 && n_ok == n_all)) && [[ $(grep -c '^- stage [0-9] [a-z_]*: ran ' "$out/report.md") == 8 ]]; then
            tail -n 7 "$TMP/gpu-dry.log"
            pass "gpu-check --dry-run ($n_all commands checked)"
        else
            cat "$out/report.md"
            fail "gpu-check --dry-run (report: $n_ok of $n_all commands ok, or a stage missing)"
        fi
    fi
    # A bundle whose fingerprint is not the sources' is refused, naming why.
    local stale=$TMP/stale-bundle
    cp -r "$ROOT/.gpu-bundle" "$stale"
    sed -i 's/"fingerprint": "[0-9a-f]/"fingerprint": "x/' "$stale/manifest.json"
    if "$ROOT/scripts/gpu-check.sh" --dry-run --bundle "$stale" --out "$TMP/gpu-stale" \
        >"$TMP/gpu-stale.log" 2>&1 || ! grep -q "the bundle is stale" "$TMP/gpu-stale.log"; then
        cat "$TMP/gpu-stale.log"
        fail "gpu-check refuses a stale bundle"
    else
        pass "gpu-check refuses a stale bundle"
    fi
}

finish() {
    print_times
    echo
    if ((${#FAILED_NAMES[@]} > 0)); then
        echo "failed: ${FAILED_NAMES[*]}"
    fi
    echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"
    ((FAILED == 0)) && exit 0
    exit 1
}

main() {
    TMP=$(mktemp -d /tmp/fb-test.XXXXXX)
    # The cost planner's decisions and calibration (docs/EXPLAIN.md) in this
    # run's folder, not the user's cache: each run measures afresh, as a new
    # build does.
    export FUSIONBENCH_PLAN_CACHE=$TMP/plan-cache.json
    chmod 755 "$TMP" # the cluster's owner (postgres, when run as root) must enter it
    local t0=$SECONDS
    timed packages run_deps
    timed "python environment" python_env
    if timed build build_main; then
        if timed "postgresql" start_cluster; then
            timed ctest ctest_main
        fi
    fi
    if ((ONLY_FULL)); then
        echo "(ASan, fuzz, format and GPU stages: run by the default pass)"
    else
        timed asan asan_stage
        timed fuzz fuzz_stage
        timed clang-format format_stage
        timed gpu gpu_stage
        timed "gpu dry run" gpu_dry_stage
    fi
    STAGE_NAMES+=("total")
    STAGE_SECS+=($((SECONDS - t0)))
    finish
}

main "$@"

#!/usr/bin/env bash
# gpu-check.sh: everything issue 3 asks of a GPU machine, in one go, written to
# a markdown report (commit it: docs/gpu/).
#
#   scripts/gpu-check.sh [REPORT]        default docs/gpu/check-<gpu>-<date>.md
#
# 1. builds in build-gpu/ with FB_SERVICE=OFF (a GPU node needs no libpq or
#    libmicrohttpd); 2. runs every registered test (the GPU tests included);
# 3. fusionbench-run for every cuda pattern x float32/float16/bfloat16 with the
#    four variants, and for every zoo model at its default size (float32, and
#    float16 for the image and speech models: token ids need float32);
#    4. the injection-library overhead: the same benchmark with
#    and without CUDA_INJECTION64_PATH (target: under 5%); 5. the device-to-
#    device copy bandwidth reference and the fused memory-bound patterns' DRAM
#    bandwidth at sizes many times the L2 (target: at least 80% of it);
#    6. explanations of two patterns and two models (CUPTI launch marks) with
#    the GPU roofline.
#
# Missing packages (cJSON, cmocka, OpenBLAS are not on every GPU image): carry
# the Debian packages and name them in FB_DEBS; they are unpacked with dpkg -x
# into .fusionbench/gpu-deps, their pkg-config files pointed there:
#   FB_DEBS="libcjson1_*.deb libcjson-dev_*.deb libcmocka0_*.deb libcmocka-dev_*.deb" \
#     scripts/gpu-check.sh
# CUPTI is found in the CUDA toolkit or in PyTorch's nvidia-* pip packages
# (worker/cupti/CMakeLists.txt); CUPTI_ROOT=... overrides.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=$ROOT/build-gpu
WORK=$BUILD/gpu-check
mkdir -p "$WORK" docs/gpu

log() { printf '[gpu-check] %s\n' "$*" >&2; }

unpack_debs() {
    local prefix=$ROOT/.fusionbench/gpu-deps deb pc
    [ -n "${FB_DEBS:-}" ] || return 0
    mkdir -p "$prefix"
    for deb in $FB_DEBS; do
        log "unpacking $deb"
        dpkg -x "$deb" "$prefix" || { log "dpkg -x $deb failed"; exit 1; }
    done
    # The .pc files say prefix=/usr; make them point into the unpacked tree.
    for pc in $(find "$prefix" -name '*.pc'); do
        sed -i "s|^prefix=/usr\$|prefix=$prefix/usr|" "$pc"
    done
    export PKG_CONFIG_PATH="$prefix/usr/lib/x86_64-linux-gnu/pkgconfig:$prefix/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}"
    export CMAKE_PREFIX_PATH="$prefix/usr:${CMAKE_PREFIX_PATH:-}"
    export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
    export CPATH="$prefix/usr/include:${CPATH:-}"
    export LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:${LIBRARY_PATH:-}"
}

build() {
    log "configuring and building in $BUILD"
    cmake -S "$ROOT" -B "$BUILD" -DFB_SERVICE=OFF -DCMAKE_BUILD_TYPE=Release \
        ${CUPTI_ROOT:+-DCUPTI_ROOT=$CUPTI_ROOT} >"$WORK/cmake.log" 2>&1 &&
        cmake --build "$BUILD" -j "$(nproc)" >"$WORK/build.log" 2>&1
}

RUN=$BUILD/worker/fusionbench-run
INJ=$BUILD/worker/cupti/libfusionbench_cupti.so

# JSON of one fusionbench-run into $WORK/NAME.json; the exit status is kept.
bench() {
    local name=$1
    shift
    "$RUN" "$@" --json >"$WORK/$name.json" 2>"$WORK/$name.err"
}

# Python (standard library only) reads the JSON results into table rows.
summ() {
    python3 - "$@" <<'PY'
import json, sys
mode, path = sys.argv[1], sys.argv[2]
try:
    r = json.load(open(path))
except Exception as e:
    print(f"| (no result: {e}) |"); sys.exit(0)
res = r.get("result", r)
vs = {v["name"]: v for v in res.get("variants", [])}
sp = res.get("comparison", {}).get("speedup", {})
def med(v): return (v.get("latency_ms") or {}).get("median")
if mode == "row":
    cells = []
    for n in ("eager", "fused", "eager+graph", "fused+graph"):
        v = vs.get(n)
        if not v: cells.append("-"); continue
        m = med(v)
        cells.append(f"{m:.4f} ms, {v.get('kernels')} k, {v['status']}" if m else v["status"])
    cells.append(f"{sp.get('fused', float('nan')):.2f}x")
    print("| " + " | ".join(cells) + " |")
elif mode == "median":
    print(med(vs.get(sys.argv[3], {})) or "nan")
elif mode == "dram_gbps":
    v = vs.get("fused", {})
    rd, wr, m = v.get("dram_read_bytes"), v.get("dram_write_bytes"), med(v)
    if rd is None or wr is None or not m:
        print("null (" + (v.get("dram_reason") or "no figure") + ")")
    else:
        print(f"{(rd + wr) / (m * 1e6):.1f}")
PY
}

section_tests() {
    echo "## Tests"
    echo '```'
    (cd "$BUILD" && ctest --output-on-failure 2>&1 | tail -40)
    echo '```'
}

section_patterns() {
    local w d
    echo "## Patterns (median latency, kernels per iteration, status; speedup fused vs eager)"
    echo "| workload | dtype | eager | fused | eager+graph | fused+graph | speedup |"
    echo "|---|---|---|---|---|---|---|"
    for w in $("$RUN" --list --device cuda 2>/dev/null | awk '$2 == "native" && $3 == "pattern" {print $1}'); do
        for d in float32 float16 bfloat16; do
            bench "$w-$d" "$w" --device cuda --dtype "$d" --variants eager,fused,eager+graph,fused+graph
            printf '| %s | %s ' "$w" "$d"
            summ row "$WORK/$w-$d.json"
        done
    done
}

section_zoo() {
    local w dom d models
    echo "## Model zoo (default sizes; median latency, kernels per iteration, status; speedup fused vs eager)"
    echo "| model | dtype | eager | fused | eager+graph | fused+graph | speedup |"
    echo "|---|---|---|---|---|---|---|"
    # "name domain" pairs, read first: a benchmark must not eat a loop's stdin.
    models=$("$RUN" --list --device cuda 2>/dev/null |
        awk '$2 == "native" && $3 != "pattern" && $3 != "custom" && $3 != "DOMAIN" {print $1 ":" $3}')
    for w in $models; do
        dom=${w#*:}
        w=${w%%:*}
        for d in float32 float16; do
            [ "$dom" = nlp ] && [ "$d" != float32 ] && continue
            bench "zoo-$w-$d" "$w" --device cuda --dtype "$d" --variants eager,fused,eager+graph,fused+graph
            printf '| %s | %s ' "$w" "$d"
            summ row "$WORK/zoo-$w-$d.json"
        done
    done
}

section_injection() {
    local a b
    echo "## Injection library overhead (target: under 5%)"
    bench inj-off gemm_bias_gelu --device cuda --variants eager,fused --iterations 200
    CUDA_INJECTION64_PATH=$INJ FUSIONBENCH_CUPTI_OUT=$WORK/inj.jsonl \
        bench inj-on gemm_bias_gelu --device cuda --variants eager,fused --iterations 200
    a=$(summ median "$WORK/inj-off.json" fused)
    b=$(summ median "$WORK/inj-on.json" fused)
    echo "- gemm_bias_gelu fused median: without ${a} ms, with ${b} ms;" \
        "overhead $(python3 -c "print(f'{($b/$a-1)*100:.2f}%')" 2>/dev/null || echo n/a)"
    echo "- record file: $(grep -c '"t":"kernel"' "$WORK/inj.jsonl" 2>/dev/null || echo 0) kernel" \
        "records; trailer: $(tail -1 "$WORK/inj.jsonl" 2>/dev/null)"
    echo "- in-process profiler while the injection holds CUPTI (expected: a clear refusal):"
    echo '```'
    grep -i "cupti\|profile" "$WORK/inj-on.err" | head -5
    echo '```'
}

section_bandwidth() {
    local ref
    echo "## Bandwidth (target: fused memory-bound patterns >= 80% of the copy)"
    nvcc -O2 -o "$WORK/gpu_copy_bw" "$ROOT/scripts/gpu_copy_bw.cu" 2>"$WORK/nvcc.log"
    ref=$("$WORK/gpu_copy_bw" 2>&1)
    echo "- device-to-device copy reference: \`$ref\`"
    echo "| pattern (float32, large) | fused DRAM GB/s (read+write) |"
    echo "|---|---|"
    bench bw-elem elementwise_chain --device cuda --variants eager,fused --param n=134217728
    echo "| elementwise_chain n=2^27 | $(summ dram_gbps "$WORK/bw-elem.json") |"
    for w in softmax layernorm add_layernorm; do
        bench "bw-$w" "$w" --device cuda --variants eager,fused --param rows=65536 --param cols=2048
        echo "| $w 65536x2048 | $(summ dram_gbps "$WORK/bw-$w.json") |"
    done
}

section_explain() {
    local w
    echo "## Explanations on the GPU (docs/EXPLAIN.md: CUPTI launch marks, the GPU roofline)"
    echo "| workload | launch times | groups won / lost / noise | lost by reason | fused roofline share | env roofline |"
    echo "|---|---|---|---|---|---|"
    for w in gemm_bias_gelu softmax resnet50 bert_base; do
        bench "explain-$w" "$w" --device cuda --variants eager,fused --explain --roofline
        python3 - "$WORK/explain-$w.json" "$w" <<'PY'
import json, sys
try:
    res = json.load(open(sys.argv[1]))["result"]
except Exception as e:
    print(f"| {sys.argv[2]} | (no result: {e}) |||||"); sys.exit(0)
ex, s = res.get("explain") or {}, (res.get("explain") or {}).get("summary") or {}
roof = (res.get("env") or {}).get("roofline") or {}
print(f"| {sys.argv[2]} | {ex.get('launch_times', ex.get('unavailable', '-'))} | "
      f"{s.get('won')} / {s.get('lost')} / {s.get('within_noise')} | {s.get('lost_by_reason')} | "
      f"{s.get('fused_roofline_share')} | copy {roof.get('triad_gbps')} GB/s, "
      f"GEMM {roof.get('gemm_gflops')} GFLOP/s |")
PY
    done
}

main() {
    local gpu report
    unpack_debs
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr ' ' '-')
    report=${1:-docs/gpu/check-${gpu:-unknown}-$(date +%Y%m%d).md}
    if ! build; then
        log "build failed; see $WORK/build.log"
        tail -30 "$WORK/cmake.log" "$WORK/build.log" >&2
        exit 1
    fi
    {
        echo "# GPU check: ${gpu:-unknown GPU}, $(date -u +%Y-%m-%dT%H:%MZ)"
        echo
        echo "git $(git rev-parse --short=12 HEAD 2>/dev/null); \`nvidia-smi -L\`:"
        echo '```'
        nvidia-smi -L 2>&1
        echo '```'
        section_tests
        section_patterns
        section_zoo
        section_injection
        section_bandwidth
        section_explain
        echo
        echo "Raw JSON results: $WORK (not committed)."
    } >"$report"
    log "report: $report"
}

main "$@"

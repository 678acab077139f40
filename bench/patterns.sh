#!/usr/bin/env bash
# bench/patterns.sh: our native engine against PyTorch eager and torch.compile on
# the ten fusion patterns, in one invocation (bench/patterns.py does the work).
#
#   bench/patterns.sh [BUILD_DIR] [patterns.py options]
#     BUILD_DIR   a CMake build folder with worker/fusionbench-run (default build)
#     options     --threads N (default: all cores), --iterations N (30),
#                 --warmup N (5), --patterns a,b, --md FILE, --json FILE,
#                 --warm-cache (reuse Inductor's cache: compile times become hits)
# The Python side runs in the venv of scripts/venv.sh (created on first use).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cmdline="bench/patterns.sh $*"
build="$root/build"
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then
    build=$1
    shift
fi
run="$build/worker/fusionbench-run"
[ -x "$run" ] || { echo "patterns.sh: $run not built (cmake --build $build --target fusionbench-run)" >&2; exit 1; }
py=$("$root/scripts/venv.sh")
export FB_BENCH_COMMAND="$cmdline"
exec "$py" "$root/bench/patterns.py" --bin "$run" "$@"

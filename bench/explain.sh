#!/usr/bin/env bash
# bench/explain.sh: the explanation of every fusion over the native zoo and the
# ten patterns (docs/EXPLAIN.md's tables): fusionbench-run --explain --roofline
# per workload, summed up as a markdown table by bench/explain.py.
#
#   bench/explain.sh [BUILD_DIR] [explain.py options]
#     BUILD_DIR   a CMake build folder with worker/fusionbench-run (default build)
#     options     --threads N (default: all cores), --iterations N (30),
#                 --batch N (1), --llc-mb M (the last-level cache; default sysfs's),
#                 --workloads a,b (default: the zoo at small sizes and the
#                 patterns), --md FILE, --json FILE (every explanation),
#                 --param K=V for every workload (planner=cost: the cost
#                 planner's groups explained), --repeat N (the list N times,
#                 then the memory-bound groups over the LLC against the triad,
#                 time-weighted over every run: one run's triad on a shared
#                 VM moves by tens of percent)
# Needs only python3 (no venv).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build"
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then
    build=$1
    shift
fi
run="$build/worker/fusionbench-run"
[ -x "$run" ] || { echo "explain.sh: $run not built (cmake --build $build --target fusionbench-run)" >&2; exit 1; }
export FB_BENCH_COMMAND="bench/explain.sh $*"
exec python3 "$root/bench/explain.py" --bin "$run" "$@"

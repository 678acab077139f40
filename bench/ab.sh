#!/usr/bin/env bash
# bench/ab.sh: one benchmark on two builds of fusionbench-run, alternating, so a
# burst of load from elsewhere hits both alike (kernel work: "did this commit
# make it faster?").
#
#   bench/ab.sh [-n RUNS] [-v VARIANT] OLD_BIN NEW_BIN WORKLOAD [fusionbench-run args]
#
#   OLD_BIN, NEW_BIN  two fusionbench-run binaries, e.g. of a worktree of the old
#                     commit: git worktree add /tmp/old SHA && cmake -S /tmp/old
#                     -B /tmp/old/build && cmake --build /tmp/old/build --target
#                     fusionbench-run
#   -n RUNS           alternations (default 5): OLD, NEW, OLD, NEW, ...
#   -v VARIANT        the variant compared (default fused)
#   -k                also each kernel's profiled time (the variant's one
#                     profiled iteration, summed by kernel name), the least
#                     of the runs for both: which kernels a change moved,
#                     where whole-run medians move with a VM's neighbours
#
# Prints each run's median (ms) of both, then the mean of the medians, the
# smallest median of each, and NEW / OLD of both (below 1: NEW is faster).
# A single convolution of any shape is the graph workload, e.g.
#   bench/ab.sh OLD NEW graph --threads 2 --param 'graph={"tensors":[...],"nodes":[...]}'
set -euo pipefail

runs=5
variant=fused
kernels=0
while getopts "n:v:k" opt; do
    case $opt in
    n) runs=$OPTARG ;;
    v) variant=$OPTARG ;;
    k) kernels=1 ;;
    *) exit 2 ;;
    esac
done
shift $((OPTIND - 1))
if [ $# -lt 3 ]; then
    sed -n '2,19p' "$0" >&2
    exit 2
fi
old=$1 new=$2
shift 2
for b in "$old" "$new"; do
    [ -x "$b" ] || { echo "ab.sh: $b is not an executable" >&2; exit 2; }
done

median_of() { # binary args...: the variant's median, or fails naming the output
    local out
    out=$("$@" 2>&1) || { echo "ab.sh: $1 failed: ${out: -300}" >&2; return 1; }
    # "ok, unstable": a median all the same, of a variant that varied more than
    # the device allows (a launch of microseconds on a VM)
    awk -v v="$variant" '$1 == v && $2 == "ok" {print $3; found=1}
        $1 == v && $2 == "ok," && $3 == "unstable" {print $4; found=1}
        END {exit !found}' <<<"$out" ||
        { echo "ab.sh: no ok row for variant $variant from $1" >&2; return 1; }
}

kdir=$(mktemp -d)
trap 'rm -rf "$kdir"' EXIT
kernels_of() { # tag binary args...: the variant's profiled kernels, as JSON, into $kdir
    local tag=$1
    shift
    "$@" --variants "$variant" --json >"$kdir/$tag.$i.json" 2>/dev/null ||
        { echo "ab.sh: $1 --json failed" >&2; return 1; }
}

olds=() news=()
echo "run  old_ms  new_ms"
for i in $(seq "$runs"); do
    olds+=("$(median_of "$old" "$@")")
    news+=("$(median_of "$new" "$@")")
    echo "$i  ${olds[-1]}  ${news[-1]}"
    if [ "$kernels" = 1 ]; then
        kernels_of old "$old" "$@"
        kernels_of new "$new" "$@"
    fi
done
if [ "$kernels" = 1 ]; then
    python3 - "$kdir" "$variant" <<'PY'
import collections, glob, json, os, sys
kdir, variant = sys.argv[1], sys.argv[2]
best = {"old": {}, "new": {}}
for tag in best:
    for f in glob.glob(os.path.join(kdir, tag + ".*.json")):
        by = collections.defaultdict(float)
        for k in json.load(open(f)).get("kernels", {}).get(variant, []):
            by[k["name"]] += k["total_ms"]
        by["(all kernels)"] = sum(by.values())
        for name, ms in by.items():
            best[tag][name] = min(ms, best[tag].get(name, ms))
print("kernel (least of the runs' profiled ms)   old        new   new/old")
for name in sorted(best["new"], key=lambda n: -best["new"][n]):
    o, n = best["old"].get(name), best["new"][name]
    print("%-36s %9.3f  %9.3f  %s" % (name, o or 0, n, "%.3f" % (n / o) if o else "-"))
PY
fi
paste <(printf '%s\n' "${olds[@]}") <(printf '%s\n' "${news[@]}") | awk '
    { sa += $1; sb += $2; n++
      if (n == 1 || $1 < ma) ma = $1
      if (n == 1 || $2 < mb) mb = $2 }
    END { printf "mean of medians: old %.4f new %.4f  new/old %.3f\n", sa / n, sb / n, sb / sa
          printf "best median:     old %.4f new %.4f  new/old %.3f\n", ma, mb, mb / ma }'

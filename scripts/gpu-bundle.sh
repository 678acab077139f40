#!/usr/bin/env bash
# gpu-bundle.sh: builds here, on a machine without a GPU, everything that
# scripts/gpu-check.sh runs on a lent GPU machine, so that machine builds nothing.
#
#   scripts/gpu-bundle.sh          builds build-gpu/ and writes .gpu-bundle/
#
# .gpu-bundle/ (git-ignored; carry it to the GPU machine) holds two files:
#   payload.tar.xz   bin/  fusionbench-run, the GPU tests (test_cuda_native,
#                          test_cuda_zoo, test_cupti_gpu), gpu_copy_bw
#                    lib/  libfusionbench_cupti.so (the CUPTI injection library)
#                          and every library ldd shows the binaries need that a
#                          GPU image does not bring (cJSON, cmocka, OpenBLAS,
#                          gfortran, quadmath, gomp); each binary's RPATH is
#                          $ORIGIN/../lib, so no library path is needed for them
#   manifest.json    git commit, the sources' fingerprint (gpu_check.py
#                    --fingerprint: a stale bundle is refused), sizes and
#                    sha256 of every file, the Debian package of each carried
#                    library, the libraries the GPU image must bring (CUDA
#                    runtime, cuBLASLt, cuDNN, CUPTI: PyTorch's NVIDIA wheels
#                    there; the driver's libcuda), the newest glibc symbol needed
#
# Built with FB_SERVICE=OFF (no libpq or libmicrohttpd), Release, for Hopper:
# CMAKE_CUDA_ARCHITECTURES "90a-real;90-virtual" (sm_90a machine code, compute_90
# PTX).  The bundle must stay under 60 MiB (the device tool carries at most 64
# MiB with the working tree); xz keeps it near 10.
#
# Needs: the CUDA toolkit (nvcc, cuDNN and CUPTI headers), cmake, patchelf, xz,
# python3 (scripts/deps.sh --test installs the Debian ones).
# Env: FB_GPU_BUILD (default build-gpu), FB_GPU_BUNDLE (default .gpu-bundle).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${FB_GPU_BUILD:-$ROOT/build-gpu}
DEST=${FB_GPU_BUNDLE:-$ROOT/.gpu-bundle}
MAX_BYTES=$((60 * 1024 * 1024))
NVCC=${CUDACXX:-}
[[ -z "$NVCC" && -x /usr/local/cuda/bin/nvcc ]] && NVCC=/usr/local/cuda/bin/nvcc
[[ -z "$NVCC" ]] && NVCC=$(command -v nvcc || true)

die() {
    echo "gpu-bundle: $*" >&2
    exit 1
}
log() { echo "gpu-bundle: $*" >&2; }

case "${1:-}" in
"") ;;
-h | --help)
    sed -n '2,30p' "$0"
    exit 0
    ;;
*)
    echo "usage: $0" >&2
    exit 2
    ;;
esac

[[ -n "$NVCC" && -x "$NVCC" ]] || die "no nvcc (the CUDA toolkit): nothing to bundle"
for tool in cmake patchelf xz python3 ldd objdump; do
    command -v "$tool" >/dev/null || die "$tool not found (scripts/deps.sh --test installs it)"
done

FP_BEFORE=$(python3 "$ROOT/scripts/gpu_check.py" --fingerprint)
TARGETS=(fusionbench-run fusionbench_cupti test_cuda_native test_cuda_zoo test_cupti_gpu)

mkdir -p "$BUILD"
log "configuring $BUILD (FB_SERVICE=OFF, Release, CUDA 90a-real;90-virtual)"
cmake -S "$ROOT" -B "$BUILD" -DFB_SERVICE=OFF -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON \
    -DCMAKE_CUDA_COMPILER="$NVCC" "-DCMAKE_CUDA_ARCHITECTURES=90a-real;90-virtual" \
    >"$BUILD/configure.log" 2>&1 || {
    tail -n 30 "$BUILD/configure.log" >&2
    die "cmake configure failed ($BUILD/configure.log)"
}
cache() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD/CMakeCache.txt"; }
[[ "$(cache FB_HAVE_CUPTI)" == "ON" ]] || die "CUPTI was not found: the bundle needs the profiler"
cudnn=$(cache FB_CUDNN_LIB)
[[ -n "$cudnn" && "$cudnn" != *NOTFOUND ]] || die "cuDNN was not found: the bundle needs it"

log "building ${TARGETS[*]}"
NJ=$(nproc)
cmake --build "$BUILD" -j"$NJ" --target "${TARGETS[@]}" >"$BUILD/build.log" 2>&1 || {
    tail -n 40 "$BUILD/build.log" >&2
    die "build failed ($BUILD/build.log)"
}
"$NVCC" -O2 -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_90,code=compute_90 \
    -Werror all-warnings -o "$BUILD/gpu_copy_bw" "$ROOT/scripts/gpu_copy_bw.cu" ||
    die "nvcc of scripts/gpu_copy_bw.cu failed"

STAGE=$(mktemp -d "${DEST%/}.tmp.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/payload/bin" "$STAGE/payload/lib"
cp "$BUILD/worker/fusionbench-run" "$BUILD/tests/test_cuda_native" "$BUILD/tests/test_cuda_zoo" \
    "$BUILD/tests/test_cupti_gpu" "$BUILD/gpu_copy_bw" "$STAGE/payload/bin/"
cp "$BUILD/worker/engine/cupti/libfusionbench_cupti.so" "$STAGE/payload/lib/"

# Libraries a GPU image brings: glibc's, the compiler runtime PyTorch needs,
# the driver's libcuda, and CUDA's own libraries (PyTorch's NVIDIA wheels).
FROM_IMAGE='^(libc|libm|libdl|librt|libpthread|libutil|ld-linux-x86-64|libgcc_s|libstdc\+\+)\.so'
FROM_IMAGE+='|^(libcuda|libcudart|libcublas|libcublasLt|libcudnn[a-z_]*|libcupti|libnvrtc|libnvJitLink|libnvperf_host|libnvperf_target)\.so'
declare -A carried=() image=()
for f in "$STAGE"/payload/bin/* "$STAGE"/payload/lib/libfusionbench_cupti.so; do
    while read -r soname path; do
        if [[ "$soname" =~ $FROM_IMAGE ]]; then
            image[$soname]=1
        elif [[ "$path" == "not" || -z "$path" ]]; then
            die "$(basename "$f") needs $soname, which ldd cannot find here"
        else
            carried[$soname]=$path
        fi
    done < <(ldd "$f" | awk '$2 == "=>" {print $1, $3}')
done
for soname in "${!carried[@]}"; do
    cp -L "${carried[$soname]}" "$STAGE/payload/lib/$soname"
    echo "$soname ${carried[$soname]}" >>"$STAGE/carried.txt"
done
for f in "$STAGE"/payload/bin/*; do
    patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$f"
done
for f in "$STAGE"/payload/lib/*; do
    patchelf --force-rpath --set-rpath '$ORIGIN' "$f"
done

log "packing"
tar -C "$STAGE/payload" -cf - bin lib | xz -T2 -6 >"$STAGE/payload.tar.xz"

FP_AFTER=$(python3 "$ROOT/scripts/gpu_check.py" --fingerprint)
[[ "$FP_BEFORE" == "$FP_AFTER" ]] || die "the sources changed while building: run it again"

# The manifest: what was built, from what, and what the GPU image must bring.
python3 - "$STAGE" "$FP_AFTER" "$NVCC" "${!image[@]}" <<'PY'
import json, os, re, subprocess, sys, time

stage, fingerprint, nvcc, image = sys.argv[1], sys.argv[2], sys.argv[3], sorted(sys.argv[4:])
root = os.path.dirname(stage.rstrip("/"))

def out(*argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, cwd=root).stdout.strip()
    except OSError:
        return ""

sys.path.insert(0, os.path.join(root, "scripts"))
from gpu_check import sha256_file as sha  # noqa: E402

def glibc_max(path):
    vs = set(re.findall(r"GLIBC_([0-9.]+)", out("objdump", "-T", path)))
    return max(vs, key=lambda v: tuple(int(x) for x in v.split(".")), default=None)

def package_of(path):
    """The Debian package that installed path (usrmerge: /lib is /usr/lib)."""
    real = os.path.realpath(path)
    for p in (path, real, "/usr" + real, real.removeprefix("/usr")):
        owner = out("dpkg", "-S", p)
        if owner and ":" in owner:
            pkg = owner.split(": ")[0]
            return pkg, out("dpkg-query", "-W", "-f=${Version}", pkg) or None
    return None, None

carried = {}
with open(os.path.join(stage, "carried.txt")) as f:
    for line in f:
        soname, path = line.split()
        carried[soname] = path

files, newest = [], "0"
for sub in ("bin", "lib"):
    d = os.path.join(stage, "payload", sub)
    for name in sorted(os.listdir(d)):
        p = os.path.join(d, name)
        entry = {"path": f"{sub}/{name}", "bytes": os.path.getsize(p), "sha256": sha(p)}
        g = glibc_max(p)
        if g:
            entry["glibc"] = g
            if tuple(map(int, g.split("."))) > tuple(map(int, newest.split("."))):
                newest = g
        if name in carried:
            entry["from"] = carried[name]
            entry["debian_package"], entry["version"] = package_of(carried[name])
        files.append(entry)

status = out("git", "status", "--porcelain", "--untracked-files=no")
manifest = {
    "format": 1,
    "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "git_commit": out("git", "rev-parse", "HEAD") or None,
    "git_dirty": bool(status),
    "fingerprint": fingerprint,
    "cuda_architectures": "90a-real;90-virtual",
    "toolchain": {"nvcc": out(nvcc, "--version").splitlines()[-1:],
                  "gcc": out("gcc", "--version").splitlines()[:1],
                  "cmake": out("cmake", "--version").splitlines()[:1]},
    "glibc_needed": newest,
    "from_image": image,
    "payload": {"file": "payload.tar.xz",
                "bytes": os.path.getsize(os.path.join(stage, "payload.tar.xz")),
                "sha256": sha(os.path.join(stage, "payload.tar.xz"))},
    "files": files,
}
with open(os.path.join(stage, "manifest.json"), "w") as f:
    json.dump(manifest, f, indent=1)
    f.write("\n")
PY

rm -rf "$STAGE/payload" "$STAGE/carried.txt"
size=$(du -sb "$STAGE" | cut -f1)
((size < MAX_BYTES)) || die "the bundle is $size bytes, over $MAX_BYTES"
rm -rf "$DEST"
mv "$STAGE" "$DEST"
trap - EXIT
log "$DEST: $(du -sh "$DEST" | cut -f1) ($size bytes; unpacked $(python3 -c '
import json, sys; m = json.load(open(sys.argv[1]))
print(sum(f["bytes"] for f in m["files"]), "bytes in", len(m["files"]), "files")' "$DEST/manifest.json"))"
log "carry it: device run with carry [\".gpu-bundle\"], command scripts/gpu-check.sh (docs/gpu/README.md)"

#!/usr/bin/env bash
# deps.sh: installs the Debian packages FusionBench needs, only those missing.
#   scripts/deps.sh          build + run (server, worker, embedded PostgreSQL,
#                            Chart.js for the dashboard)
#   scripts/deps.sh --test   the same plus clang (fuzz build) for scripts/test.sh
# Runs apt-get as root directly, or through sudo otherwise; apt-get update runs
# once, and only when something is missing.
set -euo pipefail

pkgs=(build-essential cmake pkg-config libmicrohttpd-dev libcjson-dev libpq-dev libssl-dev
      libcurl4-openssl-dev
      libopenblas-dev libcmocka-dev postgresql postgresql-contrib python3 curl
      clang-format libjs-chart.js)
if [[ "${1:-}" == "--test" ]]; then
    # chromium: the dashboard's browser tests (Playwright); iproute2 and
    # faketime: the chaos test's hosts (network namespaces) and clock skew;
    # patchelf: scripts/gpu-bundle.sh (the GPU bundle's RPATHs)
    pkgs+=(clang chromium iproute2 faketime patchelf)
elif [[ -n "${1:-}" ]]; then
    echo "usage: $0 [--test]" >&2
    exit 2
fi

installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

missing=()
for p in "${pkgs[@]}"; do
    installed "$p" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "deps.sh: missing packages (${missing[*]}) and no apt-get: install them by hand" >&2
    exit 1
fi
if [[ $(id -u) -eq 0 ]]; then
    sudo_cmd=()
elif command -v sudo >/dev/null 2>&1; then
    sudo_cmd=(sudo)
else
    echo "deps.sh: missing packages (${missing[*]}); run as root or install sudo" >&2
    exit 1
fi

echo "deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"

#!/usr/bin/env bash
# scripts/small-venv.sh: creates or reuses a small Python environment for one
# test tool and prints its python's path on stdout (logs go to stderr).
#
#   scripts/small-venv.sh NAME REQUIREMENTS 'import a, b'
#
# The same scheme as scripts/venv.sh (the big one, with torch): the venv is
# ~/.cache/fusionbench/NAME-<first 16 hex of sha256 of REQUIREMENTS>, so a
# change to the pins gives a new venv; it counts as ready only once its stamp
# exists (written after pip and the import check passed); one run builds it
# while the others wait on its lock.  Used for kubernetes-validate
# (tests/deploy/test_k8s.sh, deploy-venv) and schemathesis (apifuzz-venv).
# Env: FB_CACHE (default ~/.cache/fusionbench), FB_PYTHON (default python3).
set -euo pipefail

(($# == 3)) || {
    echo "usage: small-venv.sh NAME REQUIREMENTS 'import ...'" >&2
    exit 2
}
name=$1 req=$2 check=$3
[ -f "$req" ] || {
    echo "small-venv.sh: $req not found" >&2
    exit 1
}
cache=${FB_CACHE:-$HOME/.cache/fusionbench}
hash=$(sha256sum "$req" | cut -c1-16)
venv="$cache/$name-$hash"
stamp="$venv/.fusionbench-ready"
if [ ! -f "$stamp" ]; then
    mkdir -p "$cache"
    exec 9>"$cache/$name-$hash.lock"
    flock 9
    if [ ! -f "$stamp" ]; then
        echo "small-venv.sh: building $venv from $req" >&2
        rm -rf "$venv"
        "${FB_PYTHON:-python3}" -m venv "$venv" >&2
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req" >&2
        "$venv/bin/python" -c "$check" >&2
        cp "$req" "$stamp"
    fi
fi
echo "$venv/bin/python"

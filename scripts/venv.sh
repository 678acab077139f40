#!/usr/bin/env bash
# scripts/venv.sh: creates or reuses the one Python environment of FusionBench (runner, tests, benchmarks)
# and prints its python's path on stdout (logs go to stderr).
#
# The venv lives in ~/.cache/fusionbench/venv-<first 16 hex of sha256 of
# scripts/requirements.txt>, so a change to the requirements gives a new venv and
# an unchanged file reuses the one already built (torch is large: installing it
# once per machine, not per run, is the point).  A venv counts as ready only when
# its stamp file exists: the stamp is written after pip succeeded, so a broken or
# half-finished install is rebuilt rather than trusted.  A venv built before this
# script existed (no stamp) is accepted when it imports torch and numpy.
#
# Usage: scripts/venv.sh            # prints e.g. /root/.cache/fusionbench/venv-3ed9.../bin/python
#        PY=$(scripts/venv.sh) && "$PY" bench/torch_patterns.py --help
# Env:   FB_PYTHON   the interpreter that creates the venv (default python3)
#        FB_CACHE    the cache folder (default ~/.cache/fusionbench)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
req="$here/requirements.txt"
[ -f "$req" ] || { echo "venv.sh: $req not found" >&2; exit 1; }

hash=$(sha256sum "$req" | cut -c1-16)
cache=${FB_CACHE:-$HOME/.cache/fusionbench}
venv="$cache/venv-$hash"
stamp="$venv/.fusionbench-ready"
py="$venv/bin/python"

imports_ok() {
    [ -x "$py" ] && "$py" -c 'import torch, torchvision, transformers, numpy' >/dev/null 2>&1
}

if [ -f "$stamp" ] || imports_ok; then
    [ -f "$stamp" ] || cp "$req" "$stamp"
    echo "$py"
    exit 0
fi

# Several runs may start at once (CI, a developer): one builds, the others wait.
mkdir -p "$cache"
exec 9>"$cache/venv-$hash.lock"
flock 9
if [ -f "$stamp" ]; then
    echo "$py"
    exit 0
fi

echo "venv.sh: building $venv from $req (this downloads torch once)" >&2
rm -rf "$venv"
"${FB_PYTHON:-python3}" -m venv "$venv" >&2
"$py" -m pip install --quiet --upgrade pip >&2
"$py" -m pip install --quiet -r "$req" >&2
"$py" -c 'import torch, torchvision, transformers, numpy' >&2
cp "$req" "$stamp"
echo "$py"

#!/usr/bin/env bash
# test_compose.sh: the container images and docker-compose.yml, for real.
#
#   tests/deploy/test_compose.sh        (as root; exit 0 pass, 77 skipped, else fail)
#
# 1. Installs Debian's docker.io (and docker-compose v1 where the compose plugin is
#    missing) when absent, and starts a dockerd when none answers (stopped again
#    at the end; only the one it started).
# 2. Makes the base image (scripts/docker-base.sh: pulled, else debootstrapped
#    from the host's Debian mirror), gets postgres:15 (pulled, else built from
#    deploy/docker/postgres-standin/ under that tag), builds the server and
#    worker images from deploy/docker/Dockerfile (layer cache kept between runs).
# 3. `compose up` in a project of its own (fbtest<random>) with the server on a
#    free 127.0.0.1 port; waits for /readyz and the CPU worker; submits a softmax
#    job and checks it succeeds with a positive fused speedup; checks the
#    containers run as non-root; stops the worker (SIGTERM: it must exit 0).
#    `down -v` always.
# 4. Lints deploy/docker/Dockerfile.gpu (its CUDA base cannot be pulled here):
#    stages, COPY sources against the repository and .dockerignore, users,
#    healthchecks; and `compose config` with the gpu profile.
# Prints the time of each stage at the end.
#
# Environment:
#   FUSIONBENCH_SKIP_DOCKER=1     skip (77) at once
#   FUSIONBENCH_REQUIRE_DOCKER=1  a missing or unstartable Docker fails instead of
#                                 skipping
#   FUSIONBENCH_TEST_TAG          image tag to build and run (default: test)
#   FUSIONBENCH_JOB_TIMEOUT_S     how long the job may take (default 300)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TAG=${FUSIONBENCH_TEST_TAG:-test}
JOB_TIMEOUT=${FUSIONBENCH_JOB_TIMEOUT_S:-300}

say() { echo "test_compose: $*" >&2; }
skip() {
    if [[ "${FUSIONBENCH_REQUIRE_DOCKER:-0}" == "1" ]]; then
        say "FAIL (FUSIONBENCH_REQUIRE_DOCKER=1): $*"
        exit 1
    fi
    echo "SKIP: $*"
    exit 77
}
fail() {
    say "FAIL: $*"
    exit 1
}

[[ "${FUSIONBENCH_SKIP_DOCKER:-0}" == "1" ]] && skip "FUSIONBENCH_SKIP_DOCKER=1"
[[ "$(uname -s)" == Linux ]] || skip "not Linux ($(uname -s))"

TMP=$(mktemp -d /tmp/fb-test-compose.XXXXXX)
started_dockerd_pid=""
project=""
compose=()
timings=()
stage_name=""
stage_t0=0
T_ALL=$SECONDS

stage() { # stage NAME: ends the previous stage (recording its time), starts NAME
    local now=$SECONDS
    [[ -n "$stage_name" ]] && timings+=("$stage_name $((now - stage_t0))")
    stage_name=$1
    stage_t0=$now
    [[ -n "$1" ]] && say "== $1"
    return 0
}

print_timings() {
    local t
    echo "test_compose: timings (s):"
    for t in "${timings[@]}"; do
        printf '  %-8s %5s\n' "${t% *}" "${t##* }"
    done
    printf '  %-8s %5s\n' total "$((SECONDS - T_ALL))"
}

compose_env() {
    env FUSIONBENCH_PORT="${PORT:-8080}" FUSIONBENCH_TAG="$TAG" FB_GIT_SHA="${GIT_SHA:-}" "$@"
}

dc() { compose_env "${compose[@]}" -p "$project" -f "$ROOT/docker-compose.yml" "$@"; }

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    set +e
    if [[ -n "$project" ]]; then
        if ((rc != 0)); then
            say "logs of project $project (last 60 lines each):"
            dc logs --no-color --tail 60 >&2 2>&1
            dc ps >&2
        fi
        stage down
        dc down -v --remove-orphans -t 10 >"$TMP/down.log" 2>&1 ||
            { say "compose down failed:"; tail -n 20 "$TMP/down.log" >&2; }
    fi
    stage ""
    if [[ -n "$started_dockerd_pid" ]]; then
        say "stopping the dockerd this test started (pid $started_dockerd_pid)"
        kill -TERM "$started_dockerd_pid" 2>/dev/null
        for _ in $(seq 1 60); do
            kill -0 "$started_dockerd_pid" 2>/dev/null || break
            sleep 0.5
        done
        kill -0 "$started_dockerd_pid" 2>/dev/null && kill -KILL "$started_dockerd_pid" 2>/dev/null
    fi
    print_timings
    if ((rc == 0)); then
        echo "test_compose: PASS"
    elif ((rc != 77)); then
        echo "test_compose: FAIL (exit $rc; logs in $TMP)"
    fi
    ((rc == 0 || rc == 77)) && rm -rf "$TMP"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ------------------------------------------------------------ docker + compose
stage setup

apt_install() { # apt_install PKG...: installs, with one apt-get update on failure
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends "$@" >"$TMP/apt.log" 2>&1 && return 0
    apt-get update -q >>"$TMP/apt.log" 2>&1 || true
    apt-get install -y -q --no-install-recommends "$@" >>"$TMP/apt.log" 2>&1
}

is_root=0
[[ $(id -u) -eq 0 ]] && is_root=1

for tool in curl python3; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        if ! ((is_root)) || ! command -v apt-get >/dev/null 2>&1 || ! apt_install "$tool"; then
            skip "$tool is missing"
        fi
    fi
done

if ! command -v dockerd >/dev/null 2>&1 && ! docker info >/dev/null 2>&1; then
    ((is_root)) || skip "not root, and no Docker daemon answers"
    command -v apt-get >/dev/null 2>&1 || skip "no Docker, and no apt-get to install it"
    say "installing docker.io"
    apt_install docker.io || { tail -n 20 "$TMP/apt.log" >&2; skip "cannot install docker.io (see above)"; }
fi

if ! docker info >/dev/null 2>&1; then
    ((is_root)) || skip "not root, and no Docker daemon answers (docker info)"
    command -v dockerd >/dev/null 2>&1 || skip "no dockerd"
    say "starting dockerd (log: $TMP/dockerd.log)"
    # The default data root, so images and the build cache stay for the next run.
    dockerd --pidfile "$TMP/dockerd.pid" >"$TMP/dockerd.log" 2>&1 &
    started_dockerd_pid=$!
    for _ in $(seq 1 120); do
        docker info >/dev/null 2>&1 && break
        kill -0 "$started_dockerd_pid" 2>/dev/null || break
        sleep 0.5
    done
    if ! docker info >/dev/null 2>&1; then
        tail -n 30 "$TMP/dockerd.log" >&2
        kill -0 "$started_dockerd_pid" 2>/dev/null || started_dockerd_pid=""
        skip "dockerd did not start (see its log above)"
    fi
fi

if docker compose version >/dev/null 2>&1; then
    compose=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
    compose=(docker-compose)
else
    if ! ((is_root)) || ! command -v apt-get >/dev/null 2>&1; then
        skip "neither the compose plugin nor docker-compose, and cannot install it"
    fi
    say "installing docker-compose (v1)"
    apt_install docker-compose || { tail -n 20 "$TMP/apt.log" >&2; skip "cannot install docker-compose"; }
    compose=(docker-compose)
fi
# Without buildx the CLI's BuildKit path is unavailable: the classic builder.
if ! docker buildx version >/dev/null 2>&1; then
    export DOCKER_BUILDKIT=0 COMPOSE_DOCKER_CLI_BUILD=0
fi
docker_version=$(docker version --format 'client {{.Client.Version}}, server {{.Server.Version}}' 2>/dev/null || echo "?")
compose_version=$("${compose[@]}" version --short 2>/dev/null || "${compose[@]}" version 2>/dev/null | head -n 1)
say "docker: $docker_version; compose: ${compose[*]} $compose_version"

# ------------------------------------------------------------ lint (no daemon work)
stage lint
# Dockerfile.gpu cannot be built here (its CUDA base is not pullable): check that
# it and Dockerfile parse, that every FROM / COPY --from names an earlier stage,
# every COPY source exists in the repository and passes .dockerignore, the build
# stages copy every folder the top-level CMakeLists.txt adds, and each final
# stage runs as a numeric non-root user with a HEALTHCHECK.
python3 - "$ROOT" deploy/docker/Dockerfile deploy/docker/Dockerfile.gpu <<'PY' || fail "Dockerfile lint"
import fnmatch, json, os, re, sys

root, files = sys.argv[1], sys.argv[2:]
KNOWN = {"FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT",
         "VOLUME", "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL"}
errors = []

def ignore_patterns():
    pats = []
    p = os.path.join(root, ".dockerignore")
    if os.path.exists(p):
        for line in open(p):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            neg = line.startswith("!")
            pat = os.path.normpath(line[1:] if neg else line).lstrip("/")
            pats.append((neg, pat))
    return pats

PATS = ignore_patterns()

def pmatch(pat, path):
    # Docker's matcher: '*' within a name, '**' across folders.
    rx = ""
    i = 0
    while i < len(pat):
        if pat.startswith("**", i):
            rx += ".*"
            i += 2
            if pat.startswith("/", i):
                rx += "/?"
                i += 1
        elif pat[i] == "*":
            rx += "[^/]*"
            i += 1
        elif pat[i] == "?":
            rx += "[^/]"
            i += 1
        else:
            rx += re.escape(pat[i])
            i += 1
    return re.fullmatch(rx, path) is not None

def ignored(path):
    path = os.path.normpath(path).lstrip("/")
    parts = path.split("/")
    excluded = False
    for neg, pat in PATS:
        # a pattern matching the path or one of its parent folders
        for k in range(1, len(parts) + 1):
            if pmatch(pat, "/".join(parts[:k])):
                excluded = not neg
                break
    return excluded

def instructions(path):
    text = open(path).read()
    out, buf, start = [], "", 0
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not buf and (not s or s.startswith("#")):
            continue
        if buf and s.startswith("#"):
            continue
        if not buf:
            start = n
        if s.endswith("\\"):
            buf += s[:-1] + " "
            continue
        buf += s
        out.append((start, buf))
        buf = ""
    if buf:
        errors.append("%s: ends inside a continued line" % path)
    return out

def subst(s, args):
    return re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda m: args.get(m.group(1), m.group(0)), s)

def words(rest):
    rest = rest.strip()
    if rest.startswith("["):
        try:
            return json.loads(rest)
        except ValueError:
            return None
    return rest.split()

with open(os.path.join(root, "CMakeLists.txt")) as f:
    subdirs = [d for d in re.findall(r"^\s*add_subdirectory\(\s*([^\s)]+)", f.read(), re.M)
               if d != "tests"]

for rel in files:
    path = os.path.join(root, rel)
    if not os.path.exists(path):
        errors.append("%s: missing" % rel)
        continue
    global_args, stages, cur = {}, [], None
    for n, ins in instructions(path):
        where = "%s:%d" % (rel, n)
        kw, _, rest = ins.partition(" ")
        kw = kw.upper()
        if kw not in KNOWN:
            errors.append("%s: unknown instruction %s" % (where, kw))
            continue
        if kw == "ARG" and cur is None:
            name, _, val = rest.strip().partition("=")
            global_args[name] = val
            continue
        if kw == "FROM":
            w = rest.split()
            if len(w) not in (1, 3) or (len(w) == 3 and w[1].upper() != "AS"):
                errors.append("%s: FROM IMAGE [AS NAME]" % where)
                continue
            image = subst(w[0], global_args)
            if "$" in image:
                errors.append("%s: FROM %s: undefined ARG" % (where, w[0]))
            cur = {"name": w[2] if len(w) == 3 else None, "image": image, "user": None,
                   "health": False, "copies": [], "line": n}
            stages.append(cur)
            continue
        if cur is None:
            errors.append("%s: %s before FROM" % (where, kw))
            continue
        if kw == "USER":
            cur["user"] = rest.strip()
        elif kw == "HEALTHCHECK":
            cur["health"] = rest.strip().upper() != "NONE"
        elif kw in ("COPY", "ADD"):
            w = words(rest)
            if w is None:
                errors.append("%s: bad JSON in %s" % (where, kw))
                continue
            flags = [x for x in w if x.startswith("--")]
            args = [x for x in w if not x.startswith("--")]
            if len(args) < 2:
                errors.append("%s: %s needs a source and a destination" % (where, kw))
                continue
            frm = [f.split("=", 1)[1] for f in flags if f.startswith("--from=")]
            if frm:
                names = [s["name"] for s in stages[:-1]]
                src = frm[0]
                if not (src in names or (src.isdigit() and int(src) < len(stages) - 1)):
                    errors.append("%s: COPY --from=%s names no earlier stage (%s)"
                                  % (where, src, ", ".join(x for x in names if x)))
                continue
            for src in args[:-1]:
                if any(c in src for c in "*?["):
                    continue
                if not os.path.exists(os.path.join(root, src)):
                    errors.append("%s: COPY source %s is not in the repository" % (where, src))
                elif ignored(src):
                    errors.append("%s: COPY source %s is excluded by .dockerignore" % (where, src))
                cur["copies"].append(os.path.normpath(src))
    names = [s["name"] for s in stages]
    for s in stages:
        base = s["image"]
        if base in names[:stages.index(s)]:
            continue  # FROM an earlier stage
        if not re.fullmatch(r"[a-z0-9][a-z0-9._/-]*(:[A-Za-z0-9._-]+)?(@sha256:[0-9a-f]{64})?", base):
            errors.append("%s:%d: FROM %s is not an image reference" % (rel, s["line"], base))
    if not stages:
        errors.append("%s: no FROM" % rel)
        continue
    # Build stages (the ones that compile) must copy every folder CMake adds.
    for s in stages:
        if "CMakeLists.txt" in s["copies"]:
            missing = [d for d in subdirs if d not in s["copies"]]
            if missing:
                errors.append("%s:%d: stage %s does not COPY %s (added by CMakeLists.txt)"
                              % (rel, s["line"], s["name"], ", ".join(missing)))
    # Final stages: the ones no other stage builds on.
    used = {s["image"] for s in stages}
    for s in stages:
        if s["name"] in used or "CMakeLists.txt" in s["copies"]:
            continue
        u = s["user"]
        inherited = s
        while u is None and inherited["image"] in names:
            inherited = stages[names.index(inherited["image"])]
            u = inherited["user"]
        if not u or u.split(":")[0] in ("0", "root"):
            errors.append("%s: stage %s runs as root (no USER)" % (rel, s["name"]))
        elif not u.split(":")[0].isdigit():
            errors.append("%s: stage %s: USER %s is not numeric (runAsNonRoot)" % (rel, s["name"], u))
        if not s["health"]:
            errors.append("%s: stage %s has no HEALTHCHECK" % (rel, s["name"]))
    print("lint: %s: stages %s" % (rel, ", ".join("%s (%s)" % (s["name"], s["image"]) for s in stages)))

gpu = open(os.path.join(root, "deploy/docker/Dockerfile.gpu")).read()
for kind in ("devel", "runtime"):
    if not re.search(r"FROM nvidia/cuda:\$\{CUDA_IMAGE_VERSION\}-cudnn-%s-\$\{UBUNTU\}" % kind, gpu):
        errors.append("Dockerfile.gpu: no nvidia/cuda ...-cudnn-%s-... stage" % kind)
if "-DFB_CUDA=ON" not in gpu:
    errors.append("Dockerfile.gpu: not built with FB_CUDA=ON")

for e in errors:
    print("lint: " + e, file=sys.stderr)
sys.exit(1 if errors else 0)
PY
if docker buildx version >/dev/null 2>&1 && docker buildx build --help 2>/dev/null | grep -q -- '--check'; then
    for f in Dockerfile Dockerfile.gpu; do
        docker buildx build --check -f "$ROOT/deploy/docker/$f" "$ROOT" >&2 ||
            fail "docker buildx build --check $f"
    done
fi
compose_env "${compose[@]}" -f "$ROOT/docker-compose.yml" config -q ||
    fail "compose config rejects docker-compose.yml"
compose_env "${compose[@]}" -f "$ROOT/docker-compose.yml" --profile gpu config >"$TMP/config-gpu.yml" ||
    fail "compose config --profile gpu rejects docker-compose.yml"
if ! grep -q 'worker-gpu0' "$TMP/config-gpu.yml" || ! grep -q 'driver: nvidia' "$TMP/config-gpu.yml"; then
    fail "the gpu profile has no worker-gpu0 with an nvidia device reservation"
fi

# ------------------------------------------------------------ base image
stage base
DOCKER=docker "$ROOT/scripts/docker-base.sh" debian:bookworm-slim ||
    fail "no debian:bookworm-slim base image (scripts/docker-base.sh)"

# ------------------------------------------------------------ postgres:15
stage postgres
standin_label='{{index .Config.Labels "org.fusionbench.standin"}}'
if docker image inspect postgres:15 >/dev/null 2>&1 &&
    [[ "$(docker image inspect -f "$standin_label" postgres:15 2>/dev/null)" != "1" ]]; then
    say "postgres:15 is present"
elif [[ "$(docker image inspect -f "$standin_label" postgres:15 2>/dev/null)" != "1" ]] &&
    timeout 300 docker pull postgres:15 >"$TMP/pull-postgres.log" 2>&1; then
    say "pulled postgres:15"
else
    # The stand-in: rebuilt every run (from cache: seconds) so it follows its Dockerfile.
    say "postgres:15 cannot be pulled: building the stand-in (deploy/docker/postgres-standin)"
    docker build -t postgres:15 "$ROOT/deploy/docker/postgres-standin" >"$TMP/build-postgres.log" 2>&1 ||
        { tail -n 30 "$TMP/build-postgres.log" >&2; fail "building the postgres stand-in"; }
fi

# ------------------------------------------------------------ images
stage images
GIT_SHA=$(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || true)
for target in server worker; do
    say "building fusionbench/$target:$TAG (log: $TMP/build-$target.log)"
    t0=$SECONDS
    docker build -f "$ROOT/deploy/docker/Dockerfile" --target "$target" \
        --build-arg FB_GIT_SHA="$GIT_SHA" -t "fusionbench/$target:$TAG" "$ROOT" \
        >"$TMP/build-$target.log" 2>&1 ||
        { tail -n 40 "$TMP/build-$target.log" >&2; fail "docker build --target $target"; }
    say "  fusionbench/$target:$TAG built in $((SECONDS - t0)) s"
done

# ------------------------------------------------------------ up
stage up
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
project=fbtest$(od -An -N4 -tx4 /dev/urandom | tr -d ' \n')
BASE=http://127.0.0.1:$PORT
say "compose project $project, server on $BASE"
dc up -d --no-build >"$TMP/up.log" 2>&1 || { cat "$TMP/up.log" >&2; fail "compose up"; }

wait_for() { # wait_for SECONDS WHAT COMMAND...
    local limit=$1 what=$2 t0=$SECONDS
    shift 2
    until "$@"; do
        ((SECONDS - t0 < limit)) || fail "$what: not within $limit s"
        sleep 1
    done
    say "$what ($((SECONDS - t0)) s)"
}
ready() { curl -fsS -o /dev/null --max-time 5 "$BASE/readyz" 2>/dev/null; }
wait_for 180 "server ready on $BASE/readyz" ready

# The server binds 0.0.0.0 in its container, so it asks every API request for
# a token (issue 13): an admin's, made with the server's own CLI in its container.
code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 5 "$BASE/api/v1/jobs") || code=none
[[ "$code" == 401 ]] || fail "GET /api/v1/jobs without a token: HTTP $code, want 401"
dc exec -T server fusionbench-server user add ci --role admin >/dev/null 2>&1 ||
    fail "fusionbench-server user add ci (in the server container)"
TOKEN=$(dc exec -T server fusionbench-server token create ci 2>/dev/null | tr -d '\r') ||
    fail "fusionbench-server token create ci (in the server container)"
[[ "$TOKEN" == fbu_* ]] || fail "token create printed no token"
AUTH=(-H "Authorization: Bearer $TOKEN")
say "API token made in the server container"

worker_registered() {
    curl -fsS --max-time 5 "${AUTH[@]}" "$BASE/api/v1/workloads" 2>/dev/null |
        grep -q '"gemm_bias_relu"' || return 1
    curl -fsS --max-time 5 "${AUTH[@]}" "$BASE/api/v1/workers" 2>/dev/null | python3 -c '
import json, sys
items = json.load(sys.stdin).get("items", [])
sys.exit(0 if any(w.get("id") == "worker-cpu0/cpu0" and w.get("state") != "lost" for w in items) else 1)'
}
wait_for 120 "worker worker-cpu0/cpu0 registered" worker_registered
# The dashboard and its Chart.js (libjs-chart.js in the server image).
curl -fsS --max-time 5 -o /dev/null "$BASE/" || fail "GET / (dashboard)"
curl -fsS --max-time 5 -o /dev/null "$BASE/static/vendor/chart.min.js" ||
    fail "GET /static/vendor/chart.min.js (libjs-chart.js)"

# ------------------------------------------------------------ job
stage job
out=$(curl -sS -X POST -H 'Content-Type: application/json' "${AUTH[@]}" -w '\n%{http_code}' \
    -d '{"workload":"softmax","variants":["eager","fused"],"iterations":5,"warmup":1}' \
    "$BASE/api/v1/jobs") || fail "POST /api/v1/jobs"
code=$(tail -n 1 <<<"$out")
body=$(head -n -1 <<<"$out")
[[ "$code" == 201 ]] || fail "POST /api/v1/jobs: HTTP $code: $body"
job=$(python3 -c 'import json,sys; print(int(json.load(sys.stdin)["id"]))' <<<"$body") ||
    fail "POST /api/v1/jobs: no id in $body"
say "job $job submitted"
t0=$SECONDS
state=""
while :; do
    body=$(curl -fsS --max-time 10 "${AUTH[@]}" "$BASE/api/v1/jobs/$job") ||
        fail "GET /api/v1/jobs/$job"
    state=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])' <<<"$body")
    case "$state" in
    succeeded) break ;;
    failed | canceled) fail "job $job $state: $body" ;;
    esac
    ((SECONDS - t0 < JOB_TIMEOUT)) || fail "job $job still $state after $JOB_TIMEOUT s"
    sleep 1
done
speedup=$(python3 -c '
import json, sys
j = json.load(sys.stdin)
s = ((j.get("result") or {}).get("comparison") or {}).get("speedup", {}).get("fused")
if not isinstance(s, (int, float)) or isinstance(s, bool) or not s > 0:
    sys.exit("result.comparison.speedup.fused is %r" % (s,))
print(s)' <<<"$body") || fail "job $job: no positive fused speedup: $body"
say "job $job succeeded in $((SECONDS - t0)) s: fused speedup $speedup"
# The client in the server image, against the server, with the token.
got=$(dc exec -T -e FUSIONBENCH_TOKEN="$TOKEN" server fusionbench --server http://127.0.0.1:8080 \
    status "$job" --json | tr -d '\r') || fail "fusionbench status $job (in the server container)"
[[ "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])' <<<"$got")" == succeeded ]] ||
    fail "fusionbench status $job --json: $got"
say "the client in the server image reads job $job"

# Non-root: the images' user, and what runs in the containers.
for svc in server worker; do
    cid=$(dc ps -q "$svc")
    [[ -n "$cid" ]] || fail "no container for $svc"
    user=$(docker inspect -f '{{.Config.User}}' "$cid")
    uid=$(dc exec -T "$svc" id -u | tr -d '\r')
    [[ -n "$user" && "${user%%:*}" != 0 && "${user%%:*}" != root ]] ||
        fail "$svc: Config.User is '$user' (root)"
    [[ "$uid" =~ ^[0-9]+$ && "$uid" != 0 ]] || fail "$svc: runs as uid '$uid'"
    health=$(docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{end}}' "$cid")
    say "$svc: user $user (uid $uid), health ${health:-none}"
done
# The images' HEALTHCHECK command, both ways, and Docker's view of it.
dc exec -T server fb-healthcheck http 8080 /readyz >/dev/null || fail "server: fb-healthcheck /readyz"
! dc exec -T server fb-healthcheck http 8080 /no-such-page >/dev/null 2>&1 ||
    fail "server: fb-healthcheck passes on a 404"
dc exec -T worker fb-healthcheck process fusionbench-worker >/dev/null ||
    fail "worker: fb-healthcheck process"
! dc exec -T worker fb-healthcheck process no-such-process >/dev/null 2>&1 ||
    fail "worker: fb-healthcheck passes for a missing process"
healthy() {
    local svc
    for svc in server worker; do
        [[ "$(docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{end}}' \
            "$(dc ps -q "$svc")")" == healthy ]] || return 1
    done
}
wait_for 90 "server and worker containers healthy" healthy
dbcid=$(dc ps -q db)
pg_user=$(docker top "$dbcid" -o pid,uid,comm 2>/dev/null | awk 'NR > 1 && $3 ~ /^postgres/ {print $2; exit}')
say "db: postgres runs as uid ${pg_user:-?}"
[[ -n "$pg_user" && "$pg_user" != root && "$pg_user" != 0 ]] || fail "db: postgres runs as '$pg_user'"

# SIGTERM drains the idle worker: it must exit 0 well inside its stop_grace_period.
wcid=$(dc ps -q worker)
t0=$SECONDS
dc stop -t 150 worker >"$TMP/stop.log" 2>&1 || { cat "$TMP/stop.log" >&2; fail "compose stop worker"; }
wrc=$(docker inspect -f '{{.State.ExitCode}}' "$wcid")
say "worker stopped in $((SECONDS - t0)) s, exit code $wrc"
[[ "$wrc" == 0 ]] || fail "the worker exited $wrc on SIGTERM (expected 0)"

stage ""
say "compose: ${compose[*]} $compose_version; docker: $docker_version"

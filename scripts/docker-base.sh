#!/usr/bin/env bash
# docker-base.sh: makes sure the base image the Dockerfiles build on
# (debian:bookworm-slim) exists in the local Docker daemon.
#
#   scripts/docker-base.sh [TAG]        TAG defaults to debian:bookworm-slim
#
# 1. TAG already present locally: nothing to do.
# 2. `docker pull TAG` works: done.
# 3. No registry reachable (air-gapped CI, sandboxes): build an equivalent from
#    the Debian mirror apt uses on this host:
#        debootstrap --variant=minbase SUITE DIR MIRROR
#        tar -C DIR -c . | docker import - TAG
#    The debootstrap result is cached as a tarball under
#    $FUSIONBENCH_CACHE/docker-base/ (default ~/.cache/fusionbench), keyed by suite
#    and mirror, so a later run only imports it (seconds).  Inside the image apt
#    points at the same mirror(s) as the host (its Debian entries of
#    /etc/apt/sources.list{,.d}), with the host's Acquire settings (proxy,
#    Check-Valid-Until, ...) and apt auth files, so `apt-get install` in a
#    `docker build` works without any registry.
#
# Environment:
#   FB_BASE_SUITE     Debian suite (default: bookworm; must match TAG)
#   FB_BASE_MIRROR    mirror URL (default: the host apt's mirror for that suite,
#                     else http://deb.debian.org/debian)
#   FB_BASE_NO_PULL=1 do not try `docker pull` (it only fails slowly offline)
#   FUSIONBENCH_CACHE cache folder (default ~/.cache/fusionbench)
# Needs root (debootstrap) for step 3, and python3 to read deb822 sources.
set -euo pipefail

TAG=${1:-debian:bookworm-slim}
SUITE=${FB_BASE_SUITE:-bookworm}
CACHE=${FUSIONBENCH_CACHE:-$HOME/.cache/fusionbench}/docker-base
DOCKER=${DOCKER:-docker}

say() { echo "docker-base: $*" >&2; }
die() {
    say "error: $*"
    exit 1
}

T0=$SECONDS
step_t=$SECONDS
step() { # step WHAT: announces a step and starts its clock
    say "$*"
    step_t=$SECONDS
}
done_step() { say "  ... $1 took $((SECONDS - step_t)) s"; }

case "$TAG" in
*"$SUITE"*) ;;
*) say "warning: TAG $TAG does not name suite $SUITE (set FB_BASE_SUITE)" ;;
esac

if "$DOCKER" image inspect "$TAG" >/dev/null 2>&1; then
    say "$TAG is present locally (0 s)"
    exit 0
fi

if [[ "${FB_BASE_NO_PULL:-0}" != "1" ]]; then
    step "pulling $TAG"
    if timeout 300 "$DOCKER" pull "$TAG" >&2; then
        done_step pull
        exit 0
    fi
    done_step "pull (failed)"
    say "$TAG cannot be pulled: building it from the Debian mirror with debootstrap"
fi

[[ $(id -u) -eq 0 ]] || die "debootstrap needs root"
command -v python3 >/dev/null || die "python3 is needed to read apt's sources"
if ! command -v debootstrap >/dev/null 2>&1; then
    step "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap >&2 ||
        { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
            --no-install-recommends debootstrap >&2; } || die "cannot install debootstrap"
    done_step "installing debootstrap"
fi

WORK=$(mktemp -d /tmp/fb-docker-base.XXXXXX)
cleanup() { rm -rf "$WORK"; }
trap cleanup EXIT

# The host's Debian entries (deb822 .sources and one-line .list files) for
# SUITE, SUITE-updates, SUITE-security, ...: written to $WORK/debian.sources as
# deb822, and the mirror of SUITE itself printed.
python3 - "$SUITE" "$WORK/debian.sources" >"$WORK/mirror" <<'PY'
import glob, os, re, sys

suite, out = sys.argv[1], sys.argv[2]
ok_keys = ("/usr/share/keyrings/debian-archive-keyring.gpg", "")

def stanzas():
    # deb822 files
    for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
        text = open(path, encoding="utf-8", errors="replace").read()
        for block in re.split(r"\n\s*\n", text):
            fields, key = {}, None
            for line in block.splitlines():
                if line.startswith("#") or not line.strip():
                    continue
                if line[0] in " \t" and key:
                    fields[key] += " " + line.strip()
                    continue
                if ":" in line:
                    key, val = line.split(":", 1)
                    key = key.strip().lower()
                    fields[key] = val.strip()
            if fields.get("enabled", "yes").lower() == "no":
                continue
            if "deb" not in fields.get("types", "").split():
                continue
            yield (fields.get("uris", "").split(), fields.get("suites", "").split(),
                   fields.get("components", "main").split(), fields.get("signed-by", ""))
    # one-line files
    for path in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
        if not os.path.isfile(path):
            continue
        for line in open(path, encoding="utf-8", errors="replace"):
            line = line.split("#", 1)[0].strip()
            if not line.startswith("deb "):
                continue
            opts, signed = "", ""
            m = re.match(r"deb\s+\[([^\]]*)\]\s+(.*)", line)
            rest = line[4:].strip()
            if m:
                opts, rest = m.group(1), m.group(2)
                s = re.search(r"signed-by=(\S+)", opts)
                signed = s.group(1) if s else ""
            parts = rest.split()
            if len(parts) >= 3:
                yield ([parts[0]], [parts[1]], parts[2:], signed)

mirror, keep = None, []
for uris, suites, comps, signed in stanzas():
    mine = [s for s in suites if s == suite or s.startswith(suite + "-") or s.startswith(suite + "/")]
    if not mine or not uris:
        continue
    # Only Debian's own archive key exists inside a fresh minbase image.
    if signed not in ok_keys:
        continue
    keep.append((uris, mine, comps))
    if suite in mine and mirror is None:
        mirror = uris[0]

with open(out, "w") as f:
    for uris, suites, comps in keep:
        f.write("Types: deb\nURIs: %s\nSuites: %s\nComponents: %s\n"
                "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
                % (" ".join(uris), " ".join(suites), " ".join(comps)))
print(mirror or "")
PY
MIRROR=${FB_BASE_MIRROR:-$(cat "$WORK/mirror")}
if [[ -z "$MIRROR" ]]; then
    MIRROR=http://deb.debian.org/debian
    say "no apt source for $SUITE on this host: using $MIRROR"
fi
MIRROR=${MIRROR%/}
if [[ ! -s "$WORK/debian.sources" ]] || [[ -n "${FB_BASE_MIRROR:-}" ]]; then
    printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        "$MIRROR" "$SUITE" "$SUITE" >"$WORK/debian.sources"
fi
say "suite $SUITE, mirror $MIRROR"

# A proxy apt uses on the host is one debootstrap (wget) must use too.
proxy=$(apt-config dump 2>/dev/null | sed -n 's/^Acquire::http::Proxy "\(.*\)";$/\1/p' | head -n 1)
if [[ -n "$proxy" && "$proxy" != DIRECT && -z "${http_proxy:-}" ]]; then
    export http_proxy=$proxy
    say "using apt's HTTP proxy $proxy"
fi
sproxy=$(apt-config dump 2>/dev/null | sed -n 's/^Acquire::https::Proxy "\(.*\)";$/\1/p' | head -n 1)
if [[ -n "$sproxy" && "$sproxy" != DIRECT && -z "${https_proxy:-}" ]]; then
    export https_proxy=$sproxy
fi

mkdir -p "$CACHE"
key=$(printf '%s|%s|minbase' "$SUITE" "$MIRROR" | sha256sum | cut -c1-16)
TARBALL=$CACHE/debootstrap-$SUITE-$key.tar
exec 9>"$CACHE/.lock"
flock 9 # two runs at once share one debootstrap

if [[ -s "$TARBALL" ]]; then
    say "cached debootstrap tarball $TARBALL"
else
    step "debootstrap --variant=minbase $SUITE (from $MIRROR)"
    keyring=()
    [[ -f /usr/share/keyrings/debian-archive-keyring.gpg ]] &&
        keyring=(--keyring=/usr/share/keyrings/debian-archive-keyring.gpg)
    if ! debootstrap --variant=minbase "${keyring[@]}" "$SUITE" "$WORK/root" "$MIRROR" \
        >"$WORK/debootstrap.log" 2>&1; then
        tail -n 30 "$WORK/debootstrap.log" >&2
        [[ -f "$WORK/root/debootstrap/debootstrap.log" ]] &&
            tail -n 30 "$WORK/root/debootstrap/debootstrap.log" >&2
        die "debootstrap failed"
    fi
    rm -rf "$WORK/root/var/cache/apt/archives/"*.deb "$WORK/root/var/lib/apt/lists/"* \
        "$WORK/root/debootstrap"
    done_step debootstrap
    step "caching the tree as $TARBALL"
    tar -C "$WORK/root" --numeric-owner -cf "$TARBALL.tmp" .
    mv "$TARBALL.tmp" "$TARBALL"
    rm -rf "$WORK/root"
    done_step caching
fi

step "importing as $TAG"
mkdir "$WORK/root"
tar -C "$WORK/root" --numeric-owner -xpf "$TARBALL"
R=$WORK/root
[[ "$R" == /tmp/fb-docker-base.*/root && -d "$R/etc/apt" ]] || die "unexpected image tree '$R'"
# apt inside the image: the host's Debian sources, Acquire settings and auth.
rm -f "$R/etc/apt/sources.list"
install -m 644 "$WORK/debian.sources" "$R/etc/apt/sources.list.d/debian.sources"
for f in /etc/apt/apt.conf /etc/apt/apt.conf.d/*; do
    [[ -f "$f" ]] || continue
    # Settings only (proxy, Check-Valid-Until, index targets): files that hook
    # commands into apt (APT::Update::Post-Invoke...) name programs the image lacks.
    if grep -q 'Acquire::' "$f" && ! grep -q -i 'invoke' "$f"; then
        install -m 644 "$f" "$R/etc/apt/apt.conf.d/$(basename "$f")"
    fi
done
if [[ -f /etc/apt/auth.conf ]]; then
    install -m 600 /etc/apt/auth.conf "$R/etc/apt/auth.conf"
fi
for f in /etc/apt/auth.conf.d/*; do
    [[ -f "$f" ]] && install -D -m 600 "$f" "$R/etc/apt/auth.conf.d/$(basename "$f")"
done
# As Debian's official images: no .deb files or package caches left in layers.
cat >"$R/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
# As Debian's official slim images: no documentation, manual pages or
# translations (now or from packages installed later).
cat >"$R/etc/dpkg/dpkg.cfg.d/docker-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
EOF
find "${R:?}/usr/share/doc" -mindepth 1 ! -name copyright ! -type d -delete 2>/dev/null || true
rm -rf "${R:?}/usr/share/man/"* "${R:?}/usr/share/info/"* "${R:?}/usr/share/locale/"* \
    "${R:?}/usr/share/groff/"* "${R:?}/usr/share/lintian/"*
# Services must not start inside `docker build`.
printf '#!/bin/sh\nexit 101\n' >"$R/usr/sbin/policy-rc.d"
chmod 755 "$R/usr/sbin/policy-rc.d"
tar -C "$R" --numeric-owner -c . |
    "$DOCKER" import --change 'CMD ["bash"]' \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        -m "debootstrap --variant=minbase $SUITE $MIRROR (scripts/docker-base.sh)" - "$TAG" >/dev/null
done_step import
say "$TAG ready ($((SECONDS - T0)) s in all)"

#!/usr/bin/env bash
# tests/deploy/test_k8s.sh: checks the Kubernetes deployment in deploy/k8s/.
#
#   1. Renders the base and every overlay with `kubectl kustomize`, with the
#      kubectl on PATH (installing Debian's kubernetes-client when there is none
#      and we are root) and also with Debian's kubectl 1.20 (its old embedded
#      kustomize v2.0.3 is what a Debian machine gets), unpacked from the .deb
#      into ~/.cache/fusionbench without installing it.  Every kubectl must
#      render the same objects.
#   2. Validates the built-in kinds with kubernetes-validate --strict against
#      Kubernetes 1.30 (the oldest we claim) and the newest schemas it ships.
#   3. Checks what kubernetes-validate cannot: KEDA's ScaledObject and
#      TriggerAuthentication against the fields of KEDA's CRDs (v2.20, encoded
#      below), and FusionBench's own rules (probes, non-root, drain grace, the
#      scaling query, names that must match).
#   4. Breaks the rendered objects on purpose and checks that each rule above
#      reports it, so that no assertion is one that cannot fail.
#
# Exit 0: pass; 77: skipped (the reason is printed); anything else: failure.
# Env: FB_CACHE (default ~/.cache/fusionbench), FB_PYTHON (the interpreter that
#      creates the venv, default python3).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
k8s="$root/deploy/k8s"
req="$root/scripts/requirements-deploy.txt"
cache=${FB_CACHE:-$HOME/.cache/fusionbench}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

skip() {
    echo "SKIPPED: test_k8s: $*"
    exit 77
}
die() {
    echo "FAIL: test_k8s: $*"
    exit 1
}

[ -d "$k8s/base" ] || die "$k8s/base not found"
[ -f "$req" ] || die "$req not found"
command -v "${FB_PYTHON:-python3}" >/dev/null || skip "no ${FB_PYTHON:-python3} to build the validation venv"

# --- kubectl ------------------------------------------------------------------

# "kubectl vX, kustomize vY" for the kubectl $1.  kubectl 1.14 to 1.20 embed
# kustomize v2.0.3 and do not say so; newer ones print a Kustomize Version line.
kubectl_versions() {
    local out kv kz
    out=$("$1" version --client 2>/dev/null || true)
    kv=$(printf '%s\n' "$out" | sed -n -e 's/^Client Version: *\(v[0-9][^ ]*\).*/\1/p' \
        -e 's/.*GitVersion:"\(v[^"]*\)".*/\1/p' | head -n1)
    kz=$(printf '%s\n' "$out" | sed -n 's/^Kustomize Version: *\(v[^ ]*\).*/\1/p' | head -n1)
    if [ -z "$kz" ]; then
        case "$kv" in
        v1.1[4-9].* | v1.20.*) kz="v2.0.3 (embedded, not printed by this kubectl)" ;;
        *) kz="unknown (not printed by this kubectl)" ;;
        esac
    fi
    echo "kubectl ${kv:-unknown}, kustomize $kz"
}

is_debian_kubectl() { # the kubectl $1 is the one from Debian's kubernetes-client
    case "$("$1" version --client 2>/dev/null || true)" in
    *'GitVersion:"v1.20.'*) return 0 ;;
    esac
    return 1
}

apt_install_kubectl() {
    echo "test_k8s: no kubectl on PATH: installing Debian's kubernetes-client"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -q kubernetes-client >"$tmp/apt.log" 2>&1; then
        apt-get update -q >>"$tmp/apt.log" 2>&1 || true
        if ! apt-get install -y -q kubernetes-client >>"$tmp/apt.log" 2>&1; then
            tail -n 20 "$tmp/apt.log"
            die "apt-get install kubernetes-client failed"
        fi
    fi
}

# Unpacks Debian's kubernetes-client (without installing it) into the cache and
# sets DEBIAN_KUBECTL to its kubectl, or leaves it empty when apt knows no such
# package here (not Debian, or no package lists).
DEBIAN_KUBECTL=
debian_kubectl() {
    local ver dir
    command -v apt-cache >/dev/null && command -v dpkg >/dev/null || return 0
    ver=$(apt-cache show --no-all-versions kubernetes-client 2>/dev/null |
        sed -n 's/^Version: *//p' | head -n1)
    [ -n "$ver" ] || return 0
    dir="$cache/debian-kubernetes-client-${ver//[^A-Za-z0-9.+-]/_}"
    if [ ! -x "$dir/usr/bin/kubectl" ]; then
        mkdir -p "$cache"
        (
            flock 9
            if [ ! -x "$dir/usr/bin/kubectl" ]; then
                echo "test_k8s: fetching Debian's kubernetes-client $ver into $dir"
                mkdir -p "$tmp/deb"
                if ! (cd "$tmp/deb" && apt-get download -q "kubernetes-client=$ver") >"$tmp/deb.log" 2>&1; then
                    cat "$tmp/deb.log"
                    die "apt-get download kubernetes-client=$ver failed"
                fi
                rm -rf "$dir.part"
                dpkg -x "$tmp"/deb/kubernetes-client_*.deb "$dir.part"
                mv "$dir.part" "$dir"
            fi
        ) 9>"$dir.lock"
    fi
    DEBIAN_KUBECTL="$dir/usr/bin/kubectl"
}

if ! command -v kubectl >/dev/null; then
    [ "$(id -u)" = 0 ] || skip "no kubectl on PATH, and not root to install Debian's kubernetes-client"
    command -v apt-get >/dev/null || skip "no kubectl on PATH and no apt-get to install one"
    apt_install_kubectl
fi
kubectls=("$(command -v kubectl)")
if ! is_debian_kubectl "${kubectls[0]}"; then
    debian_kubectl
    if [ -n "$DEBIAN_KUBECTL" ]; then
        kubectls+=("$DEBIAN_KUBECTL")
    else
        echo "test_k8s: note: apt knows no kubernetes-client here; not rendered with Debian's kubectl 1.20"
    fi
fi

# --- render -------------------------------------------------------------------

dirs=("$k8s/base")
for d in "$k8s"/overlays/*/; do
    [ -f "$d/kustomization.yaml" ] && dirs+=("${d%/}")
done
[ "${#dirs[@]}" -ge 2 ] || die "no overlay in $k8s/overlays"

mkdir -p "$tmp/render"
i=0
for k in "${kubectls[@]}"; do
    i=$((i + 1))
    echo "test_k8s: kubectl #$i: $k: $(kubectl_versions "$k")"
    for d in "${dirs[@]}"; do
        name=${d#"$k8s"/}
        out="$tmp/render/k$i@${name//\//_}.yaml"
        if ! "$k" kustomize "$d" >"$out" 2>"$tmp/render.err"; then
            cat "$tmp/render.err"
            die "kubectl #$i ($k) cannot render deploy/k8s/$name"
        fi
        echo "test_k8s:   rendered deploy/k8s/$name: $(grep -c '^kind:' "$out") objects"
    done
done

# --- venv with kubernetes-validate --------------------------------------------

# The deploy venv (scripts/small-venv.sh: keyed by the requirements' hash,
# trusted once its stamp exists, built by one run while the others wait).
DEPLOY_PY=$("$root/scripts/small-venv.sh" deploy-venv "$req" 'import kubernetes_validate, yaml, jsonschema')

# --- checks -------------------------------------------------------------------

"$DEPLOY_PY" - "$tmp/render" <<'PY'
import copy
import glob
import ipaddress
import os
import re
import shlex
import sys

import jsonschema
import kubernetes_validate
import yaml

render_dir = sys.argv[1]
NS = "fusionbench"
K8S_VERSIONS = sorted({"1.30.0", kubernetes_validate.utils.latest_version()},
                      key=lambda v: tuple(int(x) for x in v.split(".")))

# ---- KEDA's CRDs (keda.sh/v1alpha1, KEDA v2.20: config/crd/bases/), the fields
# we may write.  additionalProperties false everywhere: a misspelt field is an
# error here, as it is for the API server's strict field validation.
def obj(props, required=(), **kw):
    return dict(type="object", properties=props, required=list(required),
                additionalProperties=False, **kw)
I32 = {"type": "integer"}
STR = {"type": "string"}
HPA_RULES = obj({
    "policies": {"type": "array", "items": obj({
        "type": {"enum": ["Pods", "Percent"]},
        "value": {"type": "integer", "minimum": 1},
        "periodSeconds": {"type": "integer", "minimum": 1, "maximum": 1800}},
        ["periodSeconds", "type", "value"])},
    "selectPolicy": {"enum": ["Max", "Min", "Disabled"]},
    "stabilizationWindowSeconds": {"type": "integer", "minimum": 0, "maximum": 3600},
    "tolerance": {"type": ["integer", "string"]},
})
META = {"type": "object"}  # checked by the rules below (name, namespace)
SCALEDOBJECT = obj({
    "apiVersion": {"const": "keda.sh/v1alpha1"},
    "kind": {"const": "ScaledObject"},
    "metadata": META,
    "spec": obj({
        "advanced": obj({
            "horizontalPodAutoscalerConfig": obj({
                "behavior": obj({"scaleDown": HPA_RULES, "scaleUp": HPA_RULES}),
                "name": STR}),
            "restoreToOriginalReplicaCount": {"type": "boolean"},
            "scalingModifiers": obj({
                "activationTarget": STR, "formula": STR,
                "metricType": {"enum": ["AverageValue", "Value"]}, "target": STR}),
        }),
        "cooldownPeriod": {"type": "integer", "minimum": 0},
        "fallback": obj({
            "behavior": {"enum": ["static", "currentReplicas", "currentReplicasIfHigher",
                                  "currentReplicasIfLower", "scalingModifiers"]},
            "failureThreshold": {"type": "integer", "minimum": 0},
            "replicas": {"type": "integer", "minimum": 0}},
            ["failureThreshold", "replicas"]),
        "idleReplicaCount": {"type": "integer", "minimum": 0},
        "initialCooldownPeriod": {"type": "integer", "minimum": 0},
        "maxReplicaCount": {"type": "integer", "minimum": 1},
        "minReplicaCount": {"type": "integer", "minimum": 0},
        "pollingInterval": {"type": "integer", "minimum": 1},
        "scaleTargetRef": obj({
            "apiVersion": STR, "envSourceContainerName": STR, "kind": STR,
            "name": {"type": "string", "minLength": 1}}, ["name"]),
        "triggers": {"type": "array", "minItems": 1, "items": obj({
            "authenticationRef": obj({
                "kind": {"enum": ["TriggerAuthentication", "ClusterTriggerAuthentication"]},
                "name": STR}, ["name"]),
            "metadata": {"type": "object", "additionalProperties": STR},
            "metricType": {"enum": ["AverageValue", "Value", "Utilization"]},
            "name": STR,
            "type": {"type": "string", "minLength": 1},
            "useCachedMetrics": {"type": "boolean"}}, ["metadata", "type"])},
    }, ["scaleTargetRef", "triggers"]),
}, ["apiVersion", "kind", "metadata", "spec"])
TRIGGERAUTH = obj({
    "apiVersion": {"const": "keda.sh/v1alpha1"},
    "kind": {"const": "TriggerAuthentication"},
    "metadata": META,
    # Only the way we use; the CRD has more (env, podIdentity, vaults, ...).
    "spec": obj({"secretTargetRef": {"type": "array", "minItems": 1, "items": obj(
        {"parameter": STR, "name": STR, "key": STR}, ["parameter", "name", "key"])}},
        ["secretTargetRef"]),
}, ["apiVersion", "kind", "metadata", "spec"])
KEDA_SCHEMAS = {"ScaledObject": SCALEDOBJECT, "TriggerAuthentication": TRIGGERAUTH}
# The postgresql scaler's parameters (pkg/scalers/postgresql_scaler.go): trigger
# metadata, and those that come from a TriggerAuthentication.
PG_METADATA = {"targetQueryValue", "activationTargetQueryValue", "query", "connectionFromEnv",
               "host", "port", "userName", "dbName", "sslmode", "passwordFromEnv"}
PG_AUTH = {"connection", "host", "port", "userName", "dbName", "sslmode", "password"}

# ---- the CLIs (worker/daemon/wk_opts.c, server/srv_main.c).
WORKER_FLAGS = {"--database-url", "--device", "--gpu", "--exit-when-idle", "--max-jobs",
                "--drain-grace"}
SERVER_FLAGS = {"--database-url", "--port", "--bind", "--web-dir", "--max-body", "--threads",
                "--admin-port", "--admin-bind", "--trusted-proxies", "--client-conn-limit"}


def key(d):
    md = d.get("metadata") or {}
    return (d.get("kind", ""), md.get("namespace", ""), md.get("name", ""))


def flags(args):
    """--flag value pairs of a container's args, as a dict."""
    out, i = {}, 0
    while i < len(args):
        a = str(args[i])
        if a.startswith("--") and "=" in a:
            k, v = a.split("=", 1)
            out[k] = v
            i += 1
        elif a.startswith("--"):
            out[a] = str(args[i + 1]) if i + 1 < len(args) and not str(args[i + 1]).startswith("--") else ""
            i += 2 if out[a] != "" else 1
        else:
            out.setdefault("<positional>", []).append(a)
            i += 1
    return out


def labels_match(selector, labels):
    ml = (selector or {}).get("matchLabels") or {}
    if any(labels.get(k) != v for k, v in ml.items()):
        return False
    for e in (selector or {}).get("matchExpressions") or []:
        v, op = labels.get(e["key"]), e["operator"]
        if op == "In" and v not in e.get("values", []): return False
        if op == "NotIn" and v in e.get("values", []): return False
        if op == "Exists" and v is None: return False
        if op == "DoesNotExist" and v is not None: return False
    return bool(ml or (selector or {}).get("matchExpressions"))


def check(docs, overlay):
    """Every rule; returns the list of what is wrong (empty: all good)."""
    errs = []
    err = errs.append
    by = {}
    for d in docs:
        if not isinstance(d, dict) or "kind" not in d:
            err("a document without kind: %r" % (d,))
            continue
        if key(d) in by:
            err("%s/%s twice" % (d["kind"], key(d)[2]))
        by[key(d)] = d

    def get(kind, name, namespaced=True):
        d = by.get((kind, NS if namespaced else "", name))
        if d is None:
            err("missing %s %s%s" % (kind, NS + "/" if namespaced else "", name))
        return d

    # -- namespace: everything namespaced is in ours
    get("Namespace", NS, namespaced=False)
    for d in by.values():
        if d["kind"] != "Namespace" and d["metadata"].get("namespace") != NS:
            err("%s %s is in namespace %r, not %r" % (d["kind"], d["metadata"].get("name"),
                                                      d["metadata"].get("namespace"), NS))

    # -- built-in kinds: the Kubernetes API's own schemas, strict
    for d in by.values():
        if d.get("apiVersion", "").startswith("keda.sh/"):
            continue
        for v in K8S_VERSIONS:
            try:
                kubernetes_validate.validate(d, v, strict=True)
            except kubernetes_validate.utils.ValidationError as e:
                err("%s %s: not valid for Kubernetes %s: %s at %s" % (
                    d["kind"], d["metadata"].get("name"), v, e.message,
                    "/".join(str(p) for p in e.path)))
            except kubernetes_validate.utils.SchemaNotFoundError:
                err("%s %s: Kubernetes %s has no such kind (%s)" % (
                    d["kind"], d["metadata"].get("name"), v, d.get("apiVersion")))

    # -- KEDA kinds: the CRD fields
    for d in by.values():
        if d.get("apiVersion", "").startswith("keda.sh/"):
            schema = KEDA_SCHEMAS.get(d["kind"])
            if schema is None:
                err("KEDA kind %s is not checked by this test" % d["kind"])
                continue
            for e in jsonschema.Draft7Validator(schema).iter_errors(d):
                err("%s %s: %s at %s" % (d["kind"], d["metadata"].get("name"), e.message,
                                         "/".join(str(p) for p in e.absolute_path)))

    deploys = {k[2]: d for k, d in by.items() if k[0] == "Deployment"}

    # -- every pod: non-root, no privilege escalation, DATABASE_URL from the Secret
    for name, d in deploys.items():
        pod = d["spec"]["template"]["spec"]
        psc = pod.get("securityContext") or {}
        for c in pod.get("initContainers", []) + pod["containers"]:
            sc = c.get("securityContext") or {}
            where = "Deployment %s container %s" % (name, c["name"])
            if not sc.get("runAsNonRoot", psc.get("runAsNonRoot")):
                err(where + ": runAsNonRoot is not true")
            if sc.get("runAsUser", psc.get("runAsUser")) in (0, None):
                err(where + ": runAsUser is 0 or unset (runAsNonRoot then depends on the image)")
            if sc.get("allowPrivilegeEscalation") is not False:
                err(where + ": allowPrivilegeEscalation is not false")
            if sc.get("privileged"):
                err(where + ": privileged")
            env = {e["name"]: e for e in c.get("env", [])}
            ref = ((env.get("DATABASE_URL") or {}).get("valueFrom") or {}).get("secretKeyRef") or {}
            if (ref.get("name"), ref.get("key")) != ("fusionbench-db", "url"):
                err(where + ": DATABASE_URL does not come from Secret fusionbench-db key url")
            if not (c.get("resources") or {}).get("requests") or not (c.get("resources") or {}).get("limits"):
                err(where + ": resources need requests and limits")

    # -- server
    srv = get("Deployment", "fusionbench-server")
    srv_labels = {}
    if srv:
        pod = srv["spec"]["template"]["spec"]
        srv_labels = srv["spec"]["template"]["metadata"].get("labels", {})
        c = pod["containers"][0]
        if srv["spec"].get("replicas") != 2:
            err("server: replicas %r, want 2" % srv["spec"].get("replicas"))
        if not re.search(r"(^|/)fusionbench/server(:|@|$)", c["image"]):
            err("server: image %r is not fusionbench/server" % c["image"])
        f = flags(c.get("args", []))
        for k, v in (("--bind", "0.0.0.0"), ("--port", "8080"), ("--web-dir", "/usr/share/fusionbench/web")):
            if f.get(k) != v:
                err("server: %s is %r, want %r" % (k, f.get(k), v))
        for k in set(f) - SERVER_FLAGS:
            err("server: unknown argument %s" % k)
        ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
        # Probes on the admin listener: exempt from the client caps.
        admin = int(f.get("--admin-port", 0) or 0)
        if not admin:
            err("server: no --admin-port for the probes and Prometheus")
        elif f.get("--admin-bind") in (None, "127.0.0.1", "::1"):
            err("server: --admin-bind %r: the kubelet cannot reach loopback" % f.get("--admin-bind"))
        for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
            g = (c.get(probe) or {}).get("httpGet")
            if not g:
                err("server: no %s httpGet" % probe)
                continue
            if g.get("path") != path:
                err("server: %s path %r, want %s" % (probe, g.get("path"), path))
            if ports.get(g.get("port"), g.get("port")) != admin:
                err("server: %s port %r is not the --admin-port" % (probe, g.get("port")))
        ann = srv["spec"]["template"]["metadata"].get("annotations") or {}
        if ann.get("prometheus.io/port") != str(admin) or ann.get("prometheus.io/path") != "/metrics":
            err("server: Prometheus is not pointed at the admin listener's /metrics: %r" % ann)
        for cidr in filter(None, f.get("--trusted-proxies", "").split(",")):
            try:
                ipaddress.ip_network(cidr, strict=False)
            except ValueError:
                err("server: --trusted-proxies entry %r is not a CIDR range" % cidr)
        if overlay and "--trusted-proxies" not in f:
            err("server: the overlay's Ingress is not a trusted proxy (--trusted-proxies)")
        if srv["spec"]["selector"].get("matchLabels", {}).items() - srv_labels.items():
            err("server: selector does not match its pod labels")

    svc = get("Service", "fusionbench-server")
    if svc and srv:
        if svc["spec"].get("type", "ClusterIP") != "ClusterIP":
            err("Service: type %r, want ClusterIP" % svc["spec"].get("type"))
        if not labels_match({"matchLabels": svc["spec"].get("selector")}, srv_labels):
            err("Service: selector does not select the server pods")
        p = [p for p in svc["spec"].get("ports", []) if p.get("port") == 8080]
        if not p:
            err("Service: no port 8080")
        elif p[0].get("targetPort") not in ("http", 8080):
            err("Service: targetPort %r is not the server's port" % p[0].get("targetPort"))

    pdb = get("PodDisruptionBudget", "fusionbench-server")
    if pdb and srv:
        if pdb.get("apiVersion") != "policy/v1":
            err("PDB: apiVersion %r, want policy/v1" % pdb.get("apiVersion"))
        s = pdb.get("spec", {})
        if s.get("minAvailable") != 1:
            err("PDB: minAvailable %r, want 1" % s.get("minAvailable"))
        if "maxUnavailable" in s:
            err("PDB: minAvailable and maxUnavailable together")
        if not labels_match(s.get("selector"), srv_labels):
            err("PDB: selector does not select the server pods")
        for name, d in deploys.items():
            if name != "fusionbench-server" and labels_match(s.get("selector"), d["spec"]["template"]["metadata"].get("labels", {})):
                err("PDB: selector also selects %s" % name)

    # -- workers
    def worker(name, image, device, want_gpu):
        d = get("Deployment", name)
        if not d:
            return None
        pod = d["spec"]["template"]["spec"]
        c = pod["containers"][0]
        if not re.search(r"(^|/)%s(:|@|$)" % re.escape(image), c["image"]):
            err("%s: image %r is not %s" % (name, c["image"], image))
        if d["spec"].get("replicas") not in (None, 0):
            err("%s: replicas %r: KEDA owns the count (leave it out)" % (name, d["spec"]["replicas"]))
        f = flags(c.get("args", []))
        for k in set(f) - WORKER_FLAGS:
            err("%s: unknown argument %s" % (name, k))
        if f.get("--device") != device:
            err("%s: --device %r, want %s" % (name, f.get("--device"), device))
        try:
            grace = int(f["--drain-grace"])
        except (KeyError, ValueError):
            err("%s: no numeric --drain-grace" % name)
            grace = 0
        tgps = pod.get("terminationGracePeriodSeconds", 30)
        if tgps < grace + 30:
            err("%s: terminationGracePeriodSeconds %d < --drain-grace %d + 30" % (name, tgps, grace))
        stop = (((c.get("lifecycle") or {}).get("preStop") or {}).get("exec") or {}).get("command") or []
        text = " ".join(stop)
        if not ("kill -TERM 1" in text and "kill -0 1" in text):
            err("%s: no preStop hook that sends SIGTERM to the worker and waits for it" % name)
        if c.get("ports"):
            err("%s: a worker opens no port" % name)
        limits = (c.get("resources") or {}).get("limits") or {}
        gpus = limits.get("nvidia.com/gpu")
        if want_gpu:
            if str(gpus) != "1":
                err("%s: limits nvidia.com/gpu %r, want 1" % (name, gpus))
            if f.get("--gpu") != "0":
                err("%s: --gpu %r, want 0 (the device plugin's one GPU)" % (name, f.get("--gpu")))
            if not pod.get("nodeSelector"):
                err("%s: no nodeSelector for GPU nodes" % name)
            if not any(t.get("key") == "nvidia.com/gpu" for t in pod.get("tolerations", [])):
                err("%s: no toleration for nvidia.com/gpu" % name)
        elif gpus is not None or "--gpu" in f:
            err("%s: a CPU worker asks for a GPU" % name)
        return d

    gpu = worker("fusionbench-worker-gpu", "fusionbench/worker-gpu", "cuda", True)
    cpu = worker("fusionbench-worker-cpu", "fusionbench/worker", "cpu", False)

    # -- KEDA: one ScaledObject per worker class, the query, the authentication
    tas = {k[2]: d for k, d in by.items() if k[0] == "TriggerAuthentication"}
    sos = [d for k, d in by.items() if k[0] == "ScaledObject"]
    scaled = {}
    for so in sos:
        name = so["metadata"]["name"]
        s = so.get("spec") or {}
        ref = s.get("scaleTargetRef") or {}
        tgt = deploys.get(ref.get("name"))
        if tgt is None or ref.get("kind", "Deployment") != "Deployment":
            err("ScaledObject %s: scaleTargetRef %r is not one of our Deployments" % (name, ref))
            continue
        scaled[ref["name"]] = so
        if s.get("minReplicaCount") != 0:
            err("ScaledObject %s: minReplicaCount %r, want 0" % (name, s.get("minReplicaCount")))
        if not isinstance(s.get("maxReplicaCount"), int) or not 1 <= s["maxReplicaCount"] <= 64:
            err("ScaledObject %s: maxReplicaCount %r not in 1..64" % (name, s.get("maxReplicaCount")))
        if "cooldownPeriod" not in s:
            err("ScaledObject %s: no cooldownPeriod" % name)
        sd = (((s.get("advanced") or {}).get("horizontalPodAutoscalerConfig") or {})
              .get("behavior") or {}).get("scaleDown") or {}
        if "stabilizationWindowSeconds" not in sd:
            err("ScaledObject %s: no behavior.scaleDown.stabilizationWindowSeconds" % name)
        device = flags(tgt["spec"]["template"]["spec"]["containers"][0].get("args", [])).get("--device")
        for t in s.get("triggers") or []:
            if t.get("type") != "postgresql":
                err("ScaledObject %s: trigger type %r, want postgresql" % (name, t.get("type")))
                continue
            md = t.get("metadata") or {}
            for k in set(md) - PG_METADATA:
                err("ScaledObject %s: %r is no parameter of the postgresql trigger" % (name, k))
            if md.get("targetQueryValue") != "1":
                err("ScaledObject %s: targetQueryValue %r, want \"1\"" % (name, md.get("targetQueryValue")))
            q = " ".join(str(md.get("query", "")).split())
            for want in ("count(*)", "FROM jobs", "device = '%s'" % device, "state = 'running'",
                         "state = 'queued'", "not_before <= now()"):
                if want not in q:
                    err("ScaledObject %s: query lacks %r (device %s): %s" % (name, want, device, q))
            ar = t.get("authenticationRef") or {}
            ta = tas.get(ar.get("name"))
            if "connectionFromEnv" in md:
                err("ScaledObject %s: connectionFromEnv reads the target's env; use the TriggerAuthentication" % name)
            if ta is None:
                err("ScaledObject %s: authenticationRef %r names no TriggerAuthentication" % (name, ar.get("name")))
                continue
            refs = (ta.get("spec") or {}).get("secretTargetRef") or []
            for r in refs:
                if r.get("parameter") not in PG_AUTH:
                    err("TriggerAuthentication %s: %r is no parameter of the postgresql trigger"
                        % (ta["metadata"]["name"], r.get("parameter")))
            conn = [r for r in refs if r.get("parameter") == "connection"]
            if not conn or (conn[0].get("name"), conn[0].get("key")) != ("fusionbench-db", "url"):
                err("TriggerAuthentication %s: connection does not come from Secret fusionbench-db key url"
                    % ta["metadata"]["name"])
    for name in ("fusionbench-worker-gpu", "fusionbench-worker-cpu"):
        if name in deploys and name not in scaled:
            err("no ScaledObject scales %s" % name)

    # -- the overlay: the Secret and the Ingress
    if overlay:
        sec = get("Secret", "fusionbench-db")
        if sec:
            url = (sec.get("stringData") or {}).get("url")
            if url is None and "url" not in (sec.get("data") or {}):
                err("Secret fusionbench-db: no key url")
            elif url is not None and not re.match(r"postgres(ql)?://.*sslmode=verify-full", url):
                err("Secret fusionbench-db: url %r is not a postgresql:// URL with sslmode=verify-full" % url)
        ings = [d for k, d in by.items() if k[0] == "Ingress"]
        if not ings:
            err("the overlay has no Ingress")
        for ing in ings:
            for rule in ing["spec"].get("rules", []):
                for p in (rule.get("http") or {}).get("paths", []):
                    b = p["backend"].get("service", {})
                    if b.get("name") != "fusionbench-server" or \
                            (b.get("port") or {}).get("name", (b.get("port") or {}).get("number")) not in ("http", 8080):
                        err("Ingress %s: backend %r is not the server's Service port" % (ing["metadata"]["name"], b))
    return errs


def load(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


# ---- 1. every kubectl renders the same objects
renders = {}
for path in sorted(glob.glob(os.path.join(render_dir, "*.yaml"))):
    kubectl, name = os.path.basename(path)[:-5].split("@", 1)
    renders.setdefault(name, {})[kubectl] = load(path)
failed = False
for name, by_k in sorted(renders.items()):
    norm = {k: sorted(docs, key=key) for k, docs in by_k.items()}
    first = sorted(norm)[0]
    for k in sorted(norm)[1:]:
        if norm[k] != norm[first]:
            a = {key(d): d for d in norm[first]}
            b = {key(d): d for d in norm[k]}
            diff = sorted(x for x in a.keys() | b.keys() if a.get(x) != b.get(x))
            print("FAIL: deploy/k8s/%s: kubectl #%s and #%s render different objects: %s"
                  % (name.replace("_", "/", 1), first[1:], k[1:], diff))
            failed = True

# ---- 2./3. the rules, on one render per folder
for name, by_k in sorted(renders.items()):
    docs = by_k[sorted(by_k)[0]]
    errs = check(docs, overlay=name.startswith("overlays_"))
    for e in errs:
        print("FAIL: deploy/k8s/%s: %s" % (name.replace("_", "/", 1), e))
    failed |= bool(errs)
    print("test_k8s: deploy/k8s/%s: %d objects, %d problems (Kubernetes %s schemas, strict; KEDA v2.20 CRD fields)"
          % (name.replace("_", "/", 1), len(docs), len(errs), " and ".join(K8S_VERSIONS)))
if failed:
    sys.exit(1)

# ---- 4. each rule can fail: break a good render on purpose, expect the report
good = renders[sorted(n for n in renders if n.startswith("overlays_"))[0]]
good = good[sorted(good)[0]]


def find(docs, kind, name):
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


def c0(docs, name):
    return find(docs, "Deployment", name)["spec"]["template"]["spec"]["containers"][0]


def so(docs, name):
    return find(docs, "ScaledObject", name)["spec"]


def set_arg(args, flag, value):
    args[args.index(flag) + 1] = value


MUTATIONS = [
    ("GPU grace below the drain", "terminationGracePeriodSeconds",
     lambda d: find(d, "Deployment", "fusionbench-worker-gpu")["spec"]["template"]["spec"]
     .__setitem__("terminationGracePeriodSeconds", 600)),
    ("CPU drain longer than the grace", "terminationGracePeriodSeconds",
     lambda d: set_arg(c0(d, "fusionbench-worker-cpu")["args"], "--drain-grace", "320")),
    ("no preStop", "preStop", lambda d: c0(d, "fusionbench-worker-gpu").pop("lifecycle")),
    ("no readiness probe", "readinessProbe", lambda d: c0(d, "fusionbench-server").pop("readinessProbe")),
    ("probe on the public port", "is not the --admin-port",
     lambda d: c0(d, "fusionbench-server")["livenessProbe"]["httpGet"].__setitem__("port", "http")),
    ("ingress not trusted", "not a trusted proxy",
     lambda d: c0(d, "fusionbench-server").__setitem__(
         "args", [a for a in c0(d, "fusionbench-server")["args"] if a not in ("--trusted-proxies",
                                                                               "10.244.0.0/16")])),
    ("liveness on /readyz", "livenessProbe path",
     lambda d: c0(d, "fusionbench-server")["livenessProbe"]["httpGet"].__setitem__("path", "/readyz")),
    ("root container", "runAsUser",
     lambda d: c0(d, "fusionbench-worker-cpu")["securityContext"].__setitem__("runAsUser", 0)),
    ("runAsNonRoot off", "runAsNonRoot",
     lambda d: [c0(d, "fusionbench-server")["securityContext"].__setitem__("runAsNonRoot", False)]),
    ("two GPUs", "nvidia.com/gpu",
     lambda d: c0(d, "fusionbench-worker-gpu")["resources"]["limits"].__setitem__("nvidia.com/gpu", 2)),
    ("unknown worker flag", "unknown argument",
     lambda d: c0(d, "fusionbench-worker-gpu")["args"].extend(["--drain", "600"])),
    ("PDB without minAvailable", "minAvailable",
     lambda d: find(d, "PodDisruptionBudget", "fusionbench-server")["spec"].pop("minAvailable")),
    ("PDB selecting nothing", "PDB: selector",
     lambda d: find(d, "PodDisruptionBudget", "fusionbench-server")["spec"]["selector"]["matchLabels"]
     .__setitem__("app.kubernetes.io/component", "web")),
    ("misspelt Deployment field (strict schema)", "not valid for Kubernetes",
     lambda d: c0(d, "fusionbench-server").__setitem__("imagePullPolice", "Always")),
    ("misspelt ScaledObject field", "Additional properties",
     lambda d: so(d, "fusionbench-worker-gpu").__setitem__("minReplicas", 0)),
    ("numeric trigger metadata", "is not of type 'string'",
     lambda d: so(d, "fusionbench-worker-cpu")["triggers"][0]["metadata"].__setitem__("targetQueryValue", 1)),
    ("no stabilization window", "stabilizationWindowSeconds",
     lambda d: so(d, "fusionbench-worker-gpu")["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
     ["scaleDown"].pop("stabilizationWindowSeconds")),
    ("query for the wrong device", "query lacks",
     lambda d: so(d, "fusionbench-worker-gpu")["triggers"][0]["metadata"].__setitem__(
         "query", so(d, "fusionbench-worker-gpu")["triggers"][0]["metadata"]["query"].replace("'cuda'", "'cpu'"))),
    ("query without running jobs", "state = 'running'",
     lambda d: so(d, "fusionbench-worker-cpu")["triggers"][0]["metadata"].__setitem__(
         "query", "SELECT count(*) FROM jobs WHERE device = 'cpu' AND state = 'queued' AND not_before <= now()")),
    ("wrong auth parameter", "no parameter of the postgresql trigger",
     lambda d: find(d, "TriggerAuthentication", "fusionbench-db")["spec"]["secretTargetRef"][0]
     .__setitem__("parameter", "connectionString")),
    ("scale target misnamed", "scaleTargetRef",
     lambda d: so(d, "fusionbench-worker-cpu")["scaleTargetRef"].__setitem__("name", "fusionbench-worker")),
    ("URL without verify-full", "sslmode=verify-full",
     lambda d: find(d, "Secret", "fusionbench-db")["stringData"].__setitem__(
         "url", "postgresql://u:p@db:5432/fusionbench")),
    ("object outside the namespace", "is in namespace",
     lambda d: find(d, "Service", "fusionbench-server")["metadata"].__setitem__("namespace", "default")),
    ("replicas on a KEDA target", "KEDA owns the count",
     lambda d: find(d, "Deployment", "fusionbench-worker-gpu")["spec"].__setitem__("replicas", 1)),
]
bad = 0
for what, expect, mutate in MUTATIONS:
    docs = copy.deepcopy(good)
    mutate(docs)
    errs = check(docs, overlay=True)
    if not any(expect in e for e in errs):
        print("FAIL: broken on purpose (%s): no report containing %r; got %r" % (what, expect, errs))
        bad += 1
print("test_k8s: %d of %d deliberate breakages reported" % (len(MUTATIONS) - bad, len(MUTATIONS)))
sys.exit(1 if bad else 0)
PY

echo "test_k8s: passed"

#!/usr/bin/env python3
"""The API's OpenAPI 3.1 document (web/openapi.json, served at
/api/v1/openapi.json) against the server's route table (server/srv_route.c):
every route is documented with its method, and nothing is documented that the
server does not route (an operation's x-route names the route pattern where
it differs from its path); the role each route needs (x-role) and whether it
needs a token (security) agree with the table; every error response is the
one Error shape; the job spec's schema is proto/schema/job_spec.schema.json's
(and a suite's job fields the same).  Exit 0 when they agree, 1 naming each
difference.

    test_openapi.py SOURCE_DIR"""

import json
import os
import re
import sys

ROLES = {"SRV_ROLE_NONE": "none", "SRV_ROLE_VIEWER": "viewer", "SRV_ROLE_USER": "user",
         "SRV_ROLE_ADMIN": "admin"}


def routes(src):
    """(method, pattern) -> (needs a token, role) from the routes[] table."""
    text = open(os.path.join(src, "server", "srv_route.c")).read()
    table = text[text.index("static const srv_route routes[] = {"):]
    table = table[:table.index("};")]
    out = {}
    for m in re.finditer(r'\{"(\w+)", "([^"]+)", \w+, (true|false), (\w+),\s*(?:true|false),'
                         r'\s*(?:&\w+|NULL)\}', table):
        out[(m.group(1), m.group(2))] = (m.group(3) == "true", ROLES[m.group(4)])
    return out


def documented(doc):
    out = {}
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            out[(method.upper(), op.get("x-route", path))] = (op, path)
    return out


def main(src):
    doc = json.load(open(os.path.join(src, "web", "openapi.json")))
    bad = []
    if not doc.get("openapi", "").startswith("3.1"):
        bad.append("not an OpenAPI 3.1 document")
    table, docs = routes(src), documented(doc)
    if len(table) < 20:
        bad.append("read only %d routes from srv_route.c" % len(table))
    for key in sorted(set(table) - set(docs)):
        bad.append("route %s %s is not documented" % key)
    for key in sorted(set(docs) - set(table)):
        bad.append("documented %s %s is not a route" % key)
    for key in sorted(set(table) & set(docs)):
        auth, role = table[key]
        op, path = docs[key]
        if op.get("x-role") != role:
            bad.append("%s %s: x-role %r, the table says %r" % (key + (op.get("x-role"), role)))
        if bool(op.get("security")) != auth:
            bad.append("%s %s: security %r, the table says auth %s" % (key + (op.get("security"),
                                                                               auth)))
        for status, r in op["responses"].items():
            if int(status) >= 400 and r != {"$ref": "#/components/responses/Error"}:
                bad.append("%s %s: %s is not the Error response" % (key + (status,)))
        for p in re.findall(r"\{(\w+)\}", path):
            names = [x["name"] for x in op.get("parameters", []) if x["in"] == "path"]
            if p not in names:
                bad.append("%s %s: path parameter %s undeclared" % (key + (p,)))
    # The job spec is proto/schema/job_spec.schema.json (the decoder's mirror), its
    # name and param definitions at components/schemas/Name and Param; a suite's
    # job fields are the spec's.
    spec = json.load(open(os.path.join(src, "proto", "schema", "job_spec.schema.json")))

    def refs(x):
        return json.loads(json.dumps(x).replace("#/$defs/name", "#/components/schemas/Name")
                          .replace("#/$defs/param", "#/components/schemas/Param"))
    want = refs(spec["properties"])
    schemas = doc["components"]["schemas"]
    if schemas.get("Spec", {}).get("properties") != want:
        bad.append("components/schemas/Spec differs from proto/schema/job_spec.schema.json")
    if schemas.get("Name") != spec["$defs"]["name"]:
        bad.append("components/schemas/Name differs from job_spec.schema.json's name")
    if schemas.get("Param") != refs(spec["$defs"]["param"]):
        bad.append("components/schemas/Param differs from job_spec.schema.json's param")
    for k, v in schemas.get("SuiteSpec", {}).get("properties", {}).items():
        if k in want and v != want[k]:
            bad.append("SuiteSpec.%s differs from the job spec's" % k)
    # The result is proto/schema/result.schema.json, its definitions at
    # components/schemas under the names below; a job's result refers to it.
    result = json.load(open(os.path.join(src, "proto", "schema", "result.schema.json")))
    names = {"env": "ResultEnv", "interference": "ResultInterference",
             "repetition": "ResultRepetition", "latency": "ResultLatency",
             "fusion_group": "FusionGroup", "variant": "ResultVariant",
             "comparison": "ResultComparison", "kernel_row": "KernelRow"}

    def result_refs(x):
        text = json.dumps(x)
        for k, v in names.items():
            text = text.replace('"#/$defs/%s"' % k, '"#/components/schemas/%s"' % v)
        return json.loads(text)
    top = {k: v for k, v in result.items() if k not in ("$schema", "$id", "$defs", "title")}
    if schemas.get("Result") != result_refs(top):
        bad.append("components/schemas/Result differs from proto/schema/result.schema.json")
    for k, v in names.items():
        if schemas.get(v) != result_refs(result["$defs"].get(k)):
            bad.append("components/schemas/%s differs from result.schema.json's %s" % (v, k))
    if set(result["$defs"]) != set(names):
        bad.append("result.schema.json's $defs are not the ones mapped here")
    job_result = schemas.get("Job", {}).get("properties", {}).get("result")
    if job_result != {"oneOf": [{"$ref": "#/components/schemas/Result"}, {"type": "null"}]}:
        bad.append("Job.result does not refer to components/schemas/Result")
    for b in bad:
        print("test_openapi: " + b)
    print("test_openapi: %s" % ("FAILED" if bad else "%d routes documented" % len(table)))
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))

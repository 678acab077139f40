#!/usr/bin/env python3
"""End to end: administration without a web form (issue 13).

fusionbench-server user add/list and token create/list/revoke against the
database: exit codes and messages for bad input, the token printed once and
alone on stdout, never listed, never in the database (only its digest) and
never in the output of any other command."""

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, check_eq, log  # noqa: E402

TOKEN = re.compile(r"^fbu_([A-Za-z0-9]{12})_[A-Za-z0-9]{32}$")


def admin(env, *args):
    r = subprocess.run([fbtest.find_bin("fusionbench-server"), "--database-url", env.db_url] +
                       list(args), capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


def run(env):
    rc, out, err = admin(env, "user", "add", "alice", "--role", "admin")
    check_eq(rc, 0, "user add alice (%s)" % err)
    check_eq(admin(env, "user", "add", "bob", "--role", "user")[0], 0, "user add bob")
    rc, _, err = admin(env, "user", "add", "alice", "--role", "user")
    check(rc == 1 and "already" in err, "a second alice: %d %r" % (rc, err))
    rc, _, err = admin(env, "user", "add", "carol", "--role", "root")
    check(rc == 1 and "role" in err, "a bad role: %d %r" % (rc, err))
    rc, _, err = admin(env, "user", "add", "Carol;drop", "--role", "user")
    check(rc == 1 and "name" in err, "a bad name: %d %r" % (rc, err))
    check_eq(admin(env, "user", "add", "dave")[0], 2, "user add without --role: usage")
    check_eq(admin(env, "frobnicate")[0], 2, "an unknown command is the server's usage error")
    rc, out, _ = admin(env, "user", "list")
    check(rc == 0 and re.search(r"^alice\tadmin\t0\t", out, re.M) and
          re.search(r"^bob\tuser\t0\t", out, re.M), "user list: %r" % out)

    rc, out, err = admin(env, "token", "create", "alice", "--name", "laptop", "--expires-days",
                         "30")
    lines = out.splitlines()
    check(rc == 0 and len(lines) == 1 and TOKEN.match(lines[0]),
          "token create prints the token alone: %d %r %r" % (rc, out, err))
    token = lines[0]
    key_id = TOKEN.match(token).group(1)
    secret = token[17:]
    check(token not in err and key_id in err, "stderr names the key id, not the token")
    rc, _, err = admin(env, "token", "create", "nobody")
    check(rc == 1 and "nobody" in err, "a token for no user: %d %r" % (rc, err))
    check_eq(admin(env, "token", "create", "alice", "--expires-days", "0")[0], 2,
             "--expires-days 0")

    rc, out, _ = admin(env, "token", "list")
    check(rc == 0 and key_id in out and "laptop" in out and secret not in out,
          "token list: key id and label, no secret: %r" % out)
    dump = env.sql("SELECT t::text FROM tokens t")
    check(all(secret not in row[0] for row in dump), "the token is in the database")
    check_eq(env.sql("SELECT length(digest) FROM tokens WHERE key_id = '%s'" % key_id),
             [["32"]], "a 32-byte digest is what is stored")

    rc, _, err = admin(env, "token", "revoke", key_id)
    check_eq(rc, 0, "token revoke (%s)" % err)
    rc, out, _ = admin(env, "token", "list", "alice")
    row = [ln for ln in out.splitlines() if ln.startswith(key_id)]
    check(row and row[0].split("\t")[5] != "-", "the revoked token shows revoked_at: %r" % out)
    rc, _, err = admin(env, "token", "revoke", "AAAAAAAAAAAA")
    check(rc == 1 and "AAAAAAAAAAAA" in err, "revoking an unknown key id: %d %r" % (rc, err))
    log("users, tokens (key id %s), list and revoke through the CLI; the token stored "
        "only as its digest" % key_id)


if __name__ == "__main__":
    fbtest.main(run, "admin")

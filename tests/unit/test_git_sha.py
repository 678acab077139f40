#!/usr/bin/env python3
"""cmake/git_sha.cmake, the revision every result records: run in a
throwaway git repository, the header names its HEAD, says -dirty when a
tracked file changes, follows a new commit without reconfiguring, is not
rewritten when nothing changed (so a build recompiles nothing), and says
"unknown" outside git.

    python3 tests/unit/test_git_sha.py SOURCE_DIR"""
import os
import subprocess
import sys
import tempfile

FAILED = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        FAILED.append(what)


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    script = os.path.abspath(os.path.join(src, "cmake", "git_sha.cmake"))
    with tempfile.TemporaryDirectory(prefix="fb-git-sha-") as tmp:
        repo, out = os.path.join(tmp, "repo"), os.path.join(tmp, "gen", "fb_git_sha.h")
        os.makedirs(repo)
        os.environ["GIT_CEILING_DIRECTORIES"] = tmp  # "plain" below is in no repository
        env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@localhost",
                   GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@localhost")

        def git(*a):
            return subprocess.run(["git", "-C", repo] + list(a), env=env, check=True,
                                  capture_output=True, text=True).stdout.strip()

        def header(where=repo):
            subprocess.run(["cmake", "-DSRC=" + where, "-DOUT=" + out, "-P", script],
                           check=True, capture_output=True)
            with open(out) as f:
                text = f.read()
            return text.split('#define FB_GIT_SHA "')[1].split('"')[0]

        git("init", "-q")
        with open(os.path.join(repo, "a.c"), "w") as f:
            f.write("int a;\n")
        git("add", "a.c")
        git("commit", "-qm", "one")
        first = git("rev-parse", "--short=12", "HEAD")
        check(header() == first, "the header names HEAD (%s)" % first)
        mtime = os.stat(out).st_mtime_ns
        os.utime(out, ns=(mtime - 10**9, mtime - 10**9))
        header()
        check(os.stat(out).st_mtime_ns == mtime - 10**9,
              "an unchanged revision leaves the header untouched (nothing recompiles)")
        with open(os.path.join(repo, "a.c"), "a") as f:
            f.write("int b;\n")
        check(header() == first + "-dirty", "a changed tracked file: %s-dirty" % first)
        git("commit", "-qam", "two")
        second = git("rev-parse", "--short=12", "HEAD")
        check(second != first and header() == second,
              "a new commit, no reconfigure: the header follows it (%s)" % second)
        plain = os.path.join(tmp, "plain")
        os.makedirs(plain)
        check(header(plain) == "unknown", "outside git: unknown")
    print("%d failed" % len(FAILED))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())

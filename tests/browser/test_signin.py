#!/usr/bin/env python3
"""The dashboard against a server that needs tokens (issue 13): the page asks
for a token, a wrong one is refused, the right one opens the dashboard and
submits a job that the API then shows as the user's; the token lives in the
tab's sessionStorage only (no cookie, not in the URL), and signing out asks
again."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, check_eq, log  # noqa: E402
import test_dashboard as td  # noqa: E402


def test(env):
    from playwright.sync_api import sync_playwright
    env.start_server(["--auth"])
    env.admin("user", "add", "alice", "--role", "user")
    token = env.admin("token", "create", "alice")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=td.CHROMIUM, headless=True,
                                    args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(env.base + "/#/catalog")
            page.wait_for_selector("#signin:not([hidden])", timeout=15000)
            page.fill("#signin-token", "fbu_AAAAAAAAAAAA_" + "B" * 32)
            page.click("#signin-form button[type=submit]")
            page.wait_for_selector("#signin:not([hidden])", timeout=15000)
            check("unknown or wrong" in page.inner_text("#signin-message"),
                  "a wrong token is refused, said: %r" % page.inner_text("#signin-message"))
            page.fill("#signin-token", token)
            page.click("#signin-form button[type=submit]")
            page.wait_for_selector("#signin", state="hidden", timeout=15000)
            page.wait_for_selector("#catalog-table tbody tr", timeout=15000)
            # each native row lists its own params, the engine's once below
            row = page.locator("#catalog-table tbody tr:has(td:first-child code:text-is('softmax'))")
            check_eq(row.locator("td").nth(9).inner_text(), "rows, cols", "softmax's params")
            note = page.inner_text("#catalog-engine-params")
            check("Every native workload also takes threads, seed, planner" in note,
                  "the engine's params: %r" % note)
            row.locator("button").click()
            page.wait_for_url("**/#/jobs/*", timeout=15000)
            jid = int(page.url.rsplit("/", 1)[1])
            hdrs = {"Authorization": "Bearer " + token}
            job = fbtest.http(env.base, "GET", "/api/v1/jobs/%d" % jid, headers=hdrs)[2]
            check_eq(job["owner"], "alice", "the owner of the job submitted from the page")
            check(token not in page.url and page.context.cookies() == [],
                  "the token is in the URL or a cookie")
            check_eq(page.evaluate("sessionStorage.getItem('fusionbench-token')"), token,
                     "the token is kept in the tab's sessionStorage")
            page.click("#signout")
            page.wait_for_selector("#signin:not([hidden])", timeout=15000)
            check(page.evaluate("sessionStorage.getItem('fusionbench-token')") is None,
                  "signing out forgets the token")
        finally:
            browser.close()
    log("sign-in: wrong token refused, job %d submitted as alice, sign-out asks again" % jid)


if __name__ == "__main__":
    if not os.environ.get("FB_TEST_DATABASE_URL"):
        td.skip("FB_TEST_DATABASE_URL not set")
    td.ensure_playwright()
    if not os.access(td.CHROMIUM, os.X_OK):
        td.skip("%s not found (apt-get install chromium)" % td.CHROMIUM)
    fbtest.main(test, "signin")

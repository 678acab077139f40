"""Browser tests of the dashboard (issue 6): Playwright for Python driving
Debian's Chromium (headless) against a real server, worker and PostgreSQL.

  1. the overview renders its charts from a seeded database (a suite run by a
     real worker);
  2. a job submitted from the dashboard moves to done with its progress shown;
  3. a job page shows its kernel breakdown (stacked category bars, top kernels,
     a timeline per variant);
  4. the queue's submit form offers a job and a suite with the catalog's choices;
  5. a native model job (resnet18 at 64x64) draws its graph, coloured by fusion
     group in the fused view and not at all in eager; a pattern job says it has
     no graph;
  6. the Models page uploads an archive through its form and deletes it, and
     an inductor job's Explain card shows Inductor's fusion decisions with
     their kernels on the roofline (`--models-page`: these alone, as
     browser.test_models_page, whose worker runs the inductor engine: the
     archive's export and the worker's reading of it each import torch, and
     the job compiles tiny_cnn, about two minutes of a 2-vCPU VM).

Screenshots go to $FB_BIN_DIR/test-output/browser/.  Exits 77 with the reason
when Playwright, Chromium or the test database is missing."""

import os
import re
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import fbtest  # noqa: E402
from fbtest import check, check_eq, log  # noqa: E402

CHROMIUM = os.environ.get("FB_CHROMIUM", "/usr/bin/chromium")


def skip(reason):
    print("skipped: " + reason, flush=True)
    sys.exit(fbtest.SKIP)


def project_venv_python():
    """The project venv's python (scripts/requirements.txt hash), or None."""
    import hashlib
    req = os.path.join(fbtest.source_dir(), "scripts", "requirements.txt")
    try:
        with open(req, "rb") as f:
            h = hashlib.sha256(f.read()).hexdigest()[:16]
    except OSError:
        return None
    p = os.path.expanduser("~/.cache/fusionbench/venv-%s/bin/python" % h)
    return p if os.access(p, os.X_OK) else None


def ensure_playwright():
    try:
        import playwright.sync_api  # noqa: F401
        return
    except ImportError:
        pass
    py = project_venv_python()
    # A venv's python is a symlink to the system one: tell them apart by the flag.
    if py and not os.environ.get("FB_BROWSER_REEXEC"):
        os.environ["FB_BROWSER_REEXEC"] = "1"
        os.execv(py, [py] + sys.argv)
    skip("playwright is not installed (pip install playwright, or scripts/requirements.txt's venv)")


def shots_dir():
    root = os.environ.get("FB_BIN_DIR") or os.path.join(fbtest.source_dir(), "build")
    d = os.path.join(root, "test-output", "browser")
    os.makedirs(d, exist_ok=True)
    return d


def chart_points(page, canvas_id):
    """Number of data points Chart.js drew on a canvas (0 when no chart)."""
    return page.evaluate(
        """(id) => { const c = document.getElementById(id); const ch = c && window.Chart && Chart.getChart(c);
             return ch ? ch.data.datasets.reduce((a, d) => a + d.data.filter((x) => x !== null).length, 0) : 0; }""",
        canvas_id)


def seed_suite(env):
    st, _, s = env.post("/api/v1/suites", {
        "name": "browser", "workloads": ["gemm_bias_relu", "softmax", "layernorm"],
        "warmup": 1, "iterations": 10, "explain": True})
    check_eq(st, 201, "seed suite: %s" % s)
    for r in s["rows"]:
        check_eq(env.wait_job(r["job_id"], timeout=120)["state"], "succeeded", "seed job")
    return s


def overview(env, page, shots):
    page.goto(env.base + "/#/")
    page.wait_for_function("() => document.querySelectorAll('#ov-table tbody tr').length >= 3", timeout=20000)
    for cid in ("chart-speedup", "chart-kernels", "chart-groups", "chart-memory"):
        n = chart_points(page, cid)
        check(n >= 3 if cid != "chart-groups" else n >= 2, "%s drew %d points" % (cid, n))
    kpi = page.inner_text("#ov-cards")
    check("geometric mean speedup" in kpi and "×" in kpi, "speedup card: %r" % kpi)
    # the slowdowns card counts the suite's "slower" verdicts, as the red bars
    # do (a speedup under 1 within noise is no difference, grey)
    suite = env.get("/api/v1/suites?limit=1")[2]["items"][0]
    rows = env.get("/api/v1/suites/%d" % suite["id"])[2]["rows"]
    slower = 0
    for r in rows:
        res = env.job(r["job_id"]).get("result") or {}
        slower += (res.get("comparison") or {}).get("change", {}).get("fused") == "slower"
    card = page.locator("#ov-cards > *", has_text="slowdowns (significant)").inner_text()
    check_eq(card.split()[0], str(slower), "slowdowns card against the verdicts (%r)" % card)
    # Every model links to its job.
    links = page.eval_on_selector_all("#ov-table tbody tr td:first-child a", "as => as.map(a => a.getAttribute('href'))")
    check(all(h.startswith("#/jobs/") for h in links) and len(links) == 3, "model links: %r" % links)
    page.screenshot(path=os.path.join(shots, "overview.png"), full_page=True)


def suite_page(env, page, shots, suite_id):
    """An explained suite's page: the groups' verdicts and the roofline share
    as cards, the lost groups by reason as a table (shown, even when empty)."""
    page.goto(env.base + "/#/suites/%d" % suite_id)
    page.wait_for_function("() => /fusion groups explained/.test(document.getElementById('suite-cards').innerText)",
                           timeout=20000)
    cards = page.inner_text("#suite-cards")
    check("3 jobs" in cards and "won" in cards and "on the roofline" in cards, "suite cards: %r" % cards)
    check(page.is_visible("#suite-explain"), "the lost groups by reason")
    page.screenshot(path=os.path.join(shots, "suite.png"), full_page=True)


def submit_and_watch(env, page, shots, worker):
    """Submits a job from the suite form and watches the queue show progress.

    The job's child process is stopped (SIGSTOP) once the API says it is timing,
    so the page must show it running however fast this machine runs the job,
    then let go (SIGCONT) to watch it finish."""
    page.goto(env.base + "/#/suites")
    page.wait_for_selector("#sf-set option", state="attached")
    page.select_option("#sf-set", "w:gemm_bias_gelu")
    page.fill("#sf-name", "from-browser")
    # Long enough (a second or more) that the API poll below sees the timing
    # phase; the job is stopped there, so more rounds only cost time (600 of
    # them ran 88 s on a 2-vCPU VM).
    page.fill("#sf-iters", os.environ.get("FB_BROWSER_ITERATIONS", "200"))
    page.click("#suite-form button[type=submit]")
    page.wait_for_url("**/#/suites/*", timeout=10000)
    suite_id = int(page.url.rsplit("/", 1)[1])
    job_id = env.get("/api/v1/suites/%d" % suite_id)[2]["rows"][0]["job_id"]
    fbtest.wait_timing(env, job_id, timeout=60)
    kids = fbtest.children_of(worker.pid)
    check_eq(len(kids), 1, "job children of the worker")
    os.kill(kids[0], signal.SIGSTOP)
    try:
        page.goto(env.base + "/#/jobs")
        # The running job shows a progress bar with its phase; the queue refreshes itself.
        page.wait_for_function(
            """(id) => [...document.querySelectorAll('#jobs-table tbody tr')].some((tr) =>
                 tr.cells[0].innerText.trim() == String(id) && tr.querySelector('.bar') &&
                 /timing|warmup|profile/.test(tr.cells[4].innerText))""", arg=job_id, timeout=30000)
        page.screenshot(path=os.path.join(shots, "queue-running.png"), full_page=True)
    finally:
        os.kill(kids[0], signal.SIGCONT)
    # While a job is live the queue refreshes every second (app.js LIVE_REFRESH_MS).
    t0 = time.monotonic()
    page.wait_for_function(
        """(id) => [...document.querySelectorAll('#jobs-table tbody tr')].some((tr) =>
             tr.cells[0].innerText.trim() == String(id) && /succeeded/.test(tr.cells[3].innerText))""",
        arg=job_id, timeout=120000)
    check_eq(env.job(job_id)["state"], "succeeded", "submitted job")
    log("queue showed the job done %.1f s after it was let go" % (time.monotonic() - t0))
    page.screenshot(path=os.path.join(shots, "queue-done.png"), full_page=True)
    return job_id


def job_page(env, page, shots, job_id):
    page.goto(env.base + "/#/jobs/%d" % job_id)
    page.wait_for_function("() => document.querySelectorAll('#timeline .lane').length == 2", timeout=20000)
    n = chart_points(page, "chart-categories")
    check(n >= 2, "category bars drawn: %d" % n)
    check(chart_points(page, "chart-latency") > 0, "latency histogram drawn")
    rows = page.eval_on_selector_all("#top-kernels tbody tr", "rs => rs.map(r => r.innerText)")
    check(any("fused" in r and "+" in r for r in rows), "a fused kernel lists its ops: %r" % rows)
    check(page.eval_on_selector_all("#timeline .k", "ks => ks.length") >= 2, "timeline has kernels")
    page.screenshot(path=os.path.join(shots, "job.png"), full_page=True)


def queue_form(env, page):
    """The queue's form offers every catalog workload as a job, and all, the
    domains and every workload as a suite."""
    names = sorted(w["name"] for w in env.get("/api/v1/workloads")[2]["items"])
    page.goto(env.base + "/#/jobs")
    page.wait_for_selector("#qf-workload option", state="attached")
    opts = page.eval_on_selector_all("#qf-workload option", "os => os.map(o => o.value)")
    check_eq(sorted(o.split(":")[2] for o in opts), names, "job choices")
    page.select_option("#qf-kind", "suite")
    page.wait_for_function("() => document.querySelector('#qf-workload option').value == 'all'")
    opts = page.eval_on_selector_all("#qf-workload option", "os => os.map(o => o.value)")
    check("domain:vision" in opts and len(opts) > len(names), "suite choices: %r" % opts[:6])


def graph_nodes(page, colored):
    """Graph nodes drawn, or those coloured by a fusion group."""
    sel = "#graph-box .gnode[data-id]" + (":not([data-group=''])" if colored else "")
    return page.eval_on_selector_all(sel, "ns => ns.filter(n => !%s || n.querySelector('rect').getAttribute('fill')).length" % ("true" if colored else "false"))


def graph_page(env, page, shots, pattern_job):
    st, _, job = env.post("/api/v1/jobs", {
        # the rules' 20 groups, every conv with its batch norm (the cost
        # planner, the default, may unfuse some by what it measures); its
        # rounds and counterfactuals without adaptive repetition's extra ones
        # (15.6 s -> 3.4 s here: the page is the test, not the verdicts)
        "workload": "resnet18", "engine": "native",
        "params": {"image": 64, "planner": "rules", "time_budget_s": 0},
        "warmup": 1, "iterations": 5, "explain": True})
    check_eq(st, 201, "resnet18 job: %s" % job)
    check_eq(env.wait_job(job["id"], timeout=180)["state"], "succeeded", "resnet18 job")
    page.goto(env.base + "/#/jobs/%d" % job["id"])
    page.wait_for_function("() => document.querySelectorAll('#graph-box .gnode[data-id]').length >= 60", timeout=20000)
    fused = graph_nodes(page, True)
    check(fused >= 20, "fused view colours %d nodes" % fused)
    legend = page.inner_text("#graph-legend")
    check("bn_fold" in legend and "tensor+element" in legend, "legend by rule/kind: %r" % legend)
    page.hover("#graph-box .gnode[data-id='0']")
    tip = page.inner_text("#graph-tip")
    check("conv2d" in tip and "64×32×32" in tip and "bn_fold" in tip, "hover: %r" % tip)
    page.mouse.move(5, 5)
    page.locator("#graph-card").screenshot(path=os.path.join(shots, "graph-fused.png"))
    page.click("#graph-tools button[data-variant=eager]")
    page.wait_for_function("() => document.querySelector('#graph-tools button.on').dataset.variant == 'eager'")
    check_eq(graph_nodes(page, True), 0, "eager view coloured nodes")
    check(graph_nodes(page, False) >= 60, "eager view still draws the graph")
    page.locator("#graph-card").screenshot(path=os.path.join(shots, "graph-eager.png"))
    explain_card(page, shots)
    page.goto(env.base + "/#/jobs/%d" % pattern_job)
    page.wait_for_function("() => /no graph/.test(document.getElementById('graph-box').innerText)", timeout=20000)
    # a job without an explanation offers one, and says who makes it
    page.wait_for_selector("#explain-none button", timeout=20000)
    page.click("#explain-none button")
    page.wait_for_function("() => /Being explained by job|won/.test(document.getElementById('explain-card').innerText)",
                           timeout=20000)


def explain_card(page, shots):
    """The Explain card of a job run with explain: the 20 groups of resnet18,
    the waterfall, and a group's nodes picked out in the graph on a click."""
    page.click("#graph-tools button[data-variant=fused]")
    page.wait_for_function("() => document.querySelectorAll('#explain-table tbody tr').length == 20", timeout=20000)
    text = page.inner_text("#explain-summary")
    check("click a group" in page.inner_text("#explain-sub"), "a native job's card subtitle")
    check("won" in text and "measured difference" in text, "explain summary: %r" % text)
    page.click("#explain-table tbody tr:first-child")
    picked = page.eval_on_selector_all("#graph-box .gnode.picked", "ns => ns.length")
    check(picked >= 2, "a group's nodes picked out in the graph: %d" % picked)
    # every group's fused kernel on the worker's measured roofline
    check(page.is_visible("#roofline-box"), "the roofline chart is drawn")
    pts = page.evaluate("() => charts['chart-roofline'].data.datasets.slice(1)"
                        ".flatMap((d) => d.data.map((p) => [p.x, p.y]))")
    check_eq(len(pts), 20, "one point per group on the roofline")
    check(all(x > 0 and y > 0 for x, y in pts), "intensities and rates: %r" % pts)
    page.locator("#explain-card").screenshot(path=os.path.join(shots, "explain.png"))


def models_page(env, page, shots):
    """The Models page: the test model's archive (tests/inductor/usermodel.py)
    uploaded through the form (its progress shown) lands in the table with
    the file's SHA-256; the worker prepares it, and its details card shows
    what was read (inputs, operators, the native form) with a Benchmark
    button per engine; delete takes it away."""
    import hashlib
    sys.path.insert(0, os.path.join(HERE, "..", "inductor"))
    import usermodel
    path = os.path.join(env.tmp, "usernet.pt2")
    usermodel.export(path)
    data = open(path, "rb").read()
    page.goto(env.base + "/#/models")
    page.wait_for_selector("#model-form")
    page.fill("#mf-name", "usernet")
    page.select_option("#mf-visibility", "lab")
    page.set_input_files("#mf-file", path)
    page.click("#model-form button[type=submit]")
    page.wait_for_function("() => document.getElementById('mf-message').textContent"
                           ".startsWith('uploaded as model')", timeout=30000)
    page.wait_for_selector("#models-table tbody tr")
    cells = page.locator("#models-table tbody tr").first.locator("td").all_inner_texts()
    check_eq(cells[1:4] + [cells[5]], ["usernet", "–", "lab", fmt_kib(len(data))],
             "the model's row")
    check(cells[4] in ("preparing", "ready"), "its status: %s" % cells[4])
    st, _, m = env.get("/api/v1/models")
    check_eq(m["items"][0]["sha256"], hashlib.sha256(data).hexdigest(), "the stored digest")
    # the worker reads it; the page's refresh shows it ready
    page.wait_for_function("() => [...document.querySelectorAll('#models-table tbody td')]"
                           ".some((td) => td.textContent.trim() === 'ready')", timeout=120000)
    page.click("#models-table a.model-link")
    page.wait_for_selector("#model-detail:not([hidden])")
    text = page.inner_text("#model-detail")
    check("x [2, 3, 16, 16] float32 (dynamic: dim 0); seeded random values" in text and
          "aten.conv2d.default ×3" in text and "Benchmark (inductor)" in text and
          "Benchmark (native)" in text and "native form" in text,
          "the details card: inputs, operators, the native form, a benchmark button per "
          "engine (%s)" % text[:800])
    page.screenshot(path=os.path.join(shots, "models.png"), full_page=True)
    page.once("dialog", lambda d: d.accept())
    page.locator("#models-table tbody tr").first.locator("button").click()
    page.wait_for_selector("#models-table + .empty:not([hidden])")
    check_eq(env.get("/api/v1/models")[2]["items"], [], "deleted from the page")


def inductor_explain_card(env, page, shots):
    """An inductor job explained (tiny_cnn, nothing undone: time_budget_s 0):
    its Explain card lists the compile's layout choice beside fusion (not
    measured) and Inductor's fusion decisions with the share of the
    roofline their kernels reach, and draws each kernel holding one on the
    worker's measured roofline, once, as many points as distinct kernels with
    counts in the explanation.  Submitted as a suite of one, whose page
    shows the inductor job's compiled rung as its fused column."""
    st, _, suite = env.post("/api/v1/suites", {
        "name": "inductor", "workloads": ["tiny_cnn"], "engine": "inductor",
        "variants": ["eager", "inductor"], "params": {"image_size": 16, "time_budget_s": 0},
        "warmup": 1, "iterations": 5, "explain": True})
    check_eq(st, 201, "inductor suite: %s" % suite)
    job = {"id": suite["rows"][0]["job_id"]}
    check_eq(env.wait_job(job["id"], timeout=600)["state"], "succeeded", "inductor job")
    page.goto(env.base + "/#/suites/%d" % suite["id"])
    page.wait_for_function("() => /Inductor's fusions explained/.test("
                           "document.getElementById('suite-cards').innerText)", timeout=20000)
    cards = page.inner_text("#suite-cards")
    check("Inductor's fusions explained (1 job)" in cards, "a suite of one job: %r" % cards)
    cells = page.eval_on_selector_all("#suite-table tbody tr:first-child td",
                                      "tds => tds.map((t) => t.textContent.trim())")
    fused_ms = env.job(job["id"])["result"]["variants"]
    fused_ms = {v["name"]: v["latency_ms"]["median"] for v in fused_ms}["inductor"]
    check(len(cells) >= 8 and cells[6] != "–" and abs(float(cells[6]) - fused_ms) < 1e-3 * fused_ms
          + 1e-4 and cells[7] != "–", "the suite's row: inductor's median as fused ms, its speedup "
          "(%r, %.4f)" % (cells, fused_ms))
    st, _, ex = env.get("/api/v1/jobs/%d/explain" % job["id"])
    fx = ex["explain"]["fusions"]
    kernels = {e["kernel"] for e in fx["fusions"]
               if e.get("costs") and e["costs"]["flops"] and e["costs"]["bytes"]}
    check(ex["explain"]["roofline"]["gbps"] > 0 and kernels,
          "the explanation: the worker's roofline, kernels with their counts (%s)" % fx["fusions"])
    page.goto(env.base + "/#/jobs/%d" % job["id"])
    page.wait_for_function("() => document.querySelectorAll('#explain-table tbody tr').length == %d"
                           % len(fx["fusions"]), timeout=20000)
    head = page.eval_on_selector_all("#explain-table thead th", "ths => ths.map((t) => t.textContent)")
    check("of roofline" in head and "predicted B" in head, "the fusions' columns: %r" % head)
    # each decision's share of the roofline as its kernel reached it; one past
    # 100% marked and explained (the roof is a stream through memory)
    shares = page.eval_on_selector_all(
        "#explain-table tbody tr", "trs => trs.map((r) => [r.children[%d].textContent, "
        "r.children[%d].title])" % (head.index("of roofline"), head.index("of roofline")))
    want = []
    for e in fx["fusions"]:
        sh = (e.get("costs") or {}).get("roofline_share")
        want.append(["–", ""] if sh is None else
                    ["%.0f%%%s" % (100 * sh, "*" if sh > 1 else ""),
                     "over 100% of the roofline" if sh > 1 else ""])
    check_eq([[t, "over 100% of the roofline" if ti.startswith("over 100%") else ""]
              for t, ti in shares], want, "the fusions' shares of the roofline")
    over = page.evaluate("() => { const td = shareCell(1.094); return [td.textContent, td.title, "
                         "td.className]; }")
    check(over[0] == "109%*" and "from cache" not in over[1] and "sat in cache" in over[1] and
          "over-roof" in over[2], "a share past 100%% is marked and says why (%r)" % (over,))
    sub = page.inner_text("#explain-sub")
    check("Inductor's fusion decisions" in sub and "graph" not in sub,
          "the card's subtitle speaks of Inductor's decisions, not the native graph (%r)" % sub)
    text = page.inner_text("#explain-summary")
    check(re.search(r"fused kernels on the roofline\s+\d+%", text) is not None,
          "the summary: the fused kernels' share of the roofline (%r)" % text)
    # the compile's layout choice beside fusion: listed, with a budget of 0 not measured
    check_eq([(b["what"], b["verdict"]) for b in fx["beside"]],
             [("layout_optimization=False", "not_measured")], "beside fusion in the explanation")
    check(re.search(r"beside fusion: layout optimization \(switched off alone\)\s+not measured",
                    text) is not None, "the summary: the layout choice beside fusion (%r)" % text)
    mem = fx["memory"]["inductor"]
    top = max(mem["held_by"].items(), key=lambda kv: kv[1])
    check(re.search(r"memory, one iteration's peak\s+eager [\d.]+ K?M?i?B .*· inductor [\d.]+ "
                    r"K?M?i?B \(.*%s" % re.escape(top[0]), text) is not None and
          sum(mem["held_by"].values()) >= mem["peak_bytes"],
          "the summary: each rung's peak and what held it (%r; %s)" % (text, mem))
    check(page.is_visible("#roofline-box"), "the roofline chart is drawn")
    pts = page.evaluate("() => charts['chart-roofline'].data.datasets.slice(1)"
                        ".flatMap((d) => d.data.map((p) => p.id))")
    check_eq(len(pts), len(kernels), "one point per kernel holding a decision")
    page.locator("#explain-card").screenshot(path=os.path.join(shots, "explain-inductor.png"))


def fmt_kib(n):
    """What the page's fmtBytes prints for n bytes (n < 1 MiB)."""
    return "%.1f KiB" % (n / 1024)


def test(env):
    from playwright.sync_api import sync_playwright
    shots = shots_dir()
    only_models = "--models-page" in sys.argv
    env.start_server()
    # with the inductor engine, the worker prepares the uploaded model
    worker = env.start_worker(inductor=only_models)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            if only_models:
                models_page(env, page, shots)
                log("models page checked")
                inductor_explain_card(env, page, shots)
                log("an inductor job's Explain card checked")
                check_eq(errors, [], "page errors")
                return
            seeded = seed_suite(env)
            overview(env, page, shots)
            suite_page(env, page, shots, seeded["id"])
            log("overview and suite pages checked")
            job_id = submit_and_watch(env, page, shots, worker)
            job_page(env, page, shots, job_id)
            queue_form(env, page)
            log("job page and submit form checked")
            graph_page(env, page, shots, job_id)
            log("graph and explanation checked")
            check_eq(errors, [], "page errors")
        finally:
            browser.close()
    log("screenshots in %s" % shots)


if __name__ == "__main__":
    if not os.environ.get("FB_TEST_DATABASE_URL"):
        skip("FB_TEST_DATABASE_URL not set")
    ensure_playwright()
    if not os.access(CHROMIUM, os.X_OK):
        skip("%s not found (apt-get install chromium)" % CHROMIUM)
    fbtest.main(test, "browser")

// FusionBench dashboard: plain JS, no build step, no external requests.
// Every value from the API goes into the page through textContent, never HTML.
"use strict";

const API = "/api/v1";
const REFRESH_MS = 5000;      // auto-refresh of a view
const LIVE_REFRESH_MS = 1000; // ... while it shows a queued or running job
let refreshTimer = null;
let routeGen = 0;
let liveShown = false; // set by the views: a queued or running job is on screen
let jobsCursor = null;
let kernelChoice = { job: null, variant: null }; // kept across auto-refreshes

// ---- helpers ----

// The API token, when the server asks for one: kept in this tab's
// sessionStorage only (never a cookie, never in a URL), sent as a Bearer header.
const TOKEN_KEY = "fusionbench-token";
function apiToken() { return sessionStorage.getItem(TOKEN_KEY); }

function showSignIn(message) {
  const box = document.getElementById("signin");
  document.getElementById("signin-message").textContent = message;
  box.hidden = false;
  document.getElementById("signin-token").focus();
}

function signIn(ev) {
  ev.preventDefault();
  const field = document.getElementById("signin-token");
  const t = field.value.trim();
  field.value = "";
  if (!t) return;
  sessionStorage.setItem(TOKEN_KEY, t);
  document.getElementById("signin").hidden = true;
  updateSignedIn();
  route();
}

function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  updateSignedIn();
  route();
}

function updateSignedIn() {
  document.getElementById("signout").hidden = !apiToken();
}

// Every call says it is the dashboard: the server refuses a state-changing
// request that carries neither a JSON body nor this header (CSRF).
async function api(path, options) {
  const opts = Object.assign({}, options);
  opts.headers = Object.assign({ "X-FusionBench-Client": "dashboard" }, opts.headers);
  if (apiToken()) opts.headers.Authorization = "Bearer " + apiToken();
  const resp = await fetch(API + path, opts);
  const text = await resp.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch (e) { body = null; }
  if (resp.status === 401) {
    if (apiToken()) sessionStorage.removeItem(TOKEN_KEY);
    updateSignedIn();
    showSignIn(body && body.error ? body.error.message : "this server needs an API token");
  }
  if (!resp.ok) {
    const err = body && body.error ? body.error : { code: String(resp.status), message: text };
    throw new Error(err.message + (err.field ? " (" + err.field + ")" : ""));
  }
  return body;
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : String(c));
  }
  return node;
}

function setStatus(msg, isError) {
  const s = document.getElementById("status");
  s.textContent = msg || "";
  s.className = isError ? "error" : "muted";
}

function fmtMs(v) { return v === null || v === undefined ? "–" : Number(v).toFixed(v < 1 ? 4 : 3); }
function fmtNum(v) { return v === null || v === undefined ? "–" : String(v); }
function fmtExp(v) { return v === null || v === undefined ? "–" : Number(v).toExponential(2); }
function fmtTime(s) { return s ? new Date(s).toLocaleString() : "–"; }

function fmtBytes(v) {
  if (v === null || v === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return v.toFixed(i ? 1 : 0) + " " + units[i];
}

function badge(text) { return el("span", { class: "badge " + text }, text); }

// A speedup with what its 95% interval says (docs/METHOD.md): coloured only when
// the verdict is faster or slower, the interval in the tooltip and, with ci,
// beside it; "unstable" marks a result timed on a noisy machine.
function speedupCell(v, ci, change, unstable) {
  if (v === null || v === undefined) return el("span", { class: "muted" }, "–");
  const cls = change === "faster" ? "faster" : change === "slower" ? "slower"
    : change === "no_difference" ? "same" : (v >= 1 ? "faster" : "slower");
  const range = Array.isArray(ci) ? ci[0].toFixed(2) + "–" + ci[1].toFixed(2) : null;
  const words = { faster: "faster", slower: "slower", no_difference: "no significant difference" };
  const tip = [range ? "95% CI " + range : null, words[change] || null,
    unstable ? "unstable: the timing's CV passed the device's threshold" : null].filter(Boolean).join("; ");
  return el("span", { title: tip },
    el("span", { class: cls }, v.toFixed(2) + "×"),
    range ? el("span", { class: "muted ci" }, " [" + range + "]") : null,
    unstable ? el("span", { class: "badge unstable" }, "unstable") : null);
}

// The comparison's view of one variant: [speedup, ci, change, unstable].
function speedupOf(result, name) {
  const cmp = result && result.comparison;
  if (!cmp || !cmp.speedup || cmp.speedup[name] === undefined) return [null, null, null, false];
  const vs = (result.variants || []).filter((v) => v.unstable);
  return [cmp.speedup[name], (cmp.speedup_ci95 || {})[name], (cmp.change || {})[name],
    vs.some((v) => v.name === name || v.name === cmp.baseline)];
}

// The headline speedup of a job: "fused" if present, else the best non-baseline,
// as speedupOf's [speedup, ci, change, unstable].
function jobSpeedup(job) {
  const cmp = job.result && job.result.comparison;
  if (!cmp || !cmp.speedup) return [null, null, null, false];
  let name = cmp.speedup.fused !== undefined ? "fused" : null;
  for (const [k, x] of Object.entries(cmp.speedup))
    if (!name || (name !== "fused" && x > cmp.speedup[name])) name = k;
  return name ? speedupOf(job.result, name) : [null, null, null, false];
}

function isLive(job) { return job.state === "queued" || job.state === "running"; }

function progressCell(job) {
  const p = job.progress;
  if (!p || job.state !== "running") return "–";
  const frac = p.total ? Math.min(1, p.done / p.total) : 0;
  // Through the CSSOM: the page's Content-Security-Policy blocks style attributes.
  const fill = el("span", {});
  fill.style.width = (frac * 100).toFixed(0) + "%";
  const bar = el("span", { class: "bar" }, fill);
  return el("span", {}, bar, [p.phase, p.variant, p.total ? p.done + "/" + p.total : ""].filter(Boolean).join(" "));
}

function fillTable(id, rows) {
  const table = document.getElementById(id);
  const tbody = table.querySelector("tbody");
  tbody.replaceChildren(...rows);
  const empty = table.parentElement.querySelector(".empty");
  if (empty) empty.hidden = rows.length > 0;
}

// ---- queue ----

function jobRow(job) {
  const spec = job.spec || {};
  return el("tr", { class: "link", onclick: () => { location.hash = "#/jobs/" + job.id; } },
    el("td", { class: "num" }, el("a", { href: "#/jobs/" + job.id }, job.id)),
    el("td", {}, spec.workload || "?"),
    el("td", {}, (spec.engine || "?") + " / " + (spec.device || "?")),
    el("td", {}, badge(job.state), job.cancel_requested && job.state === "running" ? " (canceling)" : ""),
    el("td", {}, progressCell(job)),
    el("td", { class: "num" }, speedupCell(...jobSpeedup(job))),
    el("td", {}, job.worker || "–"),
    el("td", {}, fmtTime(job.created_at)));
}

function jobsQuery(cursor) {
  const q = new URLSearchParams({ limit: "50" });
  const state = document.getElementById("filter-state").value;
  const workload = document.getElementById("filter-workload").value.trim();
  if (state) q.set("state", state);
  if (workload) q.set("workload", workload);
  if (cursor) q.set("cursor", cursor);
  return "/jobs?" + q.toString();
}

// The queue's submit form: a job (one workload of the catalog, any engine) or a
// suite (all, a domain, or one workload) with the catalog's choices.
let queueCatalog = null;

async function fillQueueForm() {
  if (!queueCatalog || !queueCatalog.length) queueCatalog = (await api("/workloads")).items;
  const kind = document.getElementById("qf-kind").value;
  const sel = document.getElementById("qf-workload");
  if (sel.dataset.kind === kind && sel.options.length) return;
  sel.dataset.kind = kind;
  const opts = [];
  if (kind === "suite") {
    opts.push(el("option", { value: "all" }, "all (" + queueCatalog.length + ")"));
    for (const d of [...new Set(queueCatalog.map((w) => w.domain).filter(Boolean))])
      opts.push(el("option", { value: "domain:" + d }, "domain: " + d));
  }
  for (const w of queueCatalog)
    opts.push(el("option", { value: "w:" + w.engine + ":" + w.name }, w.name + " · " + w.engine));
  sel.replaceChildren(...opts);
  document.getElementById("qf-params-l").hidden = kind === "suite";
}

function queueBody(kind) {
  const set = document.getElementById("qf-workload").value;
  const list = (id) => document.getElementById(id).value.split(",").map((x) => x.trim()).filter(Boolean);
  const body = { variants: list("qf-variants"), iterations: Number(document.getElementById("qf-iters").value) || 50 };
  const batches = list("qf-batch").map(Number);
  const [, engine, name] = set.startsWith("w:") ? set.split(":") : [];
  if (kind === "suite") {
    body.name = "dashboard";
    body.workloads = set === "all" ? "all" : set.startsWith("domain:") ? set.slice(7) : [name];
    if (batches.length) body.batch_sizes = batches;
    return body;
  }
  Object.assign(body, { workload: name, engine, labels: { source: "dashboard" } });
  if (batches.length) body.batch_size = batches[0];
  const params = document.getElementById("qf-params").value.trim();
  if (params) body.params = JSON.parse(params);
  return body;
}

async function submitQueueForm(ev) {
  ev.preventDefault();
  const kind = document.getElementById("qf-kind").value;
  const msg = document.getElementById("qf-msg");
  try {
    const r = await api(kind === "suite" ? "/suites" : "/jobs", { method: "POST",
      headers: { "Content-Type": "application/json" }, body: JSON.stringify(queueBody(kind)) });
    msg.textContent = kind + " " + r.id + " queued";
    location.hash = (kind === "suite" ? "#/suites/" : "#/jobs/") + r.id;
  } catch (e) { msg.textContent = "submit failed: " + e.message; }
}

async function loadJobs(append) {
  await fillQueueForm();
  const page = await api(jobsQuery(append ? jobsCursor : null));
  liveShown = page.items.some(isLive) || (append && liveShown);
  const tbody = document.querySelector("#jobs-table tbody");
  const rows = page.items.map(jobRow);
  if (append) tbody.append(...rows); else fillTable("jobs-table", rows);
  jobsCursor = page.next_cursor;
  document.getElementById("more-jobs").hidden = !jobsCursor;
}

// ---- job detail ----

// An environment value: an object (the roofline) as its members, "k v, ...".
function envValue(v) {
  if (v && typeof v === "object")
    return Object.entries(v).map(([k, x]) => k + " " + fmtNum(x)).join(", ") || "–";
  return fmtNum(v);
}

function summaryList(id, pairs) {
  const dl = document.getElementById(id);
  dl.replaceChildren();
  for (const [k, v] of pairs) dl.append(el("dt", {}, k), el("dd", {}, v));
}

function variantRow(v, result) {
  const cmp = result.comparison;
  const lat = v.latency_ms || {};
  const ci = lat.ci95 ? fmtMs(lat.ci95[0]) + " – " + fmtMs(lat.ci95[1]) : "–";
  const [sp, spCi, change] = speedupOf(result, v.name);
  const isBase = cmp && cmp.baseline === v.name;
  return el("tr", {},
    el("td", {}, v.name, isBase ? el("span", { class: "muted" }, " (baseline)") : null),
    el("td", { title: v.message || "" }, badge(v.status || "?"),
      v.unstable ? el("span", { class: "badge unstable", title: "CV " + fmtPctCv(lat.cv) + " passed the device's threshold" }, "unstable") : null),
    el("td", { class: "num" }, fmtMs(lat.median)),
    el("td", { class: "num" }, fmtMs(lat.p90)),
    el("td", { class: "num" }, ci),
    el("td", { class: "num" }, isBase ? "1.00×" : speedupCell(sp, spCi, change, false)),
    el("td", { class: "num" }, fmtNum(v.kernels)),
    el("td", { class: "num" }, fmtNum(v.fused_kernels)),
    el("td", { class: "num" }, fmtNum(v.fused_ops)),
    el("td", { class: "num" }, fmtBytes(v.peak_mem_bytes)),
    el("td", { class: "num" }, fmtExp(v.max_rel_error)));
}

function fmtPctCv(cv) { return typeof cv === "number" ? (cv * 100).toFixed(1) + "%" : "–"; }

// What else ran while the job was timed, and how many rounds it took.
function noisePairs(result) {
  const f = result.interference, r = result.repetition;
  const pairs = [];
  if (r) pairs.push(["rounds", r.rounds + " of " + r.rounds_requested + " asked (" +
    { stable: "stable at once", converged: "settled after more rounds", time_budget: "time budget spent",
      max_rounds: "round limit reached" }[r.stop] + ")"]);
  if (f) {
    pairs.push(["timed for", fmtMs(f.timed_ms) + " ms"]);
    pairs.push(["CPU steal", f.steal_ms === null ? "–" : f.steal_ms.toFixed(1) + " ms"]);
    pairs.push(["involuntary switches", fmtNum(f.involuntary_switches)]);
    pairs.push(["page faults (minor / major)", fmtNum(f.minor_faults) + " / " + fmtNum(f.major_faults)]);
    const g = f.gpu;
    if (g) {
      const range = (r) => (Array.isArray(r) ? r[0].toFixed(0) + "–" + r[1].toFixed(0) + " MHz" : "–");
      pairs.push(["GPU clocks (SM / memory)", range(g.sm_clock_mhz) + " / " + range(g.mem_clock_mhz)]);
      pairs.push(["GPU hottest", g.max_temperature_c === null ? "–" : g.max_temperature_c + " °C"]);
      pairs.push(["GPU throttled by", g.throttle_reasons.length ? g.throttle_reasons.join(", ") : "nothing"]);
    }
  }
  return pairs;
}

// Achieved rates from a row's bytes and FLOPs over its time, and its share
// of the roofline (the sum of its launches' bounds over its time).
function rate(x, ms) {
  if (typeof x !== "number" || typeof ms !== "number" || !(ms > 0)) return "–";
  const r = x / (ms * 1e6);
  return r >= 100 ? r.toFixed(0) : r.toPrecision(3);
}

// A share of the roofline as a table cell. The roof is a stream through
// memory (a triad on a CPU, a copy on a GPU), not a ceiling on every
// kernel: past 100% it is marked and says why (docs/METHOD.md).
const OVER_ROOF = "over 100% of the roofline: the roof is a measured stream through memory (a triad on a CPU, " +
  "a copy on a GPU); a kernel whose data sat in cache, or that mostly reads, moves bytes faster";
function shareCell(share) {
  if (typeof share !== "number" || !isFinite(share)) return el("td", { class: "num" }, "–");
  const over = share > 1;
  return el("td", over ? { class: "num over-roof", title: OVER_ROOF } : { class: "num" },
    (100 * share).toFixed(0) + "%" + (over ? "*" : ""));
}

function roofShare(k) {
  return shareCell(typeof k.roofline_ms === "number" && k.total_ms > 0 ? k.roofline_ms / k.total_ms : null);
}

function kernelRow(k) {
  const dims = (d) => (Array.isArray(d) && d.some((x) => x) ? d.join("×") : "–");
  return el("tr", {},
    el("td", {}, el("code", {}, k.name)),
    el("td", {}, k.category || "–"),
    el("td", {}, k.impl || "–"),
    el("td", { class: "num" }, fmtNum(k.count)),
    el("td", { class: "num" }, fmtMs(k.total_ms)),
    el("td", { class: "num" }, fmtMs(k.mean_ms)),
    el("td", { class: "num" }, rate(k.bytes, k.total_ms)),
    el("td", { class: "num" }, rate(k.flops, k.total_ms)),
    roofShare(k),
    el("td", {}, dims(k.grid)),
    el("td", {}, dims(k.block)),
    el("td", {}, Array.isArray(k.ops) ? k.ops.join(", ") : "–"));
}

async function loadKernels(id, variant) {
  const rows = variant ? (await api("/jobs/" + id + "/kernels?variant=" + encodeURIComponent(variant))).items : [];
  fillTable("kernels-table", rows.map(kernelRow));
}

function jobActions(job) {
  const box = document.getElementById("job-actions");
  box.replaceChildren();
  if (job.state !== "queued" && job.state !== "running") return;
  box.append(el("button", { class: "danger", type: "button", onclick: async () => {
    try { await api("/jobs/" + job.id + "/cancel", { method: "POST" }); await showJob(job.id); }
    catch (e) { setStatus(e.message, true); }
  } }, "Cancel job"));
}

async function showJob(id) {
  const job = await api("/jobs/" + encodeURIComponent(id));
  liveShown = isLive(job);
  const spec = job.spec || {};
  const result = job.result || {};
  document.getElementById("job-title").textContent = "Job " + job.id + " · " + (spec.workload || "?");
  jobActions(job);
  summaryList("job-summary", [
    ["state", badge(job.state)], ["engine / device", (spec.engine || "?") + " / " + (spec.device || "?")],
    ["dtype, batch", (spec.dtype || "?") + ", " + fmtNum(spec.batch_size)],
    ["attempt", job.attempt + " of " + job.max_attempts], ["worker", job.worker || "–"],
    ["progress", progressCell(job)], ["created", fmtTime(job.created_at)],
    ["started", fmtTime(job.started_at)], ["finished", fmtTime(job.finished_at)]]);
  const errBox = document.getElementById("job-error");
  errBox.hidden = !job.error;
  errBox.textContent = job.error ? (job.error.code || "error") + ": " + (job.error.message || "") : "";
  const variants = result.variants || [];
  fillTable("variants-table", variants.map((v) => variantRow(v, result)));
  summaryList("job-noise", noisePairs(result));
  document.getElementById("variants-empty").hidden = variants.length > 0;
  summaryList("job-env", Object.entries(result.env || {}).map(([k, v]) => [k, envValue(v)]));
  document.getElementById("job-spec").textContent = JSON.stringify(spec, null, 2);
  const names = variants.map((v) => v.name);
  if (kernelChoice.job !== job.id || !names.includes(kernelChoice.variant))
    kernelChoice = { job: job.id, variant: names.length ? names[names.length - 1] : null };
  const sel = document.getElementById("kernel-variant");
  sel.replaceChildren(...names.map((n) => el("option", {}, n)));
  if (kernelChoice.variant) sel.value = kernelChoice.variant;
  sel.onchange = () => {
    kernelChoice.variant = sel.value;
    loadKernels(job.id, sel.value).catch((e) => setStatus(e.message, true));
  };
  await loadKernels(job.id, kernelChoice.variant);
  if (window.fbJobGraph) window.fbJobGraph(job); // the model graph (graph.js)
  if (window.fbJobExplain) await window.fbJobExplain(job); // why each fusion won or lost (explain.js)
  if (window.fbJobExtras) await window.fbJobExtras(job); // charts (dash.js)
}

// ---- workers and catalog ----

// A drain asked through the API shows before the worker reads it back.
function workerState(w) {
  const cell = el("td", {}, badge(w.state || "?"));
  if (w.draining && w.state !== "draining" && w.state !== "stopped") cell.append(" ", badge("draining"));
  return cell;
}

async function drainWorker(w) {
  if (!confirm("Drain " + w.id + "? It finishes its running job, claims no more and exits.")) return;
  try {
    await api("/workers/" + encodeURIComponent(w.id) + "/drain", { method: "POST" });
    await loadWorkers();
  } catch (e) { setStatus("drain failed: " + e.message, true); }
}

async function loadWorkers() {
  const page = await api("/workers");
  fillTable("workers-table", page.items.map((w) => {
    const d = w.device || {};
    const live = w.state === "idle" || w.state === "busy";
    return el("tr", {},
      el("td", {}, w.id), el("td", {}, w.host || "–"),
      el("td", {}, (d.kind || "?") + ": " + (d.name || "?")),
      el("td", { class: "num" }, fmtBytes(d.memory_bytes)),
      el("td", {}, (w.engines || []).join(", ")), workerState(w),
      el("td", {}, w.current_job ? el("a", { href: "#/jobs/" + w.current_job }, w.current_job) : "–"),
      el("td", {}, fmtTime(w.last_heartbeat)),
      el("td", {}, live && !w.draining
        ? el("button", { type: "button", onclick: () => drainWorker(w) }, "Drain") : ""));
  }));
}

async function submitJob(w) {
  try {
    const job = await api("/jobs", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ workload: w.name, engine: w.engine, labels: { source: "dashboard" } }) });
    location.hash = "#/jobs/" + job.id;
  } catch (e) { setStatus("submit failed: " + e.message, true); }
}

// The params every entry of an engine lists are the engine's: shown once
// below the table; each row shows its own.  An entry without "params" takes
// any key (its engine does not declare them).
function engineParams(items) {
  const common = {};
  for (const w of items) {
    if (!Array.isArray(w.params)) continue;
    const mine = new Set(w.params);
    common[w.engine] = common[w.engine] ? common[w.engine].filter((p) => mine.has(p)) : [...w.params];
  }
  return common;
}

async function loadCatalog() {
  const page = await api("/workloads");
  const common = engineParams(page.items);
  const note = document.getElementById("catalog-engine-params");
  note.replaceChildren(...Object.keys(common).sort().flatMap((e) => [
    "Every ", el("code", {}, e), " workload also takes ",
    ...common[e].flatMap((p, i) => [i ? ", " : "", el("code", {}, p)]), ". "]),
    "A param a workload does not list is refused at submit; where it lists none, any is passed to its engine.");
  const own = (w) => !Array.isArray(w.params) ? el("span", { class: "muted" }, "any")
    : w.params.filter((p) => !common[w.engine].includes(p)).join(", ") || "–";
  fillTable("catalog-table", page.items.map((w) => el("tr", {},
    el("td", {}, el("code", {}, w.name)), el("td", {}, w.engine), el("td", {}, w.domain || "–"),
    el("td", {}, (w.devices || []).join(", ")),
    el("td", {}, (w.alive_devices || []).length ? w.alive_devices.join(", ")
      : el("span", { class: "muted", title: "jobs wait in the queue until a worker for it starts" }, "none now")),
    el("td", {}, (w.dtypes || []).join(", ")),
    el("td", {}, (w.variants || []).join(", ")), el("td", { class: "num" }, fmtNum(w.default_batch_size)),
    el("td", {}, w.description || ""), el("td", {}, own(w)),
    el("td", {}, el("button", { type: "button", onclick: () => submitJob(w) }, "Submit")))));
}

// ---- routing ----

function showView(name) {
  for (const v of document.querySelectorAll(".view")) v.hidden = v.id !== "view-" + name;
  const nav = name === "job" ? "jobs" : name === "suite" ? "suites" : name;
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.view === nav);
}

async function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/");
  let load;
  const extra = window.fbViews || {}; // views added by dash.js (overview, history, suites)
  if (extra[parts[0] || ""]) { showView(extra[parts[0] || ""].view); load = () => extra[parts[0] || ""].load(parts); }
  else if (parts[0] === "jobs" && parts[1]) { showView("job"); load = () => showJob(parts[1]); }
  else if (parts[0] === "workers") { showView("workers"); load = loadWorkers; }
  else if (parts[0] === "catalog") { showView("catalog"); load = loadCatalog; }
  else { showView("jobs"); load = () => loadJobs(false); }
  clearTimeout(refreshTimer);
  liveShown = false;
  const gen = ++routeGen; // a later route() ends this one's refreshes
  const tick = async () => {
    try { await load(); setStatus("updated " + new Date().toLocaleTimeString()); }
    catch (e) { setStatus(e.message, true); }
  };
  // Each refresh schedules the next: every second while a live job is shown,
  // so its progress moves, else every REFRESH_MS.
  const schedule = () => {
    if (gen !== routeGen) return;
    refreshTimer = setTimeout(async () => {
      if (!document.hidden && document.getElementById("auto-refresh").checked) await tick();
      schedule();
    }, liveShown ? LIVE_REFRESH_MS : REFRESH_MS);
  };
  await tick();
  schedule();
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("refresh-jobs").addEventListener("click", () => route());
  document.getElementById("filter-state").addEventListener("change", () => route());
  document.getElementById("filter-workload").addEventListener("change", () => route());
  document.getElementById("more-jobs").addEventListener("click", () =>
    loadJobs(true).catch((e) => setStatus(e.message, true)));
  document.getElementById("queue-form").addEventListener("submit", submitQueueForm);
  document.getElementById("qf-kind").addEventListener("change", () =>
    fillQueueForm().catch((e) => setStatus(e.message, true)));
  document.getElementById("signin-form").addEventListener("submit", signIn);
  document.getElementById("signout").addEventListener("click", signOut);
  updateSignedIn();
  window.addEventListener("hashchange", route);
  route();
});

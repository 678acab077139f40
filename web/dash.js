// FusionBench dashboard views on top of app.js: overview, suites, history, and
// the charts of a job page.  Chart.js comes from Debian's libjs-chart.js through
// /static/vendor/chart.min.js; without it the tables still show every number.
// Every figure links to the job it came from.
"use strict";

const COLORS = { eager: "#8a94a6", fused: "#2f6fdb", bad: "#c62828", ok: "#1a7f37" };
const CATS = ["gemm", "elementwise", "reduction", "attention", "copy", "other"];
const CAT_COLORS = { gemm: "#2f6fdb", elementwise: "#e69f00", reduction: "#009e73",
  attention: "#cc79a7", copy: "#999999", other: "#56b4e9" };
// docs/DESIGN.md's fusion taxonomy, for the pattern suite; models fall back to their domain.
const KIND = {
  gemm_bias_relu: "tensor + element", gemm_bias_gelu: "tensor + element", conv_bn_relu: "tensor + element",
  mlp: "tensor + element + tensor", conv_relu_conv: "tensor + element + tensor",
  attention: "tensor + element + tensor", elementwise_chain: "element chain",
  softmax: "element + reduction", layernorm: "element + reduction", add_layernorm: "element + reduction",
};
const charts = {};
let catalogCache = null;

function hasChart() { return typeof window.Chart === "function"; }

// Draws (or redraws) a chart on canvas id; returns null without Chart.js.
function drawChart(id, config) {
  if (!hasChart()) return null;
  if (charts[id]) charts[id].destroy();
  const canvas = document.getElementById(id);
  if (!canvas) return null;
  config.options = Object.assign({ responsive: true, maintainAspectRatio: false, animation: false }, config.options || {});
  charts[id] = new window.Chart(canvas, config);
  return charts[id];
}

function jobLink(id, text) { return el("a", { href: "#/jobs/" + id }, text === undefined ? String(id) : text); }
function numCell(v, fmt, jobId) {
  const text = v === null || v === undefined ? "–" : fmt(v);
  return el("td", { class: "num" }, jobId && text !== "–" ? jobLink(jobId, text) : text);
}
function fmtX(v) { return Number(v).toFixed(2) + "×"; }

// A suite's geomean with its interval and how many members were unstable.
function fmtGeomean(v) {
  if (!v || !v.geomean_speedup) return "–";
  let text = fmtX(v.geomean_speedup);
  if (Array.isArray(v.geomean_ci95)) text += " [" + v.geomean_ci95[0].toFixed(2) + "–" + v.geomean_ci95[1].toFixed(2) + "]";
  if (v.unstable) text += " · " + v.unstable + " unstable";
  return text;
}
function fmtPct(v) { return (v >= 0 ? "+" : "") + (v * 100).toFixed(1) + "%"; }
function kpi(label, value, href) {
  const v = el("span", { class: "v" }, value);
  return el("div", { class: "kpi" }, href ? el("a", { href }, v) : v, el("span", { class: "k" }, label));
}
function variantOf(row, name) { return (row.variants || {})[name] || {}; }
// the fused variant of a row: the native engine's "fused", the inductor
// engine's "inductor" (its compiled rung)
function fusedOf(row) { return (row.variants || {}).fused || variantOf(row, "inductor"); }

// ---- overview: the latest suite per device ----

async function latestSuites() {
  const page = await api("/suites?limit=100");
  const byDevice = new Map();
  for (const s of page.items) {
    const dev = s.device_name || s.device || "unknown";
    if (!byDevice.has(dev) && (s.states.succeeded || 0) > 0) byDevice.set(dev, s);
  }
  return byDevice;
}

// A significant slowdown: the verdict "slower" (or, for a result without a
// verdict, a speedup under 1); a speedup under 1 whose interval holds 1 is
// no difference, counted and coloured as such.
function isSlower(f) {
  return f.change === "slower" || (!f.change && f.speedup !== null && f.speedup !== undefined &&
    f.speedup < 1);
}

// Bars by verdict (docs/METHOD.md): faster blue, slower red, no significant
// difference grey; the tooltip gives the 95% interval and says unstable.
function speedupChart(rows) {
  const fs = rows.map((r) => fusedOf(r));
  const sp = fs.map((f) => f.speedup);
  const colour = (f) => f.change === "no_difference" ? COLORS.eager
    : isSlower(f) ? COLORS.bad : COLORS.fused;
  const tip = (i) => {
    const f = fs[i], e = variantOf(rows[i], "eager"), ci = f.speedup_ci95;
    return fmtX(sp[i]) + (Array.isArray(ci) ? " [" + ci[0].toFixed(2) + "–" + ci[1].toFixed(2) + "]" : "") +
      ({ faster: ", faster", slower: ", slower", no_difference: ", no significant difference" }[f.change] || "") +
      (f.unstable || e.unstable ? ", unstable" : "") + " (job " + rows[i].job_id + ")";
  };
  drawChart("chart-speedup", {
    type: "bar",
    data: { labels: rows.map((r) => r.workload), datasets: [{ label: "speedup", data: sp,
      backgroundColor: fs.map(colour) }] },
    options: { indexAxis: "y", plugins: { legend: { display: false },
      tooltip: { callbacks: { label: (c) => tip(c.dataIndex) } } },
      scales: { x: { type: "logarithmic", title: { display: true, text: "speedup (log scale)" } } },
      onClick: (e, els) => { if (els.length) location.hash = "#/jobs/" + rows[els[0].index].job_id; } },
  });
}

function kernelsChart(rows) {
  drawChart("chart-kernels", {
    type: "bar",
    data: { labels: rows.map((r) => r.workload), datasets: [
      { label: "eager", data: rows.map((r) => variantOf(r, "eager").kernels), backgroundColor: COLORS.eager },
      { label: "fused", data: rows.map((r) => fusedOf(r).kernels), backgroundColor: COLORS.fused }] },
    options: { indexAxis: "y", onClick: (e, els) => { if (els.length) location.hash = "#/jobs/" + rows[els[0].index].job_id; } },
  });
}

function groupsChart(rows) {
  const kinds = new Map();
  const add = (k, groups, ops) => {
    const acc = kinds.get(k) || { groups: 0, ops: 0 };
    acc.groups += groups;
    acc.ops += ops;
    kinds.set(k, acc);
  };
  for (const r of rows) {
    const f = fusedOf(r);
    // The planner's own groups with their kinds when the engine reports them.
    if (Array.isArray(f.fusion_groups) && f.fusion_groups.length)
      for (const g of f.fusion_groups) add(g.kind.replace(/\+/g, " + ").replace("_", " "), g.count, g.count * (g.ops || []).length);
    else add(KIND[r.workload] || "model", f.fused_kernels || 0, f.fused_ops || 0);
  }
  const labels = [...kinds.keys()];
  drawChart("chart-groups", {
    type: "bar",
    data: { labels, datasets: [
      { label: "fusion groups (kernels with 2+ ops)", data: labels.map((k) => kinds.get(k).groups), backgroundColor: COLORS.fused },
      { label: "ops inside them", data: labels.map((k) => kinds.get(k).ops), backgroundColor: "#9bbcf0" }] },
  });
}

function memoryChart(rows) {
  const m = rows.map((r) => fusedOf(r).memory_ratio);
  drawChart("chart-memory", {
    type: "bar",
    data: { labels: rows.map((r) => r.workload), datasets: [{ label: "memory ratio", data: m,
      backgroundColor: m.map((v) => (v !== null && v > 1 ? COLORS.bad : COLORS.ok)) }] },
    options: { indexAxis: "y", plugins: { legend: { display: false } },
      onClick: (e, els) => { if (els.length) location.hash = "#/jobs/" + rows[els[0].index].job_id; } },
  });
}

function overviewRow(r) {
  const e = variantOf(r, "eager"), f = fusedOf(r);
  const sp = f.speedup;
  return el("tr", {},
    el("td", {}, jobLink(r.job_id, r.workload)), el("td", {}, KIND[r.workload] || "model"),
    el("td", { class: "num" }, fmtNum(r.batch_size)),
    numCell(e.median_ms, fmtMs, r.job_id), numCell(f.median_ms, fmtMs, r.job_id),
    el("td", { class: "num" }, sp === null || sp === undefined ? "–" : jobLink(r.job_id, speedupCell(sp, f.speedup_ci95, f.change, e.unstable || f.unstable))),
    el("td", { class: "num" }, jobLink(r.job_id, fmtNum(e.kernels) + " → " + fmtNum(f.kernels))),
    numCell(f.fused_kernels, fmtNum, r.job_id), numCell(f.memory_ratio, (v) => v.toFixed(2), r.job_id),
    el("td", {}, jobLink(r.job_id, "#" + r.job_id)));
}

async function loadOverview() {
  const byDevice = await latestSuites();
  const sel = document.getElementById("ov-device");
  const keep = sel.value;
  sel.replaceChildren(...[...byDevice.keys()].map((d) => el("option", {}, d)));
  if (keep && byDevice.has(keep)) sel.value = keep;
  sel.onchange = () => loadOverview().catch((e) => setStatus(e.message, true));
  document.getElementById("ov-empty").hidden = byDevice.size > 0;
  if (!byDevice.size) return;
  const s = byDevice.get(sel.value) || byDevice.values().next().value;
  const suite = await api("/suites/" + s.id);
  const rows = suite.rows.filter((r) => r.state === "succeeded");
  document.getElementById("ov-suite").replaceChildren("latest suite: ",
    el("a", { href: "#/suites/" + suite.id }, "#" + suite.id + " " + (suite.name || "")), " · " + fmtTime(suite.created_at));
  const vs = suite.summary.variants || {}, fused = vs.fused || vs.inductor || {};
  document.getElementById("ov-cards").replaceChildren(
    kpi("geometric mean speedup (fused), 95% CI", fmtGeomean(fused), "#/suites/" + suite.id),
    kpi("pass rate", fused.pass_rate !== null && fused.pass_rate !== undefined ? (fused.pass_rate * 100).toFixed(0) + "% (" + fused.passed + "/" + fused.total + ")" : "–", "#/suites/" + suite.id),
    kpi("slowdowns (significant)", String(rows.filter((r) => isSlower(fusedOf(r))).length), "#/suites/" + suite.id),
    kpi("jobs done", suite.progress.done + " / " + suite.progress.total, "#/suites/" + suite.id));
  speedupChart(rows);
  kernelsChart(rows);
  groupsChart(rows);
  memoryChart(rows);
  fillTable("ov-table", rows.map(overviewRow));
}

// ---- suites ----

function progressBar(frac, text) {
  const inner = el("span", {});
  inner.style.width = (Math.min(1, frac) * 100).toFixed(0) + "%";
  return el("span", {}, el("span", { class: "bar" }, inner), text);
}

async function loadSuites() {
  const page = await api("/suites?limit=50");
  fillTable("suites-table", page.items.map((s) => {
    const done = (s.states.succeeded || 0) + (s.states.failed || 0) + (s.states.canceled || 0);
    return el("tr", { class: "link", onclick: () => { location.hash = "#/suites/" + s.id; } },
      el("td", { class: "num" }, el("a", { href: "#/suites/" + s.id }, s.id)), el("td", {}, s.name || "–"),
      el("td", {}, s.device_name || s.device || "–"),
      el("td", {}, progressBar(s.jobs ? done / s.jobs : 0, done + "/" + s.jobs + (s.states.failed ? " · " + s.states.failed + " failed" : ""))),
      el("td", { class: "num" }, s.jobs), el("td", {}, fmtTime(s.created_at)));
  }));
  await fillSuiteForm();
}

async function catalog() {
  if (!catalogCache) catalogCache = (await api("/workloads")).items;
  return catalogCache;
}

async function fillSuiteForm() {
  const sel = document.getElementById("sf-set");
  if (sel.options.length) return;
  const items = await catalog();
  const domains = [...new Set(items.map((w) => w.domain).filter(Boolean))];
  sel.append(el("option", { value: "all" }, "all (" + items.length + ")"));
  for (const d of domains) sel.append(el("option", { value: "domain:" + d }, "domain: " + d));
  for (const w of items) sel.append(el("option", { value: "w:" + w.name }, w.name));
}

async function submitSuite(ev) {
  ev.preventDefault();
  const msg = document.getElementById("sf-msg");
  const set = document.getElementById("sf-set").value;
  const body = { name: document.getElementById("sf-name").value.trim() || "dashboard",
    variants: document.getElementById("sf-variants").value.split(",").map((s) => s.trim()).filter(Boolean),
    iterations: Number(document.getElementById("sf-iters").value) || 50 };
  body.workloads = set === "all" ? "all" : set.startsWith("domain:") ? set.slice(7) : [set.slice(2)];
  const bs = document.getElementById("sf-batches").value.split(",").map((s) => s.trim()).filter(Boolean);
  if (bs.length) body.batch_sizes = bs.map(Number);
  try {
    const s = await api("/suites", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    msg.textContent = "suite " + s.id + " queued";
    location.hash = "#/suites/" + s.id;
  } catch (e) { msg.textContent = "submit failed: " + e.message; }
}

function suiteRow(r) {
  const e = variantOf(r, "eager"), f = fusedOf(r);
  const p = r.progress;
  let prog = "–";
  if (r.state === "running" && p) prog = progressBar(p.total ? p.done / p.total : 0, [p.phase, p.variant, p.total ? p.done + "/" + p.total : ""].filter(Boolean).join(" "));
  return el("tr", {},
    el("td", { class: "num" }, jobLink(r.job_id)), el("td", {}, r.workload), el("td", { class: "num" }, fmtNum(r.batch_size)),
    el("td", { title: r.error ? r.error.message : "" }, badge(r.state)), el("td", {}, prog),
    numCell(e.median_ms, fmtMs, r.job_id), numCell(f.median_ms, fmtMs, r.job_id),
    el("td", { class: "num" }, f.speedup ? jobLink(r.job_id, speedupCell(f.speedup, f.speedup_ci95, f.change, e.unstable || f.unstable)) : "–"),
    numCell(f.kernel_ratio, (v) => v.toFixed(2), r.job_id), numCell(f.memory_ratio, (v) => v.toFixed(2), r.job_id));
}

async function showCompare(a, b) {
  const c = await api("/compare?a=suite:" + a + "&b=suite:" + b);
  document.getElementById("compare-box").hidden = false;
  document.getElementById("compare-title").textContent = "Suite " + a + " → suite " + b + ": " +
    c.summary.regressions + " regressions, " + c.summary.improvements + " improvements";
  fillTable("compare-table", c.rows.map((r) => el("tr", {},
    el("td", {}, r.workload), el("td", {}, r.variant),
    numCell(r.a.median_ms, fmtMs, r.a.job_id), numCell(r.b.median_ms, fmtMs, r.b.job_id),
    el("td", { class: "num" }, r.change === null ? "–" : fmtPct(r.change)),
    el("td", { class: "num" }, r.p === null ? "–" : r.p.toExponential(1)),
    el("td", { class: r.flag ? "flag-" + r.flag : "muted" }, r.flag || "–"))));
}

async function showSuite(parts) {
  const id = parts[1];
  const s = await api("/suites/" + encodeURIComponent(id));
  document.getElementById("suite-title").textContent = "Suite " + s.id + (s.name ? " · " + s.name : "");
  const vs = s.summary.variants || {};
  const cards = [kpi("progress", s.progress.done + " / " + s.progress.total)];
  for (const [name, v] of Object.entries(vs)) {
    cards.push(kpi("geomean speedup, " + name + ", 95% CI", fmtGeomean(v)));
    cards.push(kpi("verdicts, " + name, (v.faster || 0) + " faster · " + (v.slower || 0) + " slower · " + (v.no_difference || 0) + " same"));
    cards.push(kpi("pass rate, " + name, v.total ? (v.pass_rate * 100).toFixed(0) + "% (" + v.passed + "/" + v.total + ")" : "–"));
  }
  const nJobs = (n) => n + (n === 1 ? " job" : " jobs");
  const ex = s.summary.explain;
  if (ex && ex.jobs) {
    cards.push(kpi("fusion groups explained (" + nJobs(ex.jobs) + ")", ex.won + " won · " + ex.lost + " lost · " + ex.within_noise + " within noise"));
    cards.push(kpi("fused kernels on the roofline", typeof ex.fused_roofline_share === "number" ? (100 * ex.fused_roofline_share).toFixed(0) + "%" : "–"));
  }
  const ind = ex ? ex.inductor : null;
  if (ind) {
    cards.push(kpi("Inductor's fusions explained (" + nJobs(ind.jobs) + ")", ind.won + " won · " + ind.lost + " lost · " + ind.no_difference + " no difference"));
    const cm = ind.cost_model || {};
    cards.push(kpi("Inductor's cost model vs measured", typeof cm.spearman === "number" ? "rank correlation " + cm.spearman.toFixed(2) + " over " + cm.points + " fusions"
      : typeof cm.spearman_units === "number" ? "rank correlation " + cm.spearman_units.toFixed(2) + " over " + cm.units + " units (chunks within the noise among them)"
        : "too few fusions measured alone"));
    cards.push(kpi("Inductor's fused kernels on the roofline", typeof ind.fused_roofline_share === "number" ? (100 * ind.fused_roofline_share).toFixed(0) + "%" : "–"));
    // the compile's choices beside fusion, each switched off alone (saved_ms < 0: it cost time)
    for (const [knob, b] of Object.entries(ind.beside || {}))
      cards.push(kpi("beside fusion: " + knob.replace(/_/g, " ") + " (" + nJobs(b.measured) + ")",
        (b.lost ? "costs time in " + b.lost + ": " + (b.workloads || []).join(", ") : "costs time in none") +
        " · " + (b.saved_ms >= 0 ? "saves " : "costs ") + Math.abs(b.saved_ms).toFixed(3) + " ms in all"));
  }
  document.getElementById("suite-cards").replaceChildren(...cards);
  const reasons = ex ? Object.entries(ex.lost_by_reason || {}).sort((a, b) => a[1].lost_ms - b[1].lost_ms) : [];
  const rows = reasons.map(([code, r]) => el("tr", {},
    el("td", {}, code), el("td", { class: "num" }, String(r.groups)), el("td", { class: "num" }, (-r.lost_ms).toFixed(3)),
    el("td", {}, (r.workloads || []).join(", "))));
  document.getElementById("suite-explain").hidden = !ex || !ex.jobs;
  fillTable("suite-reasons", rows.length ? rows : [el("tr", {}, el("td", { colspan: 4, class: "muted" }, "No group lost."))]);
  document.getElementById("suite-inductor").hidden = !ind;
  if (ind) {
    const ir = Object.entries(ind.lost_by_reason || {}).sort((a, b) => a[1].lost_ms - b[1].lost_ms).map(([code, r]) => el("tr", {},
      el("td", {}, code), el("td", { class: "num" }, String(r.fusions)), el("td", { class: "num" }, (-r.lost_ms).toFixed(3)),
      el("td", {}, (r.workloads || []).join(", "))));
    fillTable("suite-ind-reasons", ir.length ? ir : [el("tr", {}, el("td", { colspan: 4, class: "muted" }, "No fusion lost."))]);
    const mr = (ind.missed_top || []).map((m) => el("tr", {}, el("td", {}, m.workload || ""),
      el("td", {}, (m.nodes || []).join(" + ")), el("td", { class: "num" }, String(m.shared_bytes)), el("td", {}, m.reason)));
    fillTable("suite-ind-missed", mr.length ? mr : [el("tr", {}, el("td", { colspan: 4, class: "muted" }, "No refused merge shared bytes."))]);
  }
  document.getElementById("suite-csv").href = API + "/suites/" + s.id + "?format=csv";
  document.getElementById("suite-json").href = API + "/suites/" + s.id;
  fillTable("suite-table", s.rows.map(suiteRow));
  document.getElementById("suite-cmp-go").onclick = () => {
    const b = document.getElementById("suite-cmp").value.trim();
    if (b) showCompare(b, s.id).catch((e) => setStatus(e.message, true));
  };
}

// ---- history ----

function historyQuery(format) {
  const q = new URLSearchParams({ points: document.getElementById("hi-points").value || "30", limit: "24" });
  const w = document.getElementById("hi-workload").value;
  const v = document.getElementById("hi-variant").value.trim();
  if (w) q.set("workload", w);
  if (v) q.set("variant", v);
  if (format) q.set("format", format);
  return "/results?" + q.toString();
}

function historyCard(s, i) {
  const pts = s.series;
  const flagged = pts.filter((p) => p.flag);
  const id = "hist-" + i;
  const last = s.latest || {};
  const title = el("h3", {}, s.workload + " · " + s.variant + " · batch " + s.batch_size,
    el("span", { class: "muted small" }, s.device_name + " · " + s.dtype));
  const info = el("p", { class: "muted" }, "latest ", last.job_id ? jobLink(last.job_id, fmtMs(last.median_ms) + " ms") : "–",
    s.regression && s.regression.flag ? el("span", { class: "flag-" + s.regression.flag }, " · " + s.regression.flag + " " + fmtPct(s.regression.change)) : "",
    flagged.length ? " · flagged: " : "", ...flagged.map((p) => el("span", { class: "flag-" + p.flag }, jobLink(p.job_id, "#" + p.job_id + " " + fmtPct(p.change)), " ")));
  const card = el("div", { class: "card" }, title, el("div", { class: "chart" }, el("canvas", { id })), info);
  return { card, draw: () => drawChart(id, {
    type: "line",
    data: { labels: pts.map((p) => "#" + p.job_id), datasets: [
      { label: "95% CI high", data: pts.map((p) => p.ci95[1]), borderWidth: 0, pointRadius: 0, fill: "+1", backgroundColor: "rgba(47,111,219,0.15)" },
      { label: "95% CI low", data: pts.map((p) => p.ci95[0]), borderWidth: 0, pointRadius: 0, fill: false },
      { label: "median ms", data: pts.map((p) => p.median_ms), borderColor: COLORS.fused, fill: false,
        pointRadius: pts.map((p) => (p.flag ? 6 : 2)),
        pointBackgroundColor: pts.map((p) => (p.flag === "regression" ? COLORS.bad : p.flag === "improvement" ? COLORS.ok : COLORS.fused)) }] },
    options: { plugins: { legend: { display: false } }, scales: { y: { title: { display: true, text: "ms" } } },
      onClick: (e, els) => { if (els.length) location.hash = "#/jobs/" + pts[els[0].index].job_id; } },
  }) };
}

async function loadHistory() {
  const sel = document.getElementById("hi-workload");
  if (sel.options.length <= 1) for (const w of await catalog()) sel.append(el("option", {}, w.name));
  document.getElementById("hi-csv").href = API + historyQuery("csv");
  const page = await api(historyQuery());
  const box = document.getElementById("hi-charts");
  const cards = page.items.filter((s) => s.series.length).map(historyCard);
  box.replaceChildren(...cards.map((c) => c.card));
  cards.forEach((c) => c.draw());
  document.getElementById("hi-empty").hidden = cards.length > 0;
}

// ---- job page extras ----

function histogram(samples, lo, hi, bins) {
  const counts = new Array(bins).fill(0);
  const w = (hi - lo) / bins || 1;
  for (const x of samples) counts[Math.min(bins - 1, Math.max(0, Math.floor((x - lo) / w)))]++;
  return counts;
}

function latencyChart(variants) {
  const all = variants.flatMap((v) => v.samples_ms || []);
  if (!all.length) return;
  const lo = Math.min(...all), hi = Math.max(...all), bins = 30;
  const w = (hi - lo) / bins || 1;
  drawChart("chart-latency", {
    type: "bar",
    data: { labels: Array.from({ length: bins }, (_, i) => fmtMs(lo + (i + 0.5) * w)),
      datasets: variants.map((v) => ({ label: v.name + " (median " + fmtMs(v.latency_ms.median) + " ms)",
        data: histogram(v.samples_ms || [], lo, hi, bins), backgroundColor: (COLORS[v.name] || "#56b4e9") + "cc" })) },
    options: { scales: { x: { title: { display: true, text: "iteration time, ms" } }, y: { title: { display: true, text: "iterations" } } } },
  });
}

function categoryChart(variants) {
  drawChart("chart-categories", {
    type: "bar",
    data: { labels: variants.map((v) => v.name), datasets: CATS.map((c) => ({ label: c, backgroundColor: CAT_COLORS[c],
      data: variants.map((v) => (v.categories_ms || {})[c] || 0) })) },
    options: { indexAxis: "y", scales: { x: { stacked: true, title: { display: true, text: "kernel time, ms" } }, y: { stacked: true } } },
  });
}

async function topKernels(job, variants) {
  const rows = [];
  for (const v of variants) {
    const ks = (await api("/jobs/" + job.id + "/kernels?variant=" + encodeURIComponent(v.name))).items;
    const total = ks.reduce((a, k) => a + (k.total_ms || 0), 0) || 1;
    ks.sort((a, b) => (b.total_ms || 0) - (a.total_ms || 0));
    for (const k of ks.slice(0, 5)) rows.push(el("tr", {}, el("td", {}, v.name), el("td", {}, el("code", {}, k.name)),
      el("td", {}, k.category), el("td", { class: "num" }, fmtMs(k.total_ms)),
      el("td", { class: "num" }, ((k.total_ms || 0) / total * 100).toFixed(0) + "%"),
      el("td", {}, (k.ops || []).length > 1 ? (k.ops || []).join(" + ") : el("span", { class: "muted" }, (k.ops || []).join("")))));
  }
  fillTable("top-kernels", rows);
}

async function timeline(job) {
  const box = document.getElementById("timeline");
  document.getElementById("trace-link").href = API + "/jobs/" + job.id + "/trace";
  let trace;
  try { trace = await api("/jobs/" + job.id + "/trace"); } catch (e) { box.replaceChildren(el("p", { class: "muted" }, "no profiled iteration")); return; }
  const names = {}, lanes = {};
  let end = 0;
  for (const ev of trace.traceEvents) {
    if (ev.ph === "M" && ev.name === "process_name") names[ev.pid] = ev.args.name;
    if (ev.ph === "X") { (lanes[ev.pid] = lanes[ev.pid] || []).push(ev); end = Math.max(end, ev.ts + ev.dur); }
  }
  end = end || 1;
  const out = [];
  for (const pid of Object.keys(lanes)) {
    const lane = el("div", { class: "lane" }, el("span", { class: "lane-name" }, (names[pid] || pid).split(" ")[0]));
    for (const ev of lanes[pid]) {
      const k = el("span", { class: "k cat-" + ev.cat, title: ev.name + " · " + (ev.dur / 1000).toFixed(3) + " ms · " + ((ev.args && ev.args.ops) || []).join(" + ") });
      k.style.left = (ev.ts / end * 100) + "%";
      k.style.width = Math.max(0.2, ev.dur / end * 100) + "%";
      lane.append(k);
    }
    out.push(lane);
  }
  out.push(el("div", { class: "axis" }, el("span", {}, "0 ms"), el("span", {}, (end / 1000).toFixed(2) + " ms")));
  box.replaceChildren(...out);
  document.getElementById("timeline-legend").replaceChildren(...CATS.map((c) => el("span", {}, el("i", { class: "cat-" + c }), c)));
}

window.fbJobExtras = async function (job) {
  const variants = (job.result && job.result.variants) || [];
  document.getElementById("job-charts").hidden = !variants.length;
  if (!variants.length) return;
  latencyChart(variants);
  categoryChart(variants);
  await topKernels(job, variants);
  await timeline(job);
};

window.fbViews = Object.assign(window.fbViews || {}, {
  "": { view: "overview", load: loadOverview },
  overview: { view: "overview", load: loadOverview },
  suites: { view: "suites", load: (parts) => (parts[1] ? showSuiteView(parts) : loadSuites()) },
  history: { view: "history", load: loadHistory },
});

// A suite page is its own view under the Suites tab.
function showSuiteView(parts) {
  for (const v of document.querySelectorAll(".view")) v.hidden = v.id !== "view-suite";
  return showSuite(parts);
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("suite-form").addEventListener("submit", submitSuite);
  document.getElementById("hi-go").addEventListener("click", () => loadHistory().catch((e) => setStatus(e.message, true)));
  if (!hasChart()) setStatus("Chart.js is not installed (apt-get install libjs-chart.js): tables only", true);
});

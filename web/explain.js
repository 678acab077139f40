// The Explain section of a job page (docs/EXPLAIN.md): the waterfall from the
// eager time to the fused time, the fusion groups largest effect first with
// their verdict, reason and counterfactual, and a button that asks for an
// explanation when the job has none.  Clicking a group highlights its nodes in
// the graph view (graph.js).
"use strict";

const VERDICT_CLASS = { won: "ok", lost: "bad", within_noise: "muted" };
let explainShown = null; // the job id and explanation drawn, so refreshes keep it

function msCell(v, digits) {
  return el("td", { class: "num" }, typeof v === "number" ? v.toFixed(digits === undefined ? 3 : digits) : "–");
}

function ciText(ci) {
  return Array.isArray(ci) && typeof ci[0] === "number" ? "[" + ci[0].toFixed(3) + ", " + ci[1].toFixed(3) + "]" : "–";
}

// The waterfall as floating bars: eager, then each bar from where the last
// ended, then fused; Chart.js when it is there, a table of the same numbers always.
function waterfallBars(w) {
  const steps = [["won", w.won_ms], ["lost", w.lost_ms], ["within noise", w.within_noise_ms],
    ["outside groups", w.outside_groups_ms], ["overhead", w.overhead_ms], ["unexplained", w.unexplained_ms]];
  const bars = [["eager", [0, w.eager_ms]]];
  let at = w.eager_ms;
  for (const [name, v] of steps) {
    bars.push([name + " " + (v >= 0 ? "−" : "+") + Math.abs(v).toFixed(3), [at - v, at]]);
    at -= v;
  }
  bars.push(["fused", [0, w.fused_ms]]);
  return bars;
}

function drawWaterfall(w) {
  const bars = waterfallBars(w);
  const color = (name, i) => i === 0 ? COLORS.eager : i === bars.length - 1 ? COLORS.fused :
    name.startsWith("won") ? COLORS.ok : name.startsWith("lost") ? COLORS.bad : "#b0b7c3";
  drawChart("chart-explain", {
    type: "bar",
    data: { labels: bars.map((b) => b[0]),
      datasets: [{ label: "ms", data: bars.map((b) => b[1]), backgroundColor: bars.map((b, i) => color(b[0], i)) }] },
    options: { indexAxis: "y", plugins: { legend: { display: false } },
      scales: { x: { title: { display: true, text: "ms per iteration" } } } },
  });
}

// The fused kernel of each group on this machine's roofline (log-log: FLOPs
// per byte against GFLOP/s achieved), under the roof min(peak, bandwidth x
// intensity) measured by the worker; colored by verdict.
function drawRoofline(ex) {
  const box = document.getElementById("roofline-box");
  const lim = ex.roofline;
  const pts = (ex.groups || []).filter((g) => g.costs && g.costs.fused_bytes > 0 && g.costs.fused_flops > 0 &&
    g.costs.fused_gflops > 0);
  box.hidden = !lim || !pts.length || !hasChart();
  if (box.hidden) return;
  const xs = pts.map((g) => g.costs.fused_flops / g.costs.fused_bytes);
  const lo = Math.min(...xs, lim.gflops / lim.gbps) / 4, hi = Math.max(...xs, lim.gflops / lim.gbps) * 4;
  const roof = [];
  for (let x = lo; x <= hi * 1.0001; x *= Math.pow(hi / lo, 1 / 40)) roof.push({ x: x, y: Math.min(lim.gflops, lim.gbps * x) });
  const byVerdict = (v) => pts.filter((g) => g.verdict === v).map((g) => ({
    x: g.costs.fused_flops / g.costs.fused_bytes, y: g.costs.fused_gflops, id: g.id }));
  drawChart("chart-roofline", {
    type: "scatter",
    data: { datasets: [
      { label: "roofline (" + lim.gbps.toFixed(0) + " GB/s, " + lim.gflops.toFixed(0) + " GFLOP/s)", data: roof,
        showLine: true, pointRadius: 0, borderColor: "#6b7280", borderWidth: 1.5 },
      { label: "won", data: byVerdict("won"), backgroundColor: COLORS.ok },
      { label: "lost", data: byVerdict("lost"), backgroundColor: COLORS.bad },
      { label: "within noise", data: byVerdict("within_noise"), backgroundColor: "#b0b7c3" }] },
    options: {
      scales: { x: { type: "logarithmic", title: { display: true, text: "FLOPs per byte (fused kernel)" } },
        y: { type: "logarithmic", title: { display: true, text: "GFLOP/s achieved" } } },
      plugins: { tooltip: { callbacks: { label: (c) => c.raw.id === undefined ? c.dataset.label :
        "group " + c.raw.id + ": " + c.raw.x.toFixed(2) + " FLOP/B, " + c.raw.y.toFixed(1) + " GFLOP/s" } } },
    },
  });
}

function highlightGroup(nodes) {
  const want = new Set(nodes || []);
  document.querySelectorAll("#graph-box .gnode").forEach((g) => {
    const id = Number(g.dataset.id);
    g.classList.toggle("dim", want.size > 0 && !want.has(id));
    g.classList.toggle("picked", want.has(id));
  });
}

function groupRow(g) {
  const cf = g.counterfactual;
  const costs = g.costs || {};
  const row = el("tr", { class: "clickable", title: "highlight its ops in the graph" },
    el("td", { class: "num" }, String(g.id)),
    el("td", {}, el("span", { class: VERDICT_CLASS[g.verdict] || "" }, g.verdict.replace("_", " "))),
    el("td", {}, (g.ops || []).join(" → ")),
    msCell(g.eager_ms), msCell(g.fused_ms), msCell(g.delta_ms), el("td", {}, ciText(g.delta_ci95)),
    el("td", { class: "num" }, typeof costs.bytes_saved === "number" ? (costs.bytes_saved / 1048576).toFixed(2) : "–"),
    el("td", { class: "num" }, typeof costs.roofline_share === "number" ? (100 * costs.roofline_share).toFixed(0) + "%" : "–"),
    el("td", {}, (g.eager_impl || []).join(", ") + " → " + (g.fused_impl || []).join(", ")),
    el("td", { title: g.reason ? g.reason.text : "" }, g.reason ? g.reason.code : ""),
    el("td", {}, cf ? cf.verdict + " (" + (cf.recovered_ms >= 0 ? "+" : "") + cf.recovered_ms.toFixed(3) + " ms)" : ""));
  row.onclick = () => highlightGroup(g.nodes);
  return row;
}

// The inductor engine's explanation: the ladder's steps, then its fused
// kernels with eager's per-call time of each ATen op type they name.
function renderInductor(ex) {
  document.getElementById("explain-none").hidden = true;
  document.getElementById("explain-body").hidden = false;
  summaryList("explain-summary", [["how", ex.note || ""]].concat((ex.ladder || []).map((st) =>
    [st.from + " → " + st.to, (st.saved_ms >= 0 ? "saves " : "costs ") + Math.abs(st.saved_ms).toFixed(3) +
      " ms, 95% CI " + ciText(st.saved_ci95) + " (" + st.mechanism + ")"])));
  for (const id of ["chart-explain", "chart-roofline"])
    if (charts[id]) { charts[id].destroy(); delete charts[id]; }
  document.getElementById("roofline-box").hidden = true;
  fillTable("explain-table", (ex.kernels || []).map((k, i) => el("tr", {},
    el("td", { class: "num" }, String(i)), el("td", {}, ""),
    el("td", {}, (k.ops || []).map((o) => o.op.replace(/^aten\./, "") + (o.extern ? "*" : "") +
      (typeof o.eager_ms_per_call === "number" ? " (" + o.eager_ms_per_call.toFixed(3) + ")" : "")).join(", ")),
    el("td", { class: "num" }, "–"), msCell(k.mean_ms), el("td", { class: "num" }, "–"), el("td", {}, ""),
    el("td", { class: "num" }, "–"), el("td", { class: "num" }, "–"), el("td", {}, el("code", {}, k.kernel)),
    el("td", {}, ""), el("td", {}, ""))));
}

function renderExplain(ex) {
  if (ex.engine === "inductor") { renderInductor(ex); return; }
  const w = ex.waterfall || {}, s = ex.summary || {};
  document.getElementById("explain-none").hidden = true;
  document.getElementById("explain-body").hidden = false;
  summaryList("explain-summary", [
    ["measured difference", (w.measured_ms || 0).toFixed(3) + " ms, 95% CI " + ciText(w.measured_ci95)],
    ["groups", s.won + " won, " + s.lost + " lost, " + s.within_noise + " within noise"],
    ["lost, by reason", Object.entries(s.lost_by_reason || {}).map(([k, v]) => k + " " + v).join(", ") || "–"],
    ["fused kernels on the roofline", typeof s.fused_roofline_share === "number" ? (100 * s.fused_roofline_share).toFixed(0) + "%" : "–"],
    ["profiled rounds", String(ex.rounds)],
    ["layout noise (counterfactuals)", typeof ex.layout_noise_ms === "number" ? ex.layout_noise_ms.toFixed(3) + " ms" : "–"]]);
  fillTable("explain-table", (ex.groups || []).map(groupRow));
  drawWaterfall(w);
  drawRoofline(ex);
}

function explainNone(job, text, canAsk) {
  document.getElementById("explain-body").hidden = true;
  const box = document.getElementById("explain-none");
  box.hidden = false;
  const ask = el("button", { type: "button", onclick: async () => {
    try {
      const made = await api("/jobs/" + job.id + "/explain", { method: "POST" });
      setStatus("explaining job " + job.id + " as job " + made.id);
      explainShown = null;
      await window.fbJobExplain(job);
    } catch (e) { setStatus(e.message, true); }
  } }, "Explain this job");
  box.replaceChildren(el("span", { class: "muted" }, text + " "), ...(canAsk ? [ask] : []));
}

window.fbJobExplain = async function (job) {
  const own = job.result && job.result.explain;
  if (own && !own.unavailable) {
    if (explainShown !== job.id + ":own") { explainShown = job.id + ":own"; renderExplain(own); }
    return;
  }
  if (job.state !== "succeeded") { explainShown = null; explainNone(job, "An explanation comes with a finished job.", false); return; }
  let ans;
  try {
    ans = await api("/jobs/" + job.id + "/explain");
  } catch (e) {
    const why = own && own.unavailable ? own.unavailable : "Not explained yet: which fusion groups won, which lost, and why.";
    explainNone(job, why, !(own && own.unavailable));
    explainShown = null;
    return;
  }
  if (!ans.explain) {
    explainNone(job, "Being explained by job " + ans.explained_by + " (" + ans.state + ").", false);
    explainShown = null;
    return;
  }
  const key = job.id + ":" + ans.explained_by;
  if (explainShown !== key) { explainShown = key; renderExplain(ans.explain); }
};

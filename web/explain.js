// The Explain section of a job page (docs/EXPLAIN.md): the waterfall from the
// eager time to the fused time, the fusion groups largest effect first with
// their verdict, reason and counterfactual, and a button that asks for an
// explanation when the job has none.  Clicking a group highlights its nodes in
// the graph view (graph.js).
"use strict";

const VERDICT_CLASS = { won: "ok", lost: "bad", within_noise: "muted", no_difference: "muted",
  did_not_take: "muted", not_measured: "muted" };
let explainShown = null; // the job id and explanation drawn, so refreshes keep it

function msCell(v, digits) {
  return el("td", { class: "num" }, typeof v === "number" ? v.toFixed(digits === undefined ? 3 : digits) : "–");
}

function ciText(ci) {
  return Array.isArray(ci) && typeof ci[0] === "number" ? "[" + ci[0].toFixed(3) + ", " + ci[1].toFixed(3) + "]" : "–";
}

// A waterfall as floating bars: the start, then each step's bar from where
// the last ended (a step of v ms takes v off), then the end; Chart.js when it
// is there, a table of the same numbers always.
function stepBars(first, from, steps, last, to) {
  const bars = [[first, [0, from]]];
  let at = from;
  for (const [name, v] of steps) {
    bars.push([name + " " + (v > 0 ? "−" : v < 0 ? "+" : "") + Math.abs(v).toFixed(3), [at - v, at]]);
    at -= v;
  }
  bars.push([last, [0, to]]);
  return bars;
}

function drawBars(bars) {
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

// From the eager time to the fused time: won, lost, within noise, outside
// groups, overhead, unexplained.
function drawWaterfall(w) {
  drawBars(stepBars("eager", w.eager_ms, [["won", w.won_ms], ["lost", w.lost_ms], ["within noise", w.within_noise_ms],
    ["outside groups", w.outside_groups_ms], ["overhead", w.overhead_ms], ["unexplained", w.unexplained_ms]],
  "fused", w.fused_ms));
}

// Fused kernels on this machine's roofline (log-log: FLOPs per byte against
// GFLOP/s achieved), under the roof min(peak, bandwidth x intensity) measured
// by the worker, colored by verdict.  pts: [{flops, bytes, gflops, verdict,
// label}]; what: the x axis's kernel ("fused kernel").
function drawRooflinePoints(lim, pts, what) {
  const box = document.getElementById("roofline-box");
  pts = pts.filter((p) => p.bytes > 0 && p.flops > 0 && p.gflops > 0);
  box.hidden = !lim || !pts.length || !hasChart();
  if (box.hidden) return;
  const xs = pts.map((p) => p.flops / p.bytes);
  const lo = Math.min(...xs, lim.gflops / lim.gbps) / 4, hi = Math.max(...xs, lim.gflops / lim.gbps) * 4;
  const roof = [];
  for (let x = lo; x <= hi * 1.0001; x *= Math.pow(hi / lo, 1 / 40)) roof.push({ x: x, y: Math.min(lim.gflops, lim.gbps * x) });
  const byVerdict = (vs) => pts.filter((p) => vs.includes(p.verdict)).map((p) => ({
    x: p.flops / p.bytes, y: p.gflops, id: p.label }));
  const sets = [{ label: "roofline (" + lim.gbps.toFixed(0) + " GB/s, " + lim.gflops.toFixed(0) + " GFLOP/s)", data: roof,
    showLine: true, pointRadius: 0, borderColor: "#6b7280", borderWidth: 1.5 },
  { label: "won", data: byVerdict(["won"]), backgroundColor: COLORS.ok },
  { label: "lost", data: byVerdict(["lost"]), backgroundColor: COLORS.bad },
  { label: "within noise", data: byVerdict(["within_noise", "no_difference"]), backgroundColor: "#b0b7c3" }];
  const other = byVerdict(["not_measured", "did_not_take"]);
  if (other.length) sets.push({ label: "not measured", data: other, backgroundColor: "rgba(0,0,0,0)", borderColor: "#6b7280" });
  drawChart("chart-roofline", {
    type: "scatter",
    data: { datasets: sets },
    options: {
      scales: { x: { type: "logarithmic", ticks: { callback: logTick }, title: { display: true, text: "FLOPs per byte (" + what + ")" } },
        y: { type: "logarithmic", ticks: { callback: logTick }, title: { display: true, text: "GFLOP/s achieved" } } },
      plugins: { tooltip: { callbacks: { label: (c) => c.raw.id === undefined ? c.dataset.label :
        c.raw.id + ": " + c.raw.x.toFixed(2) + " FLOP/B, " + c.raw.y.toFixed(1) + " GFLOP/s" } } },
    },
  });
}

// A log axis' ticks: 1, 2 and 5 of each power of ten, each as short as it
// reads (Chart.js writes every label with the most decimals any one needs:
// "20.0000" beside "0.0001").
function logTick(v) {
  const m = v / Math.pow(10, Math.floor(Math.log10(v) + 1e-9));
  return [1, 2, 5].some((k) => Math.abs(m - k) < 1e-6) ? String(Number(v.toPrecision(1))) : "";
}

// The native engine: each group's fused kernel.
function drawRoofline(ex) {
  drawRooflinePoints(ex.roofline, (ex.groups || []).filter((g) => g.costs).map((g) => ({
    flops: g.costs.fused_flops, bytes: g.costs.fused_bytes, gflops: g.costs.fused_gflops,
    verdict: g.verdict, label: "group " + g.id })), "fused kernel");
}

// The inductor engine: each kernel holding Inductor's fusion decisions, once,
// colored by its decisions' verdicts (lost where one lost, else won where one
// won); its counts are Inductor's scheduler's (docs/EXPLAIN.md).
const VERDICT_RANK = ["lost", "won", "no_difference", "did_not_take", "not_measured"];
function drawInductorRoofline(ex, fx) {
  const byKernel = new Map();
  for (const e of fx.fusions || []) {
    if (!e.costs || !e.kernel) continue;
    const k = byKernel.get(e.kernel) || { costs: e.costs, ids: [], verdicts: [] };
    k.ids.push(e.id);
    k.verdicts.push(e.verdict);
    byKernel.set(e.kernel, k);
  }
  drawRooflinePoints(ex.roofline, [...byKernel].map(([name, k]) => ({
    flops: k.costs.flops, bytes: k.costs.bytes, gflops: k.costs.gflops,
    verdict: VERDICT_RANK.find((v) => k.verdicts.includes(v)) || "not_measured",
    label: name + " (" + k.ids.join(", ") + ")" })), "Inductor's kernel");
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
    msCell(g.eager_ms), msCell(g.fused_ms), msCell(g.delta_ms), el("td", {}, ciText(g.median_delta_ci95 || g.delta_ci95)),
    el("td", { class: "num" }, typeof costs.bytes_saved === "number" ? (costs.bytes_saved / 1048576).toFixed(2) : "–"),
    shareCell(costs.roofline_share),
    el("td", {}, (g.eager_impl || []).join(", ") + " → " + (g.fused_impl || []).join(", ")),
    el("td", { title: g.reason ? g.reason.text : "" }, g.reason ? g.reason.code : ""),
    el("td", {}, cf ? cf.verdict + " (" + (cf.recovered_ms >= 0 ? "+" : "") + cf.recovered_ms.toFixed(3) + " ms)" : ""));
  row.onclick = () => highlightGroup(g.nodes);
  return row;
}

// The table's columns: the native engine's fusion groups, or Inductor's
// fusion decisions ([title, class, tooltip]).
const NATIVE_HEAD = [["group", "num"], ["verdict"], ["ops"], ["eager ms", "num"], ["fused ms", "num"],
  ["delta ms", "num", "mean per-round eager − fused: the groups' deltas add up to the waterfall"],
  ["verdict's 95% CI", "", "of the median per-round eager − fused: the verdict is won or lost when it lies past 1% of the eager time"], ["saved MiB", "num", "intermediates kept out of memory"],
  ["of roofline", "num", "the fused kernel's roofline bound over its time"], ["code, eager → fused"],
  ["reason"], ["counterfactual"]];
const INDUCTOR_HEAD = [["fusion"], ["verdict"], ["kind"], ["kernel ms", "num", "the fused kernel's time in the profiled iteration"],
  ["saved ms", "num", "median with it undone − median of inductor: > 0, the fusion saved time"], ["95% CI"],
  ["predicted B", "num", "Inductor's own prediction: the bytes the merge shares (score_fusion_memory)"],
  ["of roofline", "num", "its kernel's roofline bound over its time (Inductor's byte and FLOP counts)"],
  ["measured"], ["reason"], ["kernel"]];

function setHead(id, cols) {
  const tr = document.querySelector("#" + id + " thead tr");
  tr.replaceChildren(...cols.map(([t, cls, tip]) => el("th", Object.assign(cls ? { class: cls } : {}, tip ? { title: tip } : {}), t)));
}

function fusionRow(e) {
  return el("tr", {},
    el("td", {}, el("code", {}, e.id)),
    el("td", {}, el("span", { class: VERDICT_CLASS[e.verdict] || "" }, e.verdict.replace(/_/g, " "))),
    el("td", {}, e.kind), msCell(e.kernel_ms, 4), msCell(e.saved_ms, 4), el("td", {}, ciText(e.saved_ci95)),
    el("td", { class: "num" }, typeof e.predicted_shared_bytes === "number" ? String(e.predicted_shared_bytes) : "–"),
    shareCell(e.costs ? e.costs.roofline_share : null),
    el("td", {}, e.measured ? e.measured.replace(/_/g, " ") : "–"),
    el("td", { title: e.why || (e.evidence ? JSON.stringify(e.evidence).slice(0, 600) : "") },
      e.reason || (e.interaction ? "interaction: " + (e.interaction === "cause" ? "a cause" : "kept together") : "") ||
        (e.peak_interaction ? "holds the extra peak: " + (e.peak_interaction === "cause" ? "a cause" : "kept together") : "")),
    el("td", {}, el("code", {}, e.kernel || "–")));
}

// What a keep-test search found (worker/engine/inductor/explain.py
// _keep_search): its causes (each written by cause(id)), its sets needed
// together, [one, several] what keeping them does ("costs the loss", "cost
// the loss"); how many tests, and whether the budget stopped it.
function keptSetsText(s, [one, several], cause) {
  const parts = [];
  if ((s.causes || []).length)
    parts.push("any one of " + s.causes.length + " kept fused, everything else unfused, " + one + ": " + s.causes.map(cause).join(", "));
  for (const g of s.together || [])
    parts.push("these " + g.length + " kept together, neither half alone, " + several + ": " + g.join(", "));
  if (!parts.length) parts.push("no kept set found");
  return parts.join("; ") + " (" + (s.tests || []).length + " keep-tests" + (s.stopped === "budget" ? ", stopped by the budget" : "") + ")";
}

// "allocated at each call: X MB fused, Y MB with every decision undone", or "".
function allocatedText(s) {
  const al = (s.evidence || {}).allocated_per_call;
  const mb = (x) => ((x || {}).bytes / 1e6).toFixed(1) + " MB";
  return al ? "allocated at each call: " + mb(al.fused) + " fused, " + mb(al.all_undone) + " with every decision undone" : "";
}

// Every decision undone at once lost, none alone: what keeping showed
// (explain.py _interaction).
function interactionText(it) {
  const al = allocatedText(it);
  return keptSetsText(it, ["costs the loss", "cost the loss"], (id) => id) + ". Reason: " + (it.reason || "unexplained").replace(/_/g, " ") +
    (al ? " (" + al + ")" : "");
}

// Inductor's extra peak held by fusions together, or by any one of several:
// what the profiled (untimed) keep-tests showed (explain.py _peak_interaction).
function peakInteractionText(pi) {
  const alone = (id) => {
    const t = (pi.tests || []).find((x) => (x.kept || []).length === 1 && x.kept[0] === id);
    return id + (t && typeof t.adds_bytes === "number" ? " (+" + fmtBytes(t.adds_bytes) + " kept alone)" : "");
  };
  const al = allocatedText(pi);
  return fmtBytes(pi.extra_peak_bytes) + " above every decision undone, no decision alone half of it; " +
    keptSetsText(pi, ["brings it back", "bring it back"], alone) + (al ? "; " + al : "");
}

// From inductor-nofusion's median to inductor's: the fusions that won, lost,
// made no difference (each measured alone), and their interaction.
function drawInductorWaterfall(fx) {
  const m = fx.medians || {}, fus = fx.fusions || [];
  if (typeof m["inductor-nofusion"] !== "number" || typeof m.inductor !== "number" || !hasChart()) return false;
  const sum = (v) => fus.filter((e) => e.verdict === v && e.measured === "alone").reduce((a, e) => a + e.saved_ms, 0);
  // with no fusion measured alone (all in chunks) there are no parts: the
  // whole step is one bar, not four empty ones that leave it unaccounted
  const steps = typeof fx.sum_of_parts_ms === "number" ? [["won", sum("won")], ["lost", sum("lost")],
    ["no difference", sum("no_difference")],
    ["interaction", typeof fx.interaction_ms === "number" ? fx.interaction_ms : 0]]
    : [["fusion, none measured alone", m["inductor-nofusion"] - m.inductor]];
  drawBars(stepBars("inductor-nofusion", m["inductor-nofusion"], steps, "inductor", m.inductor));
  return true;
}

// Inductor's cost model audited: its predicted shared bytes against the
// measured saving, one point per fusion measured alone, colored by verdict,
// and one per chunk of fusions undone together within the noise (their
// predictions summed), hollow.
function drawCostModel(fx) {
  const box = document.getElementById("costmodel-box");
  const cm = fx.cost_model || {};
  const pts = cm.points || [];
  const chunks = (cm.units || []).filter((u) => u.decisions > 1);
  box.hidden = !(pts.length || chunks.length) || !hasChart();
  if (box.hidden) return;
  const by = (v) => pts.filter((p) => p.verdict === v).map((p) => ({ x: p.predicted_shared_bytes, y: p.saved_ms, id: p.id }));
  const grouped = chunks.map((u) => ({ x: u.predicted_shared_bytes, y: u.saved_ms, id: u.decisions + " fusions undone together" }));
  drawChart("chart-costmodel", {
    type: "scatter",
    data: { datasets: [
      { label: "won", data: by("won"), backgroundColor: COLORS.ok },
      { label: "lost", data: by("lost"), backgroundColor: COLORS.bad },
      { label: "no difference", data: by("no_difference"), backgroundColor: "#b0b7c3" },
      { label: "a chunk within the noise", data: grouped, backgroundColor: "rgba(0,0,0,0)", borderColor: "#6b7280", pointRadius: 5 }] },
    options: {
      scales: { x: { beginAtZero: true, title: { display: true, text: "Inductor's predicted shared bytes" } },
        y: { title: { display: true, text: "saved ms (undone − inductor)" } } },
      plugins: { tooltip: { callbacks: { label: (c) => c.raw.id + ": " + c.raw.x + " B, " + c.raw.y.toFixed(4) + " ms" } } },
    },
  });
}

// The Explain card's subtitle, by engine.
const EXPLAIN_SUB = {
  native: "which fusion groups won, which lost, and why; click a group to see it in the graph (docs/EXPLAIN.md)",
  inductor: "which of Inductor's fusion decisions won, which lost, and why: each undone and timed against the job's compile (docs/EXPLAIN.md)",
};

// The inductor engine's explanation: the ladder's steps; with "fusions",
// each of Inductor's fusion decisions undone with its verdict, the waterfall
// from inductor-nofusion to inductor, and the cost model's scatter; without,
// its fused kernels with eager's per-call time of each ATen op type they name.
function renderInductor(ex) {
  document.getElementById("explain-sub").textContent = EXPLAIN_SUB.inductor;
  document.getElementById("explain-none").hidden = true;
  document.getElementById("explain-body").hidden = false;
  const fx = ex.fusions && !ex.fusions.error ? ex.fusions : null;
  const items = [["how", ex.note || ""]].concat((ex.ladder || []).map((st) =>
    [st.from + " → " + st.to, (st.saved_ms >= 0 ? "saves " : "costs ") + Math.abs(st.saved_ms).toFixed(3) +
      " ms, 95% CI " + ciText(st.saved_ci95) + " (" + st.mechanism + ")"]));
  if (ex.fusions && ex.fusions.error) items.push(["fusion by fusion", ex.fusions.error]);
  if (fx) {
    const c = fx.counts || {}, all = fx.all_lost_undone, cm = fx.cost_model || {}, be = (fx.break_even || {}).inductor;
    items.push(["fusions", c.won + " won, " + c.lost + " lost, " + c.no_difference + " no difference" +
      (c.not_measured ? ", " + c.not_measured + " not measured in the " + Math.round(fx.budget_s) + " s budget" : "")]);
    items.push(["layout noise", typeof fx.layout_noise_ms === "number" ? fx.layout_noise_ms.toFixed(4) + " ms (the same code built twice)" : "–"]);
    if (fx.recompiles_during_comparisons > 0)
      items.push(["warning", fx.recompiles_during_comparisons + " graphs compiled while comparisons ran: those comparisons timed code other than they name"]);
    items.push(["fused kernels on the roofline", typeof fx.fused_roofline_share === "number" ? (100 * fx.fused_roofline_share).toFixed(0) +
      "% (time-weighted, the kernels holding a decision; Inductor's byte and FLOP counts)" : "–"]);
    if (typeof fx.ladder_step_ms === "number")
      items.push(["all fusion vs its parts", (fx.ladder_step_ms >= 0 ? "saves " : "costs ") + Math.abs(fx.ladder_step_ms).toFixed(3) + " ms; " +
        (typeof fx.sum_of_parts_ms === "number" ? "measured alone they add up to " + fx.sum_of_parts_ms.toFixed(3) + " ms; interaction " +
          (typeof fx.interaction_ms === "number" ? fx.interaction_ms.toFixed(3) : "–") + " ms"
          : "no fusion was measured alone, so there is no sum of parts to set against it")]);
    // saved_ms > 0: inductor is that much faster with the part (the decisions,
    // or a knob that the no-fusion rung switches off, here switched off alone)
    // one part measured against the job's compile: what it saves or costs
    const partText = (p) => typeof p.saved_ms === "number" ? (p.saved_ms >= 0 ? "it saves " : "it costs ") +
      Math.abs(p.saved_ms).toFixed(3) + " ms, 95% CI " + ciText(p.ci95) + " (" + p.verdict.replace(/_/g, " ") + ")"
      : p.verdict.replace(/_/g, " ");
    // (results stored before parts carried their knob: its name is what's text up to "=")
    const knobName = (p) => (p.knob || p.what.split("=")[0]).replace(/_/g, " ") + " (switched off alone)";
    for (const p of ((fx.step || {}).parts || []))
      items.push([p.part === "decisions" ? "the step: fusion decisions" : "the step: " + knobName(p),
        partText(p) + (p.part === "decisions" ? "; " + p.what : "")]);
    if (typeof (fx.step || {}).rest_ms === "number")
      items.push(["the step's rest", fx.step.rest_ms.toFixed(3) + " ms: the parts' interaction"]);
    if ((fx.step || {}).interaction) items.push(["the decisions' interaction", interactionText(fx.step.interaction)]);
    // a choice of the compile beside fusion (its convolutions' channels-last
    // layout), switched off alone: no rung shows it, and it can be what puts
    // inductor behind eager
    const med = fx.medians || {}, gap = med.inductor - med.eager;
    for (const p of (fx.beside || []))
      items.push(["beside fusion: " + knobName(p),
        partText(p) + (gap > 0 ? "; inductor is " + gap.toFixed(3) + " ms slower than eager" : "")]);
    // each lost fusion's evidence in words (explain.py why_of)
    const why = (fx.fusions || []).filter((e) => e.verdict === "lost" && e.why);
    if (why.length) items.push(["why they lost", why.slice(0, 8).map((e) => e.id + " (" + e.reason.replace(/_/g, " ") + "): " + e.why).join("; ") +
      (why.length > 8 ? "; and " + (why.length - 8) + " more (hover a reason in the table)" : "")]);
    if (all) items.push(["all lost undone", "recovers " + all.recovered_ms.toFixed(3) + " ms"]);
    items.push(["Inductor's cost model", (typeof cm.spearman === "number" ? "rank correlation " + cm.spearman.toFixed(2) +
      " over the fusions measured alone, " + (cm.bad_fusions || []).length + " predicted to help and measured to hurt" : "too few fusions measured alone") +
      (typeof cm.spearman_units === "number" ? "; " + cm.spearman_units.toFixed(2) + " over all " + (cm.units || []).length +
        " units measured (a chunk within the noise counts as one)" : "")]);
    const top = ((fx.missed || {}).top || []).slice(0, 3);
    items.push(["merges Inductor refused", top.length ? top.map((t) => t.nodes.join(" + ") + " (" + t.shared_bytes + " B): " + t.reason).join("; ") : "none sharing bytes"]);
    // each rung's peak in one iteration and what held it; the parts whose
    // undoing moved inductor's peak (peak_mem_delta_bytes > 0: the part adds that much)
    // (rungs in the ladder's order and holders largest first: a server's
    // JSONB keeps keys in an order of its own)
    const held = (m) => Object.entries(m.held_by || {}).sort((a, b) => b[1] - a[1])
      .map(([k, b]) => k + " " + fmtBytes(b)).join(", ");
    const rank = (r) => { const i = ["eager", "inductor-nofusion", "inductor"].indexOf(r); return i < 0 ? 3 : i; };
    const mem = Object.entries(fx.memory || {}).filter(([, m]) => typeof m.peak_bytes === "number")
      .sort((a, b) => rank(a[0]) - rank(b[0]));
    if (mem.length) items.push(["memory, one iteration's peak", mem.map(([rung, m]) => rung + " " + fmtBytes(m.peak_bytes) +
      (held(m) ? " (" + held(m) + ")" : "")).join(" · ")]);
    // [name, part] pairs whose `key` moved: "name +X; ..." (> 0: the part adds that much)
    const deltas = (pairs, key) => pairs.filter(([, p]) => typeof p[key] === "number" && p[key] !== 0)
      .map(([name, p]) => name + " " + (p[key] > 0 ? "+" : "−") + fmtBytes(Math.abs(p[key]))).join("; ");
    const peak = deltas((fx.fusions || []).map((e) => [e.id, e]).concat(((fx.step || {}).parts || []).concat(fx.beside || [])
      .map((p) => [p.knob || "all fusion decisions", p])), "peak_mem_delta_bytes");
    if (peak) items.push(["what each part adds to inductor's peak", peak + " (against it undone or switched off)"]);
    // what each decision's fusion adds to the bytes allocated at each call (CPU)
    const alloc = deltas((fx.fusions || []).map((e) => [e.id, e]), "alloc_delta_bytes");
    if (alloc) items.push(["what each decision adds to what inductor allocates at each call", alloc + " (against it undone alone)"]);
    if (fx.peak_interaction) items.push(["what holds inductor's extra peak", peakInteractionText(fx.peak_interaction)]);
    if (be) items.push(["break-even vs eager", be.iterations_cold ? be.iterations_cold + " iterations (cold compile), " + be.iterations_warm + " (warm)" : "never: no saving per iteration"]);
  }
  summaryList("explain-summary", items);
  for (const id of ["chart-explain", "chart-roofline", "chart-costmodel"])
    if (charts[id]) { charts[id].destroy(); delete charts[id]; }
  document.getElementById("roofline-box").hidden = true;
  document.getElementById("costmodel-box").hidden = true;
  document.getElementById("chart-explain").parentElement.hidden = true;
  if (fx) {
    setHead("explain-table", INDUCTOR_HEAD);
    fillTable("explain-table", (fx.fusions || []).map(fusionRow));
    // no inductor-nofusion rung timed: no waterfall, and no empty box for one
    document.getElementById("chart-explain").parentElement.hidden = !drawInductorWaterfall(fx);
    drawInductorRoofline(ex, fx);
    drawCostModel(fx);
    return;
  }
  setHead("explain-table", NATIVE_HEAD);
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
  document.getElementById("explain-sub").textContent = EXPLAIN_SUB.native;
  const w = ex.waterfall || {}, s = ex.summary || {};
  document.getElementById("explain-none").hidden = true;
  document.getElementById("explain-body").hidden = false;
  setHead("explain-table", NATIVE_HEAD);
  const items = [
    ["measured difference", (w.measured_ms || 0).toFixed(3) + " ms, 95% CI " + ciText(w.measured_ci95)],
    ["groups", s.won + " won, " + s.lost + " lost, " + s.within_noise + " within noise"],
    ["lost, by reason", Object.entries(s.lost_by_reason || {}).map(([k, v]) => k + " " + v).join(", ") || "–"],
    ["fused kernels on the roofline", typeof s.fused_roofline_share === "number" ? (100 * s.fused_roofline_share).toFixed(0) + "%" : "–"],
    ["profiled rounds", String(ex.rounds)],
    ["layout noise (counterfactuals)", typeof ex.layout_noise_ms === "number" ? ex.layout_noise_ms.toFixed(3) + " ms" : "–"]];
  // a GPU job's: where its launch times came from, and why not CUPTI
  if (ex.launch_times)
    items.push(["launch times", ex.launch_times +
      (ex.launch_times === "cupti_activity" ? " (" + (ex.unmarked_activity || 0) + " activity records no launch mark named)" : "") +
      (ex.launch_times_why ? " (not CUPTI: " + ex.launch_times_why + ")" : "")]);
  summaryList("explain-summary", items);
  fillTable("explain-table", (ex.groups || []).map(groupRow));
  document.getElementById("chart-explain").parentElement.hidden = false;
  drawWaterfall(w);
  drawRoofline(ex);
  document.getElementById("costmodel-box").hidden = true; // an inductor job's, if one was shown
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

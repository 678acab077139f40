// FusionBench dashboard: the job page's model graph (native engine).  The result
// carries the graph in compact form (result.graph: nodes with op, shape and the
// ids of the nodes they read) and, per variant, each node's fusion group
// (variant.node_groups: an index into variant.fusion_groups, or null).  This
// file lays the DAG out in layers (longest path from the input, barycentre
// ordering within a layer) and draws it as SVG built through DOM calls: the
// page's Content-Security-Policy forbids inline styles and scripts, so every
// attribute is set with setAttribute and every position with the CSSOM.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const G = { w: 132, h: 34, gapX: 22, gapY: 18, pad: 16, colGap: 22 }; // node box and spacing, px
// Colour-blind-safe first (Okabe-Ito), then more distinct hues.
const GROUP_COLORS = ["#0072b2", "#e69f00", "#009e73", "#cc79a7", "#d55e00", "#56b4e9", "#8c6d31",
  "#7b4fa0", "#2ca02c", "#b8860b", "#17becf", "#bc3c6b"];
const ZOOMS = [0.25, 0.35, 0.5, 0.7, 0.85, 1, 1.25, 1.5];
const VIEW_OPS = new Set(["reshape", "flatten", "permute", "slice"]);

let graphState = { key: null, job: null, variant: null, zoom: null };

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  for (const c of children) if (c !== null && c !== undefined) node.append(c instanceof Node ? c : String(c));
  return node;
}

function groupColor(i) { return GROUP_COLORS[i % GROUP_COLORS.length]; }

function isLight(hex) {
  const c = parseInt(hex.slice(1), 16);
  return 0.299 * (c >> 16) + 0.587 * ((c >> 8) & 255) + 0.114 * (c & 255) > 150;
}

function shapeText(shape) { return Array.isArray(shape) ? shape.join("×") : "?"; }

// Shape without the batch dimension, short enough for a node box.
function shortShape(shape) {
  if (!Array.isArray(shape) || !shape.length) return "";
  const s = (shape.length > 1 ? shape.slice(1) : shape).join("×");
  return s.length > 18 ? s.slice(0, 17) + "…" : s;
}

// ---- layout ----

// Layers: the input is layer 0, a node sits one below its deepest input.
function assignLayers(nodes) {
  const layer = new Map([[-1, 0]]);
  for (const n of nodes) {
    let l = 0;
    for (const p of n.in || []) l = Math.max(l, layer.has(p) ? layer.get(p) : 0);
    layer.set(n.id, l + 1);
  }
  return layer;
}

// Order within each layer by the mean position of a node's inputs (two sweeps
// are enough for these graphs: mostly chains with residual or q/k/v branches).
function orderLayers(nodes, layer) {
  const rows = [];
  const put = (id) => { const l = layer.get(id); (rows[l] = rows[l] || []).push(id); };
  put(-1);
  for (const n of nodes) put(n.id);
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const pos = new Map();
  rows.forEach((r) => r.forEach((id, i) => pos.set(id, i - (r.length - 1) / 2)));
  for (let sweep = 0; sweep < 2; sweep++) {
    for (let l = 1; l < rows.length; l++) {
      const r = rows[l] || [];
      const bary = (id) => {
        const ins = (byId.get(id).in || []).filter((p) => pos.has(p));
        return ins.length ? ins.reduce((a, p) => a + pos.get(p), 0) / ins.length : 0;
      };
      const keyed = r.map((id, i) => [bary(id), i, id]).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
      rows[l] = keyed.map((k) => k[2]);
      rows[l].forEach((id, i) => pos.set(id, i - (rows[l].length - 1) / 2));
    }
  }
  return rows;
}

// Pixel centres of every node.  A model is a deep, narrow DAG, so the layers
// run top to bottom in columns of at most LAYERS_PER_COL, the columns left to
// right (a column ends where the next begins), each layer centred in its column.
const LAYERS_PER_COL = 16;
function layout(graph) {
  const nodes = graph.nodes || [];
  const rows = orderLayers(nodes, assignLayers(nodes));
  const per = rows.length > LAYERS_PER_COL + 4 ? LAYERS_PER_COL : rows.length;
  const widest = Math.max(1, ...rows.map((r) => (r ? r.length : 0)));
  const colW = widest * (G.w + G.gapX) - G.gapX + 2 * G.colGap;
  const cols = Math.ceil(rows.length / per);
  const xy = new Map();
  rows.forEach((r, l) => (r || []).forEach((id, i) => {
    const x = G.pad + (Math.floor(l / per) + 0.5) * colW + (i - (r.length - 1) / 2) * (G.w + G.gapX);
    xy.set(id, [x, G.pad + G.h / 2 + (l % per) * (G.h + G.gapY)]);
  }));
  return { xy, width: cols * colW + 2 * G.pad, height: per * (G.h + G.gapY) - G.gapY + 2 * G.pad };
}

// ---- drawing ----

// A curve from a's bottom to b's top.  An edge into a later column would cross
// the drawing: it is cut into two stubs (out of a, into b), drawn dashed.
function edgePath(a, b) {
  const y0 = a[1] + G.h / 2, y1 = b[1] - G.h / 2, dy = Math.max(8, (y1 - y0) / 2);
  if (y1 < y0) return "M" + a[0] + "," + y0 + " l0,10 M" + b[0] + "," + (y1 - 12) + " l0,12";
  return "M" + a[0] + "," + y0 + " C" + a[0] + "," + (y0 + dy) + " " + b[0] + "," + (y1 - dy) + " " + b[0] + "," + y1;
}

function nodeBox(n, at, gi, v) {
  const isView = VIEW_OPS.has(n.op);
  const fused = gi !== null && gi !== undefined;
  const cls = "gnode" + (fused ? " fused" : "") + (isView ? " view" : "");
  const g = svg("g", { class: cls, transform: "translate(" + (at[0] - G.w / 2) + "," + (at[1] - G.h / 2) + ")",
    "data-id": n.id, "data-group": fused ? gi : "" });
  const rect = svg("rect", { width: G.w, height: G.h, rx: 6, ry: 6 });
  if (fused) {
    rect.setAttribute("fill", groupColor(gi));
    if (isLight(groupColor(gi))) g.classList.add("light"); // dark text on light fills
  }
  g.append(rect,
    svg("text", { x: G.w / 2, y: 14, class: "op" }, n.op),
    svg("text", { x: G.w / 2, y: 27, class: "shape" }, shortShape(n.shape)));
  const grp = fused && v.fusion_groups ? v.fusion_groups[gi] : null;
  g.dataset.tip = JSON.stringify({ op: n.op, name: n.name, shape: shapeText(n.shape),
    group: grp ? "#" + gi + " " + grp.rule + " · " + grp.kind + " (" + (grp.ops || []).join(" → ") + ")" : "none: a kernel of its own" + (isView ? " (a view, no kernel)" : "") });
  return g;
}

function drawGraph(graph, v) {
  const { xy, width, height } = layout(graph);
  const root = svg("svg", { width, height, viewBox: "0 0 " + width + " " + height, class: "graph-svg", role: "img" });
  root.dataset.w = width;
  root.dataset.h = height;
  root.append(svg("defs", {}, svg("marker", { id: "g-arrow", viewBox: "0 0 8 8", refX: 7, refY: 4,
    markerWidth: 6, markerHeight: 6, orient: "auto" }, svg("path", { d: "M0,0 L8,4 L0,8 z", class: "arrow" }))));
  const edges = svg("g", { class: "edges" });
  const groups = (v && v.node_groups) || [];
  for (const n of graph.nodes || [])
    for (const p of n.in || [])
      if (xy.has(p)) {
        const d = edgePath(xy.get(p), xy.get(n.id));
        edges.append(svg("path", { d, class: d.includes("l0,") ? "edge cut" : "edge", "marker-end": "url(#g-arrow)" }));
      }
  const nodes = svg("g", { class: "nodes" });
  const inAt = xy.get(-1);
  if (inAt) {
    const g = svg("g", { class: "gnode input", transform: "translate(" + (inAt[0] - G.w / 2) + "," + (inAt[1] - G.h / 2) + ")", "data-group": "" });
    g.append(svg("rect", { width: G.w, height: G.h, rx: 17, ry: 17 }), svg("text", { x: G.w / 2, y: 14, class: "op" }, "input"),
      svg("text", { x: G.w / 2, y: 27, class: "shape" }, shortShape((graph.input || {}).shape)));
    g.dataset.tip = JSON.stringify({ op: "input", name: "the graph input", shape: shapeText((graph.input || {}).shape), group: "–" });
    nodes.append(g);
  }
  for (const n of graph.nodes || []) if (xy.has(n.id)) nodes.append(nodeBox(n, xy.get(n.id), groups[n.id], v || {}));
  root.append(edges, nodes);
  return root;
}

// ---- legend, tooltip, zoom ----

function legend(v) {
  const box = document.getElementById("graph-legend");
  const fg = (v && v.fusion_groups) || [];
  const used = new Set(((v && v.node_groups) || []).filter((g) => g !== null));
  if (!fg.length) {
    box.replaceChildren(el("span", { class: "muted" }, "No fusion groups in " + (v ? v.name : "this variant") +
      ": every op is a kernel of its own."), el("span", {}, el("i", { class: "sw plain" }), "op (own kernel)"));
    return;
  }
  const items = fg.map((g, i) => {
    const sw = el("i", { class: "sw" });
    sw.style.background = groupColor(i); // CSSOM: allowed under the page's CSP
    return el("span", { class: used.has(i) ? "" : "muted", title: (g.ops || []).join(" → ") }, sw,
      el("b", {}, g.rule), " · " + g.kind + " ×" + g.count);
  });
  box.replaceChildren(...items, el("span", {}, el("i", { class: "sw plain" }), "not fused"),
    el("span", {}, el("i", { class: "sw view" }), "view (no kernel)"));
}

function showTip(ev) {
  const tip = document.getElementById("graph-tip");
  const g = ev.target.closest && ev.target.closest(".gnode");
  if (!g || !g.dataset.tip) { tip.hidden = true; return; }
  const t = JSON.parse(g.dataset.tip);
  tip.replaceChildren(el("b", {}, t.op), " ", el("span", { class: "muted" }, t.name || ""),
    el("div", {}, "shape " + t.shape), el("div", {}, "group " + t.group));
  const card = document.getElementById("graph-card").getBoundingClientRect();
  tip.style.left = (ev.clientX - card.left + 14) + "px";
  tip.style.top = (ev.clientY - card.top + 14) + "px";
  tip.hidden = false;
}

function applyZoom() {
  const s = document.querySelector("#graph-box svg");
  if (!s) return;
  const z = ZOOMS[graphState.zoom];
  s.setAttribute("width", Math.round(s.dataset.w * z));
  s.setAttribute("height", Math.round(s.dataset.h * z));
  document.getElementById("graph-zoom").textContent = Math.round(z * 100) + "%";
}

// The zoom that fits the graph's width in the box, at most 100%.
function fitZoom(width) {
  const avail = document.getElementById("graph-box").clientWidth || 1200;
  let i = ZOOMS.length - 1;
  while (i > 0 && (ZOOMS[i] > 1 || width * ZOOMS[i] > avail)) i--;
  return i;
}

function toolbar(job, variants) {
  const tools = document.getElementById("graph-tools");
  const buttons = variants.map((v) => el("button", { type: "button", class: v.name === graphState.variant ? "seg on" : "seg",
    "data-variant": v.name, onclick: () => { graphState.variant = v.name; graphState.key = null; window.fbJobGraph(job); } }, v.name));
  const step = (d) => () => { graphState.zoom = Math.max(0, Math.min(ZOOMS.length - 1, graphState.zoom + d)); applyZoom(); };
  tools.replaceChildren(el("span", { class: "segs" }, ...buttons),
    el("span", { class: "zoom" }, el("button", { type: "button", onclick: step(-1), title: "zoom out" }, "−"),
      el("span", { id: "graph-zoom" }, ""), el("button", { type: "button", onclick: step(1), title: "zoom in" }, "+")));
}

window.fbJobGraph = function (job) {
  const result = job.result || {};
  const graph = result.graph;
  const variants = (result.variants || []).filter((v) => Array.isArray(v.node_groups));
  const note = document.getElementById("graph-note");
  const box = document.getElementById("graph-box");
  if (!graph || !Array.isArray(graph.nodes)) {
    const why = !job.result ? "No result yet." : "This workload has no graph: it is a single fusion pattern, not a model built as a graph (native engine models only).";
    if (graphState.key !== "none:" + why) {
      graphState = { key: "none:" + why, job: job.id, variant: null, zoom: null };
      note.textContent = "";
      box.replaceChildren(el("p", { class: "muted" }, why));
      document.getElementById("graph-tools").replaceChildren();
      document.getElementById("graph-legend").replaceChildren();
    }
    return;
  }
  if (graphState.job !== job.id) graphState = { key: null, job: job.id, variant: null, zoom: null };
  const names = variants.map((v) => v.name);
  if (!names.includes(graphState.variant)) graphState.variant = names.includes("fused") ? "fused" : names[names.length - 1] || null;
  const key = job.id + ":" + graphState.variant;
  if (graphState.key === key) return; // auto-refresh: the drawing stays as it is (zoom, scroll)
  graphState.key = key;
  const v = variants.find((x) => x.name === graphState.variant);
  note.textContent = "(" + graph.n_nodes + " ops" + (graph.truncated ? ", the first " + graph.nodes.length + " drawn: truncated" : "") +
    "; coloured by fusion group of the selected variant; hover a node for its op, shape and group)";
  toolbar(job, variants);
  legend(v);
  const drawing = drawGraph(graph, v);
  box.replaceChildren(drawing);
  if (graphState.zoom === null) graphState.zoom = fitZoom(Number(drawing.dataset.w));
  applyZoom();
};

document.addEventListener("DOMContentLoaded", () => {
  const box = document.getElementById("graph-box");
  box.addEventListener("mousemove", showTip);
  box.addEventListener("mouseleave", () => { document.getElementById("graph-tip").hidden = true; });
});

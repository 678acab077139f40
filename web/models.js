// The Models page: the models people bring themselves (docs/API-EXTENSIONS.md,
// "Your own models"): an upload form with a progress bar, and the models the
// signed-in user may see.  Uses app.js's helpers (api, el, fillTable, ...).
"use strict";

// XMLHttpRequest, not fetch: only it reports an upload's progress.
function uploadModel(ev) {
  ev.preventDefault();
  const name = document.getElementById("mf-name").value.trim();
  const vis = document.getElementById("mf-visibility").value;
  const file = document.getElementById("mf-file").files[0];
  const bar = document.getElementById("mf-progress"), msg = document.getElementById("mf-message");
  if (!name || !file) { msg.textContent = "a name and a file, please"; return; }
  const xhr = new XMLHttpRequest();
  xhr.open("POST", API + "/models?name=" + encodeURIComponent(name) + "&visibility=" + encodeURIComponent(vis));
  xhr.setRequestHeader("Content-Type", "application/octet-stream");
  xhr.setRequestHeader("X-FusionBench-Client", "dashboard");
  if (apiToken()) xhr.setRequestHeader("Authorization", "Bearer " + apiToken());
  bar.hidden = false;
  bar.value = 0;
  msg.textContent = "uploading " + file.name + " (" + fmtBytes(file.size) + ")";
  xhr.upload.onprogress = (e) => { if (e.lengthComputable) bar.value = e.loaded / e.total; };
  xhr.onload = () => {
    let body = null;
    try { body = JSON.parse(xhr.responseText); } catch (e) { body = null; }
    if (xhr.status === 201 && body) {
      msg.textContent = "uploaded as model " + body.id + " (sha256 " + body.sha256.slice(0, 12) + "…): preparing";
      document.getElementById("model-form").reset();
      loadModels().catch((e) => setStatus(e.message, true));
    } else {
      const err = body && body.error ? body.error : { message: "HTTP " + xhr.status };
      msg.textContent = "upload failed: " + err.message + (err.field ? " (" + err.field + ")" : "");
    }
    bar.hidden = true;
  };
  xhr.onerror = () => { msg.textContent = "upload failed: the connection broke"; bar.hidden = true; };
  xhr.send(file);
}

async function deleteModel(m) {
  if (!confirm("Delete model " + m.name + " (" + m.id + ")?")) return;
  try {
    await api("/models/" + m.id, { method: "DELETE" });
    await loadModels();
  } catch (e) { setStatus("delete failed: " + e.message, true); }
}

function modelStatus(m) {
  const cell = el("td", {}, badge(m.status));
  if (m.error) cell.append(" ", el("span", { class: "muted" }, m.error));
  return cell;
}

// "x [2, 3, 16, 16] float32, batch dynamic" for an input or output spec.
function tensorSpec(t) {
  const dyn = (t.dynamic_dims || []).length
    ? " (dynamic: dim " + t.dynamic_dims.join(", ") + ")" : "";
  return (t.name ? t.name + " " : "") + "[" + t.shape.join(", ") + "] " + t.dtype + dyn;
}

// Whether the native engine runs the program: its graph's size and operators
// and its native form, or why not (the ATen operators it has no mapping for).
function nativeForm(n) {
  if (!n) return "–";
  if (!n.ok) {
    const lacks = Object.entries(n.unsupported_ops || {}).map(([k, c]) => k + " ×" + c);
    return el("span", {}, badge("invalid"), " " +
      (lacks.length ? "lacks " + lacks.join(", ") : n.why));
  }
  const ops = Object.entries(n.ops || {}).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
  return "converts to " + n.nodes + " graph nodes (" + ops.map(([k, c]) => k + " ×" + c).join(", ") +
    ")" + (n.batch_dynamic ? ", any batch" : "") +
    (n.form ? "; native form " + fmtBytes(n.form.bytes) : "; no native form (upload it again)");
}

// A job of the model on engine, then its page.
async function benchmarkModel(m, engine) {
  try {
    const job = await api("/jobs", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ workload: "model." + m.id, engine,
        labels: { source: "dashboard" } }) });
    location.hash = "#/jobs/" + job.id;
  } catch (e) { setStatus("submit failed: " + e.message, true); }
}

// The details card of one model: what preparing found, or why it is invalid.
function showModel(m) {
  const card = document.getElementById("model-detail");
  document.getElementById("model-detail-title").textContent =
    "Model " + m.id + ": " + m.name + (m.owner ? " (" + m.owner + ")" : "");
  const info = m.info || {};
  const pairs = [["status", badge(m.status)]];
  if (m.error) pairs.push(["why", el("span", {}, m.error)]);
  pairs.push(["sha256", el("code", {}, m.sha256)], ["size", fmtBytes(m.size)]);
  if (m.status === "ready") {
    // most called first (the database keeps an object's keys in its own order)
    const ops = Object.entries(info.ops || {}).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
    const values = info.input_values || {};
    const native = info.native && info.native.ok && info.native.form;
    pairs.push(
      ["inputs", ((info.inputs || []).map(tensorSpec).join("; ") || "–") +
        (values.source === "uploaded" ? "; yours (" + (values.shapes || []).map((s) => "[" +
          s.join(", ") + "]").join(", ") + ")" : "; seeded random values")],
      ["outputs", (info.outputs || []).map(tensorSpec).join("; ") || "–"],
      ["batch", info.dynamic_batch ? "dynamic: any batch size" : "fixed by the export"],
      ["parameters", fmtNum(info.parameters) + " (" + fmtBytes(info.weight_bytes) + " of weights)"],
      ["eager (CPU)", fmtMs(info.eager && info.eager.median_ms) + " ms, median of " + fmtNum(info.eager && info.eager.runs)],
      ["ops", fmtNum(info.op_count) + " calls of " + ops.length + " operators: " +
        ops.slice(0, 12).map(([k, n]) => k + " ×" + n).join(", ") + (ops.length > 12 ? ", …" : "")],
      ["native engine", nativeForm(info.native)],
      ["exported with", "torch " + fmtNum(info.torch) + ", schema " + fmtNum(info.schema_version)],
      ["benchmark", el("span", {},
        el("button", { type: "button", onclick: () => benchmarkModel(m, "inductor") },
          "Benchmark (inductor)"), " ",
        native ? el("button", { type: "button", onclick: () => benchmarkModel(m, "native") },
          "Benchmark (native)") : "",
        " or ", el("code", {}, "fusionbench submit model." + m.id + " --engine " +
          (native ? "native" : "inductor") + " --explain --wait"))]);
  }
  summaryList("model-detail-list", pairs);
  card.hidden = false;
}

async function loadModels() {
  const page = await api("/models");
  const shown = document.getElementById("model-detail");
  const open = shown.hidden ? null : shown.dataset.id;
  if (open && !page.items.some((m) => String(m.id) === open)) shown.hidden = true;
  for (const m of page.items) if (String(m.id) === open) showModel(m);
  fillTable("models-table", page.items.map((m) => el("tr", {},
    el("td", { class: "num" }, String(m.id)),
    el("td", {}, el("a", { href: "#/models", class: "model-link",
      onclick: (e) => { e.preventDefault(); shown.dataset.id = String(m.id); showModel(m); } },
      el("code", {}, m.name))),
    el("td", {}, m.owner || "–"), el("td", {}, m.visibility), modelStatus(m),
    el("td", { class: "num" }, fmtBytes(m.size)),
    el("td", { title: m.sha256 }, el("code", {}, m.sha256.slice(0, 12) + "…")),
    el("td", {}, fmtTime(m.created_at)),
    el("td", {}, m.mine ? el("button", { type: "button", onclick: () => deleteModel(m) }, "Delete") : ""))));
}

window.fbViews = Object.assign(window.fbViews || {}, {
  models: { view: "models", load: loadModels },
});

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("model-form").addEventListener("submit", uploadModel);
});
